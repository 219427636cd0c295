"""TOML text shaped to make the parser's work grow faster than the text, refused before the
parser reads it: the project file, which whoever can write the checkout plants, and the policy.

One dotted key of 15,000 parts (30 KB) once cost Python's TOML parser seconds and ~0.9 GB
before the depth check refused what it built (60 KB: ~20 s and ~3.5 GB). validate.toml_shape
scans the text first: a key of more than MAX_KEY_PARTS parts or MAX_KEY_CHARS characters,
arrays and inline tables nested deeper than MAX_DEPTH, each one line naming its line. The work
is shown bounded without timing it: the parser is never called (in-process), and a command's
peak memory stays that of a command that reads nothing (through the real CLI).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib  # the parser validate.parse_toml calls

import pytest
from support.jobs import clean_env
from support.users import mkdir

from jaxcache import validate as v

ATTACK = ".".join(["a"] * 15_000) + " = 1\n"  # 30 KB: one key of 15,000 parts
PARTS = f"holds a key of more than {v.MAX_KEY_PARTS} dotted parts"
LONG = f"holds a key longer than {v.MAX_KEY_CHARS} characters"
DEEP = f"nested more than {v.MAX_DEPTH} deep"
# a command that refuses its input before reading much: ~15-25 MB here; the parser on ATTACK
# took ~0.9 GB (far past any machine's noise, whatever its speed)
PEAK_LIMIT_MB = 100

SHAPES = {
    "a dotted key": (ATTACK, PARTS),
    "a dotted [table] header": ("[" + ".".join(["t"] * 15_000) + "]\n", PARTS),
    "a dotted [[array]] header": ("[[" + ".".join(["t"] * 15_000) + "]]\n", PARTS),
    "a dotted key in an inline table": ("x = {" + ".".join(["a"] * 15_000) + " = 1}\n", PARTS),
    "quoted parts": (".".join(['"a.b"', "'c'"] * 7_500) + " = 1\n", PARTS),
    "a long bare key": ("k" * 30_000 + " = 1\n", LONG),
    "a long quoted key": ('"' + "k" * 30_000 + '" = 1\n', LONG),
    "a long header": ("['" + "k" * 30_000 + "']\n", LONG),
    "deep inline tables": ("x = " + "{a = " * 5_000 + "1" + "}" * 5_000 + "\n", DEEP),
    "deep arrays": ("x = " + "[" * 5_000 + "]" * 5_000 + "\n", DEEP),
}
# an array over lines: the bracket past the limit is on line 33
SHAPES["deep arrays over lines"] = ("x = " + "[\n" * 5_000 + "]\n" * 5_000, DEEP)


@pytest.fixture
def no_parser(monkeypatch):
    """The TOML parser made to fail the test if it is called: the refusal must come first."""
    def called(*args, **kwargs):
        raise AssertionError("the TOML parser read text the shape check should have refused")
    monkeypatch.setattr(tomllib, "loads", called)


@pytest.mark.parametrize("name", SHAPES)
def test_a_planted_shape_is_refused_before_the_parser_reads_it(no_parser, name):
    text, says = SHAPES[name]
    with pytest.raises(v.Unreadable) as refused:
        v.parse_toml(text.encode())
    line = 33 if name == "deep arrays over lines" else 1
    assert says in str(refused.value) and f"line {line}" in str(refused.value)
    assert "\n" not in str(refused.value)


def test_the_refusal_names_the_line_the_key_is_on(no_parser):
    text = '# a comment.with.dots\n[records]\ndir = "a.b.c"\n\n' + ATTACK
    with pytest.raises(v.Unreadable, match=f"line 5 {PARTS}"):
        v.parse_toml(text.encode())
    with pytest.raises(v.Unreadable, match=r"nested more than 32 deep \(line 3\)"):
        v.parse_toml(b"a = 1\nx = [\n" + b"[" * 40 + b"]" * 40 + b"]\n")


def test_text_larger_than_any_file_jaxcache_reads_is_refused_unparsed(no_parser):
    with pytest.raises(v.Unreadable, match="larger than 1 MiB"):
        v.parse_toml(b"# " + b"x" * v.MAX_TOML_BYTES + b"\n")


# Legitimate text whose strings and comments hold what the check counts outside them: each
# parses as it did, the same values as the parser alone gives.
DOTS = ".".join(["x"] * 100)
LEGIT = {
    "dots in strings": f'a = "{DOTS}"\nb = \'{DOTS}\'\n"{DOTS}" = 1\n\'y.{DOTS}\' = 2\n',
    "brackets in strings": 'a = "' + "[{" * 50 + '"\nb = [\'' + "]}" * 50 + "']\n",
    "multi-line strings": (f'a = """\n{DOTS}\n[[[[ "quoted" ""two"" \\""" {DOTS}""""\n'
                           f"b = '''\n{DOTS} ''two'' [{{\n'''''\n"
                           f'c = """ends in a backslash \\\\"""\nd = """line \\\n  {DOTS}"""\n'),
    "escaped quotes": f'a = "\\"{DOTS}\\" \\\\"\nb = "\\u0022[[[[{DOTS}"\n',
    "comments": f"# {DOTS} [[[[[[ {{{{{{{{ = , ' \"\na = 1  # {DOTS} ' \"\"\"\n",
    "numbers and times": "a = [1.5, -0.25, 6.626e-34, 1979-05-27T07:32:00.999999Z, 07:32:00.5]\n",
    "a key of the most parts": ".".join(["p"] * v.MAX_KEY_PARTS) + " = 1\n",
    # (a table 32 deep is past what a reader walks: MAX_DEPTH refuses it once parsed)
    "a header of the most parts a reader takes": "[" + " . ".join(['"q.q"'] * (v.MAX_DEPTH - 1))
                                                 + "]\nx = 1\n",
    "the longest key": "k" * v.MAX_KEY_CHARS + " = 1\n",
    "arrays nested the deepest the reader takes": "x = " + "[" * 31 + "]" * 31 + "\n",
    "windows line ends": 'a.b = 1\r\n[t]\r\nc = "d.e"\r\n',
    "the policy's shape": """\
trusted_users = ["root"]
trusted_keys = [  # [[cache]] below: a.b.c
  { holder = "root", key = "ed25519:ewHBsKJhMqgxd237NaAHbwC1LH/UPNkKlvAHo2XfUrE=" },
  { holder = "root", key = "k.2:ed25519:AAEC", not_after = 2027-06-01T00:00:00.5+02:00 },
]

[[cache]]
path = "/srv/jax-cache.v2"
restored_from = "actions/cache [main only], v1.2.3"
trusted_ledgers = ["/home/teamb/.local/state/jaxcache/origin.ledger"]
""",
}


@pytest.mark.parametrize("name", LEGIT)
def test_dots_and_brackets_inside_strings_and_comments_still_parse(name):
    text = LEGIT[name]
    assert v.parse_toml(text.encode()) == tomllib.loads(text)


# --- through the commands ------------------------------------------------------------------

# `jaxcache ARGS` run by a small Python that writes the command's peak memory (its rusage, from
# wait4) to a file: a child pytest forks itself would report pytest's own peak (Linux carries
# the peak across fork and exec), the wrapper's is ~10 MB
_PEAK_OF = """import os, subprocess, sys
proc = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(proc.pid, 0)
open(sys.argv[1], "w").write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def _measured(args: list[str], cwd, tmp_path) -> tuple[int, str, str, float]:
    """`jaxcache ARGS` in a subprocess: exit code, stdout, stderr, and its peak memory in MB."""
    peak = tmp_path / "peak"
    proc = subprocess.run([sys.executable, "-c", _PEAK_OF, str(peak), sys.executable, "-m",
                           "jaxcache", *args], capture_output=True, text=True, cwd=cwd,
                          env=clean_env(NO_COLOR="1"), timeout=600)
    kb = int(peak.read_text())
    peak.unlink()
    return proc.returncode, proc.stdout, proc.stderr, kb / 1024


def _refused_in_one_line(got: tuple[int, str, str, float], line: str) -> None:
    code, out, err, peak_mb = got
    assert (code, out, err) == (2, "", f"jaxcache: {line}\n"), got[:3]
    assert peak_mb < PEAK_LIMIT_MB, f"{peak_mb:.0f} MB: the parser read the planted text"


@pytest.mark.parametrize("name,table", [(".jaxcache.toml", ""),
                                        ("pyproject.toml", '[project]\nname = "p"\n\n'
                                                           "[tool.jaxcache]\n")])
def test_a_planted_project_file_is_refused_by_every_command_before_it_is_parsed(
        tmp_path, name, table):
    root = tmp_path / "proj"
    deep = root / "src"
    deep.mkdir(parents=True)
    (root / name).write_text(table + ATTACK)
    line = table.count("\n") + 1
    refusal = f"project file {root / name} is not read: line {line} {PARTS}"
    _refused_in_one_line(_measured(["config"], deep, tmp_path), refusal)
    record, cache = tmp_path / "rec.json", tmp_path / "cache"
    _refused_in_one_line(_measured(["run", "--record", str(record), "--cache-dir", str(cache),
                                    "--", "true"], deep, tmp_path), refusal)
    assert not record.exists() and not cache.exists()
    assert sorted(p.name for p in root.rglob("*")) == sorted([name, "src"])


@pytest.mark.parametrize("text,says", [(ATTACK, PARTS),
                                       ("trusted_users = " + "[" * 5_000 + "]" * 5_000 + "\n",
                                        DEEP),
                                       ('trusted_users = ["root"]\n' + "u" * 30_000 + " = 1\n",
                                        LONG)])
def test_a_planted_policy_is_refused_by_audit_before_it_is_parsed(base, tmp_path, text, says):
    cache = mkdir(base / "cache", 0o700)
    policy = tmp_path / "policy.toml"
    policy.write_text(text)
    policy.chmod(0o600)
    code, out, err, peak_mb = _measured(["audit", "--policy", str(policy), str(cache)],
                                        tmp_path, tmp_path)
    assert (code, out) == (2, ""), err
    assert err.startswith(f"jaxcache: policy file {policy} is ") and err.count("\n") == 1, err
    assert says in err and "line " in err, err
    assert peak_mb < PEAK_LIMIT_MB, f"{peak_mb:.0f} MB: the parser read the planted text"
    assert os.listdir(cache) == []
