"""The catalogue of finding codes (trust/finding_codes.py) against the code that makes findings,
read with ast (nothing is imported to watch it run), and against the tables of
docs/reference/finding-codes.md; and `jaxcache explain-finding` as a user runs it."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys

import pytest
from support import paths
from support.jobs import jaxcache

from jaxcache.trust import finding_codes as fc

PACKAGE = paths.SRC / "jaxcache"
CATALOGUE = PACKAGE / "trust" / "finding_codes.py"
FAMILIES = sorted({c.family for c in fc.CODES})
CODE_SHAPED = re.compile(rf"^({'|'.join(FAMILIES)})\.[a-z][a-z0-9-]*$")
# code-shaped strings of src that are no finding code, each with where it is and why
NOT_CODES = {"entry.name": "gc/plan.py: an attrgetter path",
             "origin.build": "report/audit.py: a prefix of origin.build-unknown",
             "net.md": "cli/common.py: a page of the manual",
             "policy.toml": "userdirs.py: a file name"}
EFFECTS = {"UNSAFE": "unsafe", "UNVERIFIABLE": "unverifiable", "WARNING": "warning",
           "NOTE": "note"}


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        if path != CATALOGUE:
            yield path, ast.parse(path.read_text(), str(path))


def _finding_calls(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "Finding" and node.args:
            yield node


def _prefix(joined: ast.JoinedStr) -> str | None:
    """f"entry.{flag}": "entry." (None when it does not start with text)."""
    first = joined.values[0] if joined.values else None
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) \
        else None


@pytest.fixture(scope="module")
def scan():
    literal, shaped, prefixed, effects, strings = {}, {}, {}, [], {}
    for path, tree in _modules():
        where = path.relative_to(PACKAGE)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                strings.setdefault(node.value, str(where))
                if CODE_SHAPED.match(node.value):
                    shaped.setdefault(node.value, f"{where}:{node.lineno}")
        for call in _finding_calls(tree):
            code = call.args[0]
            if isinstance(code, ast.Constant):
                literal[code.value] = f"{where}:{call.lineno}"
                effect = call.args[1] if len(call.args) > 1 else None
                if isinstance(effect, ast.Name) and effect.id in EFFECTS:
                    effects.append((code.value, EFFECTS[effect.id], f"{where}:{call.lineno}"))
            elif isinstance(code, ast.JoinedStr):
                prefix = _prefix(code)
                assert prefix, f"{where}:{call.lineno}: a code that starts with no family"
                prefixed.setdefault(prefix, []).append((call, tree))
    return {"literal": literal, "shaped": shaped, "prefixed": prefixed, "effects": effects,
            "strings": strings}


def test_every_code_a_finding_is_made_with_is_in_the_catalogue(scan):
    missing = {c: at for c, at in scan["literal"].items() if c not in fc.BY_CODE}
    assert not missing, f"Finding codes with no entry in trust/finding_codes.py: {missing}"
    # codes handed to Finding through a variable (storage's add(code, ...), origin's table,
    # the target's notes) are code-shaped strings somewhere in src
    shaped = {c: at for c, at in scan["shaped"].items()
              if c not in fc.BY_CODE and c not in NOT_CODES}
    assert not shaped, f"code-shaped strings in src with no catalogue entry: {shaped}"
    for prefix in scan["prefixed"]:  # f"entry.{flag}": a family of the catalogue
        assert any(c.startswith(prefix) for c in fc.BY_CODE), prefix


def test_codes_made_from_a_table_are_each_in_the_catalogue(scan):
    """f"entry.{flag}": a table in the same module whose keys make codes makes only codes of
    the catalogue (a new flag added to it needs its entry)."""
    for prefix, calls in scan["prefixed"].items():
        for call, tree in calls:
            name = call.args[0].values[1].value
            if not isinstance(name, ast.Name):
                continue  # an attribute (handle.{h.kind}): checked the other way round below
            for node in ast.walk(tree):
                if isinstance(node, ast.Dict) and node.keys and all(
                        isinstance(k, ast.Constant) and isinstance(k.value, str)
                        for k in node.keys):
                    near = [k.value for k in node.keys]
                    if any(f"{prefix}{k}" in fc.BY_CODE for k in near):
                        assert all(f"{prefix}{k}" in fc.BY_CODE for k in near), (prefix, near)


def test_the_codes_other_modules_ask_about_by_name_are_in_the_catalogue():
    """The catalogue's named codes (SEAL_KEYS, ORIGIN_SAID, ...) are compared with what
    findings carry: a misspelt one would match nothing, silently."""
    known = {c.code for c in fc.CODES}
    named = {name: value for name, value in vars(fc).items() if name.isupper()
             and (isinstance(value, str) and CODE_SHAPED.match(value)
                  or isinstance(value, tuple) and value and all(
                      isinstance(v, str) and CODE_SHAPED.match(v) for v in value))}
    assert {"SEAL_KEYS", "PATH_UNREADABLE", "ORIGIN_SAID"} <= set(named)
    for name, value in named.items():
        codes = (value,) if isinstance(value, str) else value
        assert set(codes) <= known, (name, set(codes) - known)


def test_every_catalogue_code_is_made_somewhere(scan):
    unused = []
    for code in fc.BY_CODE:
        if code in scan["shaped"]:
            continue
        made = any(code.startswith(p) and code[len(p):] in scan["strings"]
                   for p in scan["prefixed"])
        if not made:
            unused.append(code)
    assert not unused, f"catalogue codes no Finding is made with: {unused}"


def test_effects_at_each_finding_are_the_catalogues(scan):
    wrong = [(code, effect, at) for code, effect, at in scan["effects"]
             if effect not in {e.value for e in fc.BY_CODE[code].effects}]
    assert not wrong, wrong


def test_the_catalogue_is_well_formed():
    assert len(fc.BY_CODE) == len(fc.CODES)
    for c in fc.CODES:
        assert CODE_SHAPED.match(c.code), c.code
        assert c.effects and len(set(c.effects)) == len(c.effects), c.code
        assert bool(c.effect_detail) == (len(c.effects) > 1), c.code
        for text in (c.meaning, c.why, c.action):
            assert text and "\n" not in text and not text.endswith("."), (c.code, text)
        assert (paths.CHECKOUT / "docs" / c.page).is_file(), (c.code, c.page)


def test_docs_finding_code_tables_are_written_from_the_catalogue():
    from jaxcache.report import finding_codes as report

    text = (paths.CHECKOUT / "docs" / "reference" / "finding-codes.md").read_text()
    for table in report.markdown_tables():
        assert table in text, ("docs/reference/finding-codes.md's table of codes is not current: "
                               "run python scripts/finding_table.py --write\n" + table)
    check = subprocess.run([sys.executable, str(paths.CHECKOUT / "scripts" / "finding_table.py"),
                            "--check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


# --- jaxcache explain-finding --------------------------------------------------------------

def test_explain_finding_says_meaning_why_and_what_to_do():
    proc = jaxcache("explain-finding", "writer.untrusted")
    assert proc.returncode == 0, proc.stderr
    c = fc.BY_CODE["writer.untrusted"]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("writer.untrusted: unsafe")
    flat = " ".join(line.strip() for line in lines)
    for text in (c.meaning, c.why, c.action):
        assert text in flat
    assert "docs/reference/audit.md" in flat


def test_explain_finding_json_validates():
    jsonschema = pytest.importorskip("jsonschema")
    from jaxcache.documents import schemas

    one = json.loads(jaxcache("explain-finding", "--format", "json", "origin.unknown").stdout)
    every = json.loads(jaxcache("explain-finding", "--format", "json").stdout)
    for doc in (one, every):
        jsonschema.validate(doc, schemas.load("finding-codes"))
    assert [c["code"] for c in one["codes"]] == ["origin.unknown"]
    assert one["codes"][0]["effects"] == ["unsafe", "warning"]
    assert [c["code"] for c in every["codes"]] == [c.code for c in fc.CODES]


def test_explain_finding_without_a_code_lists_every_code_on_one_line_each():
    proc = jaxcache("explain-finding")
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    for c in fc.CODES:
        assert sum(line.split()[0] == c.code for line in lines) == 1, c.code


def test_an_unknown_code_is_one_line_with_what_it_may_mean():
    proc = jaxcache("explain-finding", "writer.untrusteed")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "writer.untrusted" in proc.stderr and "unknown finding code" in proc.stderr
    bare = jaxcache("explain-finding", "untrusted")  # the name without its family
    assert bare.returncode == 2 and "writer.untrusted" in bare.stderr
    odd = jaxcache("explain-finding", "\x1b[31mred")  # what a user typed is shown escaped
    assert odd.returncode == 2 and "\x1b" not in odd.stderr and "\\x1b" in odd.stderr
