"""How big is the code that decides whether bytes reach JAX? (docs/explanation/security-model.md)

The trusted path, listed here by hand and explicitly: a module or one function of a module
(`path::function`) per line, grouped by what it decides. Read from src/ with ast and tokenize
(nothing is imported). Counted per item: lines (physical, the item's span) and code lines
(lines holding a token that is neither a comment nor part of a docstring). A listed file or
function that does not exist is an error: the list follows the code or the script fails
(tests/test_trusted_size.py runs it).

    python scripts/trusted_size.py            # a table, and the totals
    python scripts/trusted_size.py --json     # one JSON object
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "jaxcache"

# (part, item): what each part decides is said in docs/explanation/security-model.md,
# "The trusted path"
TRUSTED_PATH: tuple[tuple[str, str], ...] = (
    # the audit's verdict: who can create, replace or rename what JAX loads
    ("audit", "trust/judgement/audit.py"),
    ("audit", "trust/judgement/plain_entries.py"),
    ("audit", "trust/judgement/verdict.py"),
    ("audit", "trust/judgement/storage.py"),
    ("audit", "trust/judgement/storage_devices.py"),
    ("audit", "trust/judgement/sealed_view.py"),
    ("audit", "trust/judgement/bucket_view.py"),
    ("audit", "trust/findings.py"),
    ("audit", "trust/kernel/walk.py"),
    ("audit", "trust/kernel/access.py"),
    ("audit", "trust/kernel/acl.py"),
    ("audit", "trust/kernel/principals.py"),
    ("audit", "mounts.py"),
    ("audit", "trust/kernel/overlay.py"),
    ("audit", "trust/kernel/sysfs.py"),
    ("audit", "userns.py"),
    ("audit", "trust/kernel/entries.py"),
    ("audit", "trust/kernel/open_handles.py"),
    ("audit", "trust/kernel/process_table.py"),
    ("audit", "trust/rules/policy_rules.py"),
    ("audit", "trust/rules/target.py"),
    # the remembered judgement: when an earlier verdict on the entries still stands
    ("shortcut", "trust/judgement/shortcut.py"),
    ("shortcut", "trust/judgement/memo_format.py"),
    ("shortcut", "trust/inputs/audit_memo.py"),
    # where entries came from: origin ledger, its binding, and the refusal it leads to
    ("origin", "trust/provenance/origin.py"),
    ("origin", "trust/provenance/ledger_file.py"),
    ("origin", "trust/provenance/birth.py"),
    ("origin", "trust/judgement/origin_findings.py"),
    ("origin", "trust/rules/ci.py"),
    ("origin", "lifecycle/witness.py::gatekeeper"),
    # the inputs that decide whom you trust: read only as trusted files
    ("inputs", "trust/inputs/trusted_file.py"),
    ("inputs", "trust/inputs/policy.py"),
    ("inputs", "trust/inputs/policy_toml.py"),
    ("inputs", "trust/inputs/ledger.py"),
    ("inputs", "trust/inputs/public_keys.py"),
    # the admission: the audit's verdict turned into a grant (run, enable(), a new directory)
    ("admission", "lifecycle/admission.py"),
    ("admission", "run/command.py::_admit"),
    ("admission", "run/command.py::audited_env"),
    ("admission", "lifecycle/enabling.py::_enable"),
    ("admission", "trust/create.py"),
    # the guard JAX's cache factory goes through, installed in the job before JAX opens a cache
    ("guard", "jaxcompat/guard.py"),
    ("guard", "jaxcompat/backend.py"),
    ("guard", "probe/site.py::_install_guard"),
    # the sealed store's verification: which signed entries a sealed reader loads
    ("sealed", "seal/stores/sealed_cache.py"),
    ("sealed", "seal/signing/signature_rule.py"),
    ("sealed", "seal/signing/signature_doc.py"),
    ("sealed", "seal/signing/digest.py"),
    ("sealed", "seal/signing/build_claims.py"),
    ("sealed", "seal/signing/identity_policy.py"),
    ("sealed", "seal/signing/keyless.py"),
    ("sealed", "trust/rules/keyring.py"),
    ("sealed", "trust/rules/identities.py"),
    # a generation's reader: which entries of a published generation a reader loads
    ("generation", "seal/generations/manifest.py"),
    ("generation", "seal/generations/reading.py::pointed"),
    ("generation", "seal/generations/reading.py::load"),
    ("generation", "seal/generations/generation_cache.py"),
)


def _docstring_lines(tree: ast.AST) -> set[int]:
    """The lines of every docstring (a string that is the first statement of a module, class
    or function)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                first = body[0]
                out.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return out


def _code_lines(text: str, docstrings: set[int]) -> set[int]:
    """Lines holding a token that is not a comment, a line break or an indent."""
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENDMARKER, tokenize.ENCODING}
    out: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in skip:
            continue
        out.update(line for line in range(tok.start[0], tok.end[0] + 1)
                   if line not in docstrings)
    return out


def measure(item: str) -> tuple[int, int]:
    """(lines, code lines) of a module or of one top-level function in it."""
    path, _, function = item.partition("::")
    file = PACKAGE / path
    if not file.is_file():
        raise SystemExit(f"trusted_size: no such module: {path}")
    text = file.read_text(encoding="utf-8")
    tree = ast.parse(text)
    code = _code_lines(text, _docstring_lines(tree))
    if not function:
        return len(text.splitlines()), len(code)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            span = range(start, (node.end_lineno or node.lineno) + 1)
            return len(span), len(code & set(span))
    raise SystemExit(f"trusted_size: no function {function} in {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--json", action="store_true", help="one JSON object")
    args = ap.parse_args()
    rows = [(part, item, *measure(item)) for part, item in TRUSTED_PATH]
    parts: dict[str, list[int]] = {}
    for part, _, lines, code in rows:
        total = parts.setdefault(part, [0, 0])
        total[0] += lines
        total[1] += code
    lines = sum(r[2] for r in rows)
    code = sum(r[3] for r in rows)
    if args.json:
        json.dump({"items": [{"part": p, "item": i, "lines": n, "code_lines": c}
                             for p, i, n, c in rows],
                   "parts": {p: {"lines": n, "code_lines": c} for p, (n, c) in parts.items()},
                   "lines": lines, "code_lines": code}, sys.stdout, indent=2)
        print()
        return
    width = max(len(i) for _, i, _, _ in rows)
    print(f"{'part':10s} {'module or function':{width}s} {'lines':>6s} {'code':>6s}")
    for part, item, n, c in rows:
        print(f"{part:10s} {item:{width}s} {n:6d} {c:6d}")
    print()
    for part, (n, c) in parts.items():
        print(f"{part:10s} {'':{width}s} {n:6d} {c:6d}")
    print(f"{'total':10s} {f'{len(rows)} items':{width}s} {lines:6d} {code:6d}")


if __name__ == "__main__":
    main()
