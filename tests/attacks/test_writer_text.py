"""Issue 39, class 5 and a class 7 item: text a writer chose reaches no terminal raw.

- A file in the cache directory, owned by another real user, is named with an escape
  sequence, a bell, backspaces, a newline and a backslash. `audit`, `audit -v`, the SARIF and
  JSON formats and run's refusal name it in the writers section, the writer findings and the
  refusal's reasons: each shows it escaped exactly once (trust/findings.py Writer escapes
  its chain), with no control byte but the newlines between lines.
- A process of another user holding such a file open for writing is a writer too: its reason
  names the file escaped once, not twice.
- A policy's key name of 100 KB with a backslash: the error quotes it clipped and escaped
  once (text.quoted), not in full with the backslash doubled twice.
"""

from __future__ import annotations

import base64
import json
import os
import pwd
import re
import sys

from support.jobs import jaxcache
from support.users import mkdir, needs_root

from attacks import fuzz_targets
from attacks.handles import holders, tighten  # noqa: F401 (holders: a fixture)

KEY = "ab" * 32
HOSTILE = f"jit_f\x1b[31mred\x07\b\b\n\\x-{KEY}-cache"
ESCAPED = rf"jit_f\x1b[31mred\x07\x08\x08\x0a\\x-{KEY}-cache"  # safe(HOSTILE), once
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")  # every control byte but the newline


def _clean(text: str) -> str:
    """No control byte but newlines, nothing else that steers a terminal, no backslash
    escaped twice (ESCAPED has one backslash of the name, shown as two)."""
    assert not CONTROL.search(text), repr(CONTROL.search(text).group())
    fuzz_targets.shown(text)
    assert "\\\\\\\\" not in text, text
    return text


def _planted(base, owner: str):
    cache = mkdir(base / "cache", 0o700)
    (cache / HOSTILE).write_bytes(b"planted")
    os.chown(cache / HOSTILE, pwd.getpwnam(owner).pw_uid, -1)
    return cache


@needs_root
def test_a_hostile_file_name_is_escaped_once_in_audit_and_run(base, accounts):
    cache = _planted(base, accounts.a)
    for args in (["audit", "--no-processes", str(cache)],
                 ["audit", "-v", "--no-processes", str(cache)]):
        proc = jaxcache(*args)
        assert proc.returncode == 1, proc.stderr
        out = _clean(proc.stdout + proc.stderr)
        section = out.split("who can change what JAX loads:", 1)[1].split("\n\n", 1)[0]
        assert ESCAPED in section, section
        finding = out.split("findings:", 1)[1]
        assert "[UNSAFE] " + accounts.a + " can change what JAX loads" in finding
        assert ESCAPED in finding, finding
    proc = jaxcache("audit", "--format", "sarif", "--no-processes", str(cache))
    assert proc.returncode == 1, proc.stderr
    texts = [r["message"]["text"] for run in json.loads(proc.stdout)["runs"]
             for r in run["results"]]
    assert any(accounts.a in t and ESCAPED in t for t in texts), texts
    for t in texts:
        _clean(t)
    proc = jaxcache("audit", "--format", "json", "--no-processes", str(cache))
    doc = json.loads(proc.stdout)
    (writer,) = [w for w in doc["writers"] if w["principal"] == accounts.a]
    assert all(_clean(c) for c in writer["chain"]) and ESCAPED in writer["chain"][1]
    (found,) = [f for f in doc["findings"] if f["code"] == "writer.untrusted"]
    assert ESCAPED in _clean(found["message"])
    proc = jaxcache("run", "--cache-dir", str(cache), "--", "python", "-c", "pass")
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert proc.stderr.startswith(f"jaxcache: refusing cache {cache}: verdict UNSAFE "
                                  f"({accounts.a})"), proc.stderr
    assert ESCAPED in _clean(proc.stdout + proc.stderr), proc.stderr


@needs_root
def test_a_held_file_with_a_hostile_name_is_escaped_once(base, accounts, holders):  # noqa: F811
    cache = mkdir(base / "cache", 0o777)
    entry = cache / HOSTILE
    entry.write_bytes(b"\x00" * 4096)
    entry.chmod(0o666)
    holder = holders(accounts.c, "write", entry)
    tighten(cache)
    proc = jaxcache("audit", "-v", str(cache))
    assert proc.returncode == 1, proc.stderr
    out = _clean(proc.stdout + proc.stderr)
    section = out.split("who can change what JAX loads:", 1)[1].split("\n\n", 1)[0]
    held = [line for line in section.splitlines() if f"process {holder.pid} " in line]
    assert len(held) == 1 and f"{cache}/{ESCAPED} open for writing" in held[0], section
    proc = jaxcache("audit", "--format", "json", str(cache))
    (w,) = [w for w in json.loads(proc.stdout)["writers"] if w["action"] == "hold-handle"]
    assert f"{cache}/{ESCAPED} open for writing" in w["chain"][0], w


LABEL = "a\\b" + "x" * 100_000  # a key's name in a policy: anyone's text, of any length


def test_a_100_kb_key_name_is_clipped_and_escaped_once_in_the_error(base):
    cache = mkdir(base / "cache", 0o700)
    key = "ci:ed25519:" + base64.b64encode(bytes(32)).decode()  # named "ci" in its text
    policy = base / "policy.toml"
    policy.write_text("[[cache]]\n"
                      f"path = {json.dumps(str(cache))}\n"
                      f"trusted_keys = [{{ holder = \"root\", key = \"{key}\", "
                      f"name = {json.dumps(LABEL)} }}]\n")
    policy.chmod(0o644)
    proc = jaxcache("audit", "--policy", str(policy), str(cache))
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    (line,) = proc.stderr.splitlines()
    assert "the key is named 'ci' in its text and 'a\\\\bxxx" in line, line[:300]
    assert "a\\\\\\\\b" not in line  # the name's backslash, shown as two, not four
    assert len(line) < 400, len(line)
    assert "...'" in line  # marked where it was cut


QUICK = str(__import__("pathlib").Path(__file__).resolve().parents[1] / "programs"
            / "quick_compiles.py")
# a private cache's own name, chosen by whoever named it (a flag, a project file): a terminal
# control, a right-to-left override, a backslash
ODD_NAME = "cache\x1b[31m\u202eevil\\x"


def test_a_cache_path_with_controls_is_raw_in_the_record_and_escaped_once_on_screen(tmp_path):
    """The record holds the path as it is, every comparison uses it so (the rank's view of
    the cache, the directories JAX used), and the summary escapes it where it is shown: a
    private cache whose name holds controls is not 'another directory than the audited one'."""
    from support.jobs import clean_env

    from jaxcache.text import safe

    cache = tmp_path / ODD_NAME
    record = tmp_path / "run.json"
    env = clean_env(XDG_STATE_HOME=str(tmp_path / "state"))
    proc = jaxcache("run", "--cache-dir", str(cache), "--record", str(record), "--", sys.executable,
                    QUICK, "1", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "not the audited" not in proc.stderr and "saw another cache" not in proc.stderr
    out = _clean(proc.stderr)
    assert f"cache {safe(str(cache))} (PRIVATE)" in out, out
    doc = json.loads(record.read_text())
    assert doc["cache_dir"]["path"] == str(cache)  # raw, as the job's processes saw it
    assert [d["path"] for d in doc["jax_cache_dirs"]] == [str(cache)]
    assert doc["ranks"]["problems"] == []
    # from the project file too, in a folder whose own name holds the same
    project = tmp_path / ("proj" + ODD_NAME)
    project.mkdir()
    (project / ".jaxcache.toml").write_text(f'cache_dir = "{project}/c"\n'.replace(
        "\x1b", "\\u001b").replace("\\x", "\\\\x"))
    proc = jaxcache("run", "--record", str(record), "--", sys.executable, QUICK, "1", env=env,
                    cwd=str(project))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(record.read_text())["cache_dir"]["path"] == str(project / "c")
    _clean(proc.stderr)


def test_a_directory_the_job_chose_and_a_record_path_are_escaped_in_the_summary(tmp_path):
    """Values the record holds raw (the directory the job pointed JAX at, the record's own
    path) reach the summary escaped once, with no control byte."""
    from support.jobs import clean_env

    from jaxcache.text import safe

    cache = tmp_path / "cache"
    other = tmp_path / f"other{ODD_NAME}"
    record = tmp_path / f"run{ODD_NAME}.json"
    job = ("import sys, jax, jax.numpy as jnp\n"
           "jax.config.update('jax_compilation_cache_dir', sys.argv[1])\n"
           "float(jax.jit(lambda x: x + 1.0)(jnp.ones(3)).sum())\n")
    proc = jaxcache("run", "--cache-dir", str(cache), "--record", str(record), "--",
                    sys.executable, "-c", job, str(other),
                    env=clean_env(XDG_STATE_HOME=str(tmp_path / "state")))
    assert proc.returncode == 1, proc.stderr  # JAX was pointed elsewhere
    out = _clean(proc.stderr)
    assert f"JAX was pointed at {safe(str(other))}" in out, out
    assert f"record: {safe(str(record))}" in out, out
