"""Third review's findings, pinned: honest wording (counts, kinds, files), no stderr line over
200 characters, explain DIR skipping what it refuses, keygen and run --local refusals."""

from __future__ import annotations

import json
import os

from conftest import jaxcache

from jaxcache.trust.procs import ProcessScan
from jaxcache.trust.verdict import uninspected_text


def test_uninspected_processes_are_counted_named_and_advised_honestly():
    one = ProcessScan((), 1, ((1, "root"),))
    assert uninspected_text(one, root=True) == (
        "1 process could not be inspected (pid 1, user root: permission denied even as root)")
    assert uninspected_text(one, root=False) == (
        "1 process could not be inspected (pid 1, user root; run as root to see every user of "
        "the cache)")
    many = ProcessScan((), 5, tuple((p, "bob" if p % 2 else "eve") for p in range(10, 15)))
    text = uninspected_text(many, root=False)
    assert text.startswith("5 processes could not be inspected (users bob, eve;")


def test_audit_as_is_says_what_the_uninspected_note_means(tmp_path):
    proc = jaxcache("audit", "-v", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    notes = [ln for ln in proc.stdout.splitlines() if "could not be inspected" in ln]
    for line in notes:  # none when every process was readable
        assert "processes of other users" not in line
        assert ("run as root" in line) == (os.geteuid() != 0), line


def test_audit_warns_of_a_leading_tilde_jax_takes_literally(tmp_path):
    env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": "~/x"}
    proc = jaxcache("audit", "--format", "json", env=env, cwd=str(tmp_path))
    doc = json.loads(proc.stdout)
    tilde = [f for f in doc["findings"] if f["code"] == "path.tilde"]
    assert [f["effect"] for f in tilde] == ["warning"], doc["findings"]
    assert "absolute path" in tilde[0]["remedy"]
    assert not (tmp_path / "~").exists()  # an audit creates nothing
    text = jaxcache("audit", env=env, cwd=str(tmp_path)).stdout
    assert "[warning] JAX does not expand '~'" in text
