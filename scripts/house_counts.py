"""The house's counts (issue 43): how far data between the packages travels typed, read from
src/ with ast (nothing is imported). tests/test_house_counts.py runs this script and holds
each count to its target, or to a ratchet where the target is not reached yet.

    python scripts/house_counts.py            # a table
    python scripts/house_counts.py --json     # one JSON object

Counts:
  string_key_lookups   d["key"] and d.get("key") read (not written) in src/, outside the
                       modules that are a document's model or its writer (MODEL_MODULES)
  untyped_seams        parameters and returns of public functions annotated with a bare
                       `dict`, `Any` or `JsonObject` (dict[str, Any]), or with none: an
                       unannotated seam
  mypy_exempt          modules pyproject.toml still exempts from mypy --strict
  import_circles       circles among modules, and among the parts of any package
  duplicate_basenames  module names used twice under src/jaxcache outside cli/ and report/
  crowded_folders      folders (but cli/ and report/) holding more than 12 modules directly
  private_imports      `from jaxcache.x import _name` of a name private to another module
  type_only_spellings  type-only imports spelled other than `TYPE_CHECKING = False` /
                       `if TYPE_CHECKING:` (`if False:`, typing's TYPE_CHECKING)
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PACKAGE = SRC / "jaxcache"
# Modules that parse one document into its typed model (or write one as plain JSON): the edge
# where string keys belong. Each is a parser and value classes, nothing else.
MODEL_MODULES = (
    "jaxcache/probe/",  # writes plain JSON inside the user's job (no models there)
    "jaxcache/documents/", "jaxcache/validate.py",  # reading and checking jaxcache's documents
    "jaxcache/decide/facts.py",  # the audit and bench documents, as decide reads them
    "jaxcache/records/run_document.py",  # the run record, for every reader
    "jaxcache/records/probe_output.py",  # the probe's document, for the builder
    "jaxcache/bench/bench_document.py",  # the bench result
    "jaxcache/lifecycle/seal_spec.py",  # the sealed job's spec, as its environment carries it
    "jaxcache/trust/inputs/policy_toml.py",  # the policy file
    "jaxcache/project/project_toml.py",  # the project file (issue 44)
    "jaxcache/trust/inputs/pkcs11_uri.py",  # a PKCS#11 URI
    "jaxcache/fingerprint/model.py",  # a fingerprint, and the one a parent hands down
    "jaxcache/fingerprint/memo_file.py",  # the digest memo
    "jaxcache/fingerprint/cpuinfo.py",  # /proc/cpuinfo
    "jaxcache/net/launch_env.py",  # the launchers' environment variables
    "jaxcache/seal/signing/signature_doc.py",  # an entry's signature file
    "jaxcache/seal/generations/manifest.py",  # a generation's manifest
    "jaxcache/seal/objects/s3_responses.py",  # boto3's answers
    "jaxcache/seal/objects/http_answers.py",  # an HTTP answer's headers (the server's Date)
)
ONE_MODULE_PER_COMMAND = ("cli", "report")
MAX_MODULES = 12


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def string_key_lookups(modules: dict[str, Path], root: Path = SRC) -> Counter[str]:
    found: Counter[str] = Counter()
    for path in modules.values():
        rel = str(path.relative_to(root))
        if rel.startswith(MODEL_MODULES):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            subscript = (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
                         and isinstance(node.slice, ast.Constant)
                         and isinstance(node.slice.value, str))
            get = (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                   and node.func.attr == "get" and bool(node.args)
                   and isinstance(node.args[0], ast.Constant)
                   and isinstance(node.args[0].value, str))
            found[rel] += subscript or get
    return found


# values.JsonObject is dict[str, Any]: a document not modelled yet is as loose as a bare dict
# (`object` is not: it says "any value", which a reader must check, as documents/fields.py does)
_LOOSE = {"dict", "Any", "JsonObject"}


def _loose(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return True
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return True
    return any(isinstance(n, ast.Name) and n.id in _LOOSE and not _subscripted(annotation, n)
               for n in ast.walk(annotation))


def _subscripted(root: ast.expr, name: ast.Name) -> bool:
    """dict[str, int] names its types: only a bare dict (or Any, object) is loose."""
    return any(isinstance(n, ast.Subscript) and n.value is name for n in ast.walk(root))


def untyped_seams(modules: dict[str, Path]) -> Counter[str]:
    found: Counter[str] = Counter()
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if node.name.startswith("_"):
                continue
            args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            loose = sum(_loose(a.annotation) for a in args if a.arg not in ("self", "cls"))
            loose += _loose(node.returns)
            if loose:
                found[f"{name}.{node.name}"] += loose
    return found


def mypy_exempt() -> list[str]:
    """The modules of pyproject.toml's override marked "# not yet strict" (read as text: the
    marker is a comment, which tomllib drops)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    found = re.search(r"# not yet strict[^\n]*\nmodule = \[(.*?)\]", text, re.S)
    return re.findall(r'"([\w.]+)"', found.group(1)) if found else []


def import_circles() -> list[str]:
    sys.path.insert(0, str(ROOT / "tests"))
    from test_import_cycles import _collapsed, _cycle, _imports  # one graph, one checker

    known = _modules()
    graph = {name: _imports(name, path, known, parents=False) for name, path in known.items()}
    found = []
    whole = _cycle({name: _imports(name, path, known) for name, path in known.items()})
    if whole:
        found.append(" -> ".join(whole))
    packages = sorted(n for n, p in known.items() if p.name == "__init__.py")
    found += [" -> ".join(c) for p in packages if (c := _cycle(_collapsed(graph, p)))]
    return found


def duplicate_basenames(modules: dict[str, Path]) -> dict[str, list[str]]:
    by: dict[str, list[str]] = {}
    for path in modules.values():
        rel = path.relative_to(PACKAGE)
        if path.name == "__init__.py" or rel.parts[0] in ONE_MODULE_PER_COMMAND:
            continue
        by.setdefault(path.name, []).append(str(rel))
    return {k: v for k, v in sorted(by.items()) if len(v) > 1}


def crowded_folders() -> dict[str, int]:
    out = {}
    for folder in sorted(p.parent for p in PACKAGE.rglob("__init__.py")):
        rel = folder.relative_to(PACKAGE)
        if rel.parts and rel.parts[0] in ONE_MODULE_PER_COMMAND:
            continue
        n = sum(1 for p in folder.glob("*.py") if p.name != "__init__.py")
        if n > MAX_MODULES:
            out[str(rel) or "."] = n
    return out


def private_imports(modules: dict[str, Path]) -> list[str]:
    found = []
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("jaxcache"):
                found += [f"{name}: {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.endswith("__")
                          and f"{node.module}.{a.name}" not in modules]
    return found


def type_only_spellings(modules: dict[str, Path]) -> list[str]:
    found = []
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.If) and isinstance(node.test, ast.Constant) \
                    and node.test.value is False:
                found.append(f"{name}:{node.lineno}: if False")
            elif isinstance(node, ast.ImportFrom) and node.module == "typing" and any(
                    a.name == "TYPE_CHECKING" for a in node.names):
                found.append(f"{name}:{node.lineno}: typing.TYPE_CHECKING")
    return found


def counts() -> dict[str, object]:
    modules = _modules()
    lookups = string_key_lookups(modules)
    seams = untyped_seams(modules)
    return {
        "string_key_lookups": sum(lookups.values()),
        "string_key_lookups_by_module": dict(lookups.most_common()),
        "untyped_seams": sum(seams.values()),
        "untyped_seams_by_function": dict(seams.most_common()),
        "mypy_exempt": mypy_exempt(),
        "import_circles": import_circles(),
        "duplicate_basenames": duplicate_basenames(modules),
        "crowded_folders": crowded_folders(),
        "private_imports": private_imports(modules),
        "type_only_spellings": type_only_spellings(modules),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="one JSON object")
    args = parser.parse_args()
    got = counts()
    if args.json:
        print(json.dumps(got, indent=2))
        return
    for key, value in got.items():
        if key.endswith(("_by_module", "_by_function")):
            continue
        shown = value if isinstance(value, int) else len(value)  # type: ignore[arg-type]
        print(f"{key:<22} {shown}")
    top = list(got["string_key_lookups_by_module"].items())[:5]  # type: ignore[union-attr]
    print("most lookups:", ", ".join(f"{m} {n}" for m, n in top))


if __name__ == "__main__":
    main()
