"""bench -> decide without a second bench (issue 28, point 5): bench keeps its last result in the
state directory (as run keeps records), decide uses it and says so, and every line of the
decision agrees with the facts beside it when nothing was cached. Which kept bench (issue 44,
point 1): only one of a job that used the directory, by its run records or because decide
benched it for it; never another job's, however new. Real jobs, a real state directory of the
test's own."""

from __future__ import annotations

import json
import os
import re
import sys

import pytest
from support import paths
from support.jobs import jaxcache, no_state
from support.users import mkdir

from jaxcache.documents import schemas

pytest.importorskip("jax")

JOB = [sys.executable, str(paths.PROGRAMS / "quick_compiles.py"), "4"]
QUICK = ["-t", "1", "-k", "1"]


def test_decide_uses_the_last_bench_and_agrees_with_it(tmp_path):
    env = no_state(tmp_path)
    cache = mkdir(tmp_path / "cache", 0o700)
    ran = jaxcache("run", "--cache-dir", str(cache), "--", *JOB, env=env)
    assert ran.returncode == 0, ran.stderr  # its record says the job used this directory
    bench = jaxcache("bench", *QUICK, "--no-prime", "--", *JOB, env=env)
    assert bench.returncode == 1, bench.stderr  # every compile quick: nothing cached
    [kept] = (tmp_path / "state" / "jaxcache" / "benches").iterdir()
    assert json.loads(kept.read_text())["summary"]["verdict"] == "nothing-cached"
    proc = jaxcache("decide", str(cache), env=env)
    assert ("decide: judging the last bench of a job that used this directory, "
            f"`{' '.join(JOB)}` in {os.path.realpath(os.getcwd())} ({kept})") in proc.stderr
    said = " ".join(proc.stdout.split())
    assert (f"judged on the bench of `{' '.join(JOB)}` in {os.path.realpath(os.getcwd())}, kept "
            ) in said and "(the last kept bench" in said, proc.stdout
    assert proc.returncode == 1
    out = proc.stdout
    assert out.startswith("decision: NOT-WORTH-IT"), out
    assert "2. compatible jobs: not evaluated" in out and "compatible jobs: FAIL" not in out
    assert "the cold runs wrote no entry" in out
    assert "JAX's write thresholds left" in out
    left = json.loads(kept.read_text())["thresholds"]["left_out"]
    said = " ".join(out.split())
    if left["material"]:
        assert "what the thresholds leave out is material: bench a lower one" in said
    elif left["near"]:
        assert "what the thresholds leave out is near the line: only a bench" in said
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


def test_decide_never_judges_another_jobs_bench(tmp_path):
    """The newest kept bench is another job's: decide passes over it for the older bench of
    the job that used the directory, names that one in text and JSON; for a directory whose
    job was never benched it decides nothing and names the job's command to bench."""
    env = no_state(tmp_path)
    other = [sys.executable, str(paths.PROGRAMS / "quick_compiles.py"), "3"]
    unbenched = [sys.executable, str(paths.PROGRAMS / "quick_compiles.py"), "2"]
    cache = mkdir(tmp_path / "cache", 0o700)
    lonely = mkdir(tmp_path / "lonely", 0o700)
    for where, job in ((cache, JOB), (lonely, unbenched)):
        ran = jaxcache("run", "--cache-dir", str(where), "--", *job, env=env)
        assert ran.returncode == 0, ran.stderr
    benches = tmp_path / "state" / "jaxcache" / "benches"
    mine = jaxcache("bench", *QUICK, "--no-prime", "--", *JOB, env=env)
    [mine_path] = benches.iterdir()
    newer = jaxcache("bench", *QUICK, "--no-prime", "--", *other, env=env)
    assert mine.returncode == newer.returncode == 1, mine.stderr + newer.stderr
    assert len(list(benches.iterdir())) == 2

    proc = jaxcache("decide", str(cache), "--format", "json", env=env)
    doc = json.loads(proc.stdout)
    pytest.importorskip("jsonschema").validate(doc, schemas.load("decide"))
    assert doc["benches"] == [{"how": "kept", "command": JOB, "path": str(mine_path)}]
    assert doc["verdict"] == "NOT-WORTH-IT", doc  # its own bench: nothing cached

    refused = jaxcache("decide", str(lonely), "--format", "json", env=env)
    doc = json.loads(refused.stdout)
    assert refused.returncode == 1 and doc["verdict"] == "INCONCLUSIVE", refused.stderr
    assert doc["benches"] == [] and "none of the 2 kept benches" in doc["summary"]
    assert f"jaxcache decide {lonely} -- {' '.join(unbenched)}" in doc["advice"][0]
