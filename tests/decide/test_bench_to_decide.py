"""bench -> decide without a second bench (issue 28, point 5): bench keeps its last result in the
state directory (as run keeps records), decide uses it and says so, and every line of the
decision agrees with the facts beside it when nothing was cached. Real jobs, a real state
directory of the test's own."""

from __future__ import annotations

import json
import re
import sys

import pytest
from support import paths
from support.jobs import jaxcache, no_state
from support.users import mkdir

pytest.importorskip("jax")

JOB = [sys.executable, str(paths.PROGRAMS / "quick_compiles.py"), "4"]
QUICK = ["-t", "1", "-k", "1"]


def test_decide_uses_the_last_bench_and_agrees_with_it(tmp_path):
    env = no_state(tmp_path)
    bench = jaxcache("bench", *QUICK, "--no-prime", "--", *JOB, env=env)
    assert bench.returncode == 1, bench.stderr  # every compile quick: nothing cached
    [kept] = (tmp_path / "state" / "jaxcache" / "benches").iterdir()
    assert json.loads(kept.read_text())["summary"]["verdict"] == "nothing-cached"
    cache = mkdir(tmp_path / "cache", 0o700)
    proc = jaxcache("decide", str(cache), env=env)
    assert f"decide: using the last bench, of `{' '.join(JOB)}` ({kept})" in proc.stderr
    assert proc.returncode == 1
    out = proc.stdout
    assert out.startswith("decision: NOT-WORTH-IT"), out
    assert "2. compatible jobs: not evaluated" in out and "compatible jobs: FAIL" not in out
    assert "the cold runs wrote no entry" in out
    assert "JAX's write thresholds left" in out
    material = json.loads(kept.read_text())["thresholds"]["left_out"]["material"]
    said = " ".join(out.split())
    if material:
        assert "what the thresholds leave out is material: bench a lower one" in said
    else:
        assert "what the thresholds leave out is not material" in said


def test_decide_benches_cmd_and_every_path_it_names_exists(tmp_path):
    env = no_state(tmp_path)
    cache = mkdir(tmp_path / "cache", 0o700)
    proc = jaxcache("decide", str(cache), *QUICK, "--", *JOB, env=env)
    assert proc.returncode == 1, proc.stderr
    named = re.findall(r"(/\S+\.json)", proc.stdout + proc.stderr)
    assert named, proc.stderr
    assert all(__import__("os").path.exists(p) for p in named), named
    kept = list((tmp_path / "state" / "jaxcache" / "benches").iterdir())
    assert [str(p) for p in kept] == [p for p in dict.fromkeys(named) if "benches" in p]
    again = jaxcache("decide", str(cache), env=env)  # the bench it just ran is the last one
    assert f"({kept[0]})" in again.stderr
