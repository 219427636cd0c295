"""Multi-process jobs, per rank: real jax.distributed CPU jobs on localhost (2 and 4 ranks)
and under the test Slurm (`srun -n 2`), each rank's identity and view of the cache in the
record, explain naming rank 1's miss and its cause, and a hung rank naming its module."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import paths
from support.jobs import jaxcache

from jaxcache.documents import schemas

pytest.importorskip("jax")

PROGRAMS = paths.PROGRAMS
JOB, LAUNCH = str(PROGRAMS / "rank_job.py"), str(PROGRAMS / "rank_launch.py")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "OMPI_", "PMI_"))}
    return {**env, "JAX_PLATFORMS": "cpu", **extra}


def _processes(doc: dict) -> list[dict]:
    return [doc] + doc["subprocesses"]


def _valid(doc: dict) -> dict:
    """A record, validated against the schema shipped in the package."""
    pytest.importorskip("jsonschema").validate(doc, schemas.load("run"))
    return doc


def _explain(*paths) -> tuple[int, dict, str]:
    text = jaxcache("explain", *map(str, paths))
    js = jaxcache("explain", "--format", "json", *map(str, paths))
    assert js.returncode in (0, 1), js.stderr
    return js.returncode, json.loads(js.stdout), text.stdout


@pytest.mark.parametrize("n", [2, 4])
def test_ranks_on_localhost_each_named_and_rank_1_miss_explained(tmp_path, n):
    rec = tmp_path / "r.json"
    proc = jaxcache("run", "--cache-dir", str(tmp_path / "c"), "--record", str(rec), "--",
                    sys.executable, LAUNCH, str(n), env=_env())
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(rec.read_text())
    _valid(doc)  # the ranks as subprocesses[]
    ids = [p["identity"] for p in _processes(doc)]
    assert sorted(i["process_index"] for i in ids) == list(range(n))  # nothing lost
    assert {i["process_count"] for i in ids} == {n} and doc["identity"]["process_index"] == 0
    assert {i["host"] for i in ids} == {os.uname().nodename}
    assert doc["ranks"] == {"expected": n, "seen": list(range(n)), "absent": [],
                            "per_rank": False, "problems": [], "remedy": None}
    for r in range(n):  # grouped by rank, the rank on every module line
        assert f"  rank {r} (pid " in proc.stderr and f"    r{r} jit__lambda " in proc.stderr
    rc, ex, text = _explain(rec)
    assert rc == 1 and ex["key_diffs"] == []
    assert sorted({d["rank"] for d in ex["rank_diffs"]}) == list(range(1, n))
    lam = [d for d in ex["rank_diffs"] if d["module"] == "jit__lambda" and d["rank"] == 1]
    assert lam[0]["components"] == ["accelerator_config", "compile_options"]
    assert lam[0]["platform"] == "cpu" and "only process 0 writes" in lam[0]["causes"][0]
    assert "strips it from the key only when backend.platform == 'gpu'" in text
    ones = sum(1 for d in ex["rank_diffs"] if d["rank"] == 1)
    assert f"rank 1: {ones} module{'s' if ones != 1 else ''}" in text
    assert "on CPU nothing in the cache" in text


def test_srun_per_rank_records_and_explain_names_rank_1(slurm, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir(mode=0o700)
    proc = subprocess.run(["srun", "-n", "2", "--overcommit", sys.executable, "-m", "jaxcache",
                           "run", "--cache-dir", str(tmp_path / "c"), "--record",
                           str(runs / "r.json"), "--", sys.executable, JOB],
                          env=slurm.env(_env()), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in runs.iterdir()) == ["r.rank0.json", "r.rank1.json"]
    for rank in (0, 1):
        doc = _valid(json.loads((runs / f"r.rank{rank}.json").read_text()))
        ident = doc["identity"]
        assert ident["process_index"] == rank and ident["process_count"] == 2
        launcher = ident["launcher"]
        assert launcher["kind"] == "slurm" and launcher["rank"] == rank
        assert launcher["size"] == 2 and launcher["job_id"] and launcher["step_id"] == "0"
        assert doc["ranks"]["problems"] == []  # each rank audits and records itself
        assert doc["ranks"]["per_rank"] and doc["ranks"]["absent"] == []
    rc, ex, text = _explain(runs)
    assert rc == 1 and ex["key_diffs"] == []  # no "device topology (cpu x2 vs cpu x2)"
    assert {d["rank"] for d in ex["rank_diffs"]} == {1}
    assert "why a rank other than 0 missed" in text and "vs cpu x2" not in text
    assert slurm.drained() == []


def _mounted_0777(cache: Path, then: str) -> str:
    """A shell line: in a new mount namespace, a world-writable tmpfs at the cache's path."""
    return (f"exec unshare -m --propagation private sh -c 'mount -t tmpfs -o mode=0777 none "
            f"{cache} && exec {then}'")


@pytest.mark.parametrize("how", ["namespace", "no-probe"])
def test_jaxcache_outside_srun_names_a_rank_it_cannot_vouch_for(slurm, tmp_path, how):
    from attacks.storage import _unshare_works

    if how == "namespace" and not _unshare_works():
        pytest.skip("unshare -m is refused here")
    cache = tmp_path / "c"
    cache.mkdir(mode=0o700)
    odd = _mounted_0777(cache, f"{sys.executable} {JOB}") if how == "namespace" else \
        f"exec env -u PYTHONPATH {sys.executable} {JOB}"  # the probe comes on PYTHONPATH
    script = f'if [ "$SLURM_PROCID" = 1 ]; then {odd}; else exec {sys.executable} {JOB}; fi'
    rec = tmp_path / "r.json"
    proc = jaxcache("run", "--cache-dir", str(cache), "--record", str(rec), "--", "srun", "-n",
                    "2", "--overcommit", "sh", "-c", script, env=slurm.env(_env()))
    doc = _valid(json.loads(rec.read_text()))  # with its ranks.problems
    assert proc.returncode == 1, proc.stderr  # the job itself succeeded
    [problem] = doc["ranks"]["problems"]
    assert problem["rank"] == 1 and "--kill-on-bad-exit=1" in doc["ranks"]["remedy"]
    if how == "namespace":
        assert problem["what"] == "filesystem" and "tmpfs" in problem["text"]
        assert "mode 0777" in problem["text"] and doc["subprocesses"][0]["identity"][
            "process_index"] == 1
    else:
        assert problem["what"] == "absent" and doc["ranks"]["seen"] == [0]
    assert "WARNING: rank 1" in proc.stderr and "a rank of the job saw" in proc.stderr
    assert slurm.drained() == []


def test_srun_jaxcache_inside_refuses_the_rank_whose_view_differs(slurm, tmp_path):
    from attacks.storage import _unshare_works

    if not _unshare_works():
        pytest.skip("unshare -m is refused here")
    cache = tmp_path / "c"
    cache.mkdir(mode=0o700)
    run = (f"{sys.executable} -m jaxcache run --cache-dir {cache} --record {tmp_path}/r.json "
           f"-- {sys.executable} -c \"import jax.numpy as jnp; print(float(jnp.ones(3).sum()))\"")
    script = (f'if [ "$SLURM_PROCID" = 1 ]; then {_mounted_0777(cache, run)}; '
              f"else exec {run}; fi")
    proc = subprocess.run(["srun", "-n", "2", "--overcommit", "sh", "-c", script],
                          env=slurm.env(_env()), capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "3.0" in proc.stdout  # rank 0 ran, rank 1 was refused
    assert "refusing cache" in proc.stderr and "verdict UNSAFE" in proc.stderr
    assert "rank 1 of 2 (slurm) was refused" in proc.stderr
    assert "srun --kill-on-bad-exit=1" in proc.stderr
    assert sorted(p.name for p in tmp_path.glob("r*.json")) == ["r.rank0.json"]
    assert json.loads((tmp_path / "r.rank0.json").read_text())["process"]["exit_code"] == 0
    assert slurm.drained() == []


def _waiting(runtime: Path) -> bool:
    """Has a rank's probe written that it waits for another process (probe/recorder.py)?"""
    for doc in runtime.glob("jaxcache-probe-*/probe-*.json"):
        with contextlib.suppress(OSError):
            if '"waiting_for": {' in doc.read_text(errors="replace"):
                return True
    return False


def test_a_rank_hung_in_share_binary_names_the_module_it_waits_for(slurm, tmp_path):
    rec = tmp_path / "r.json"
    runtime = tmp_path / "runtime"  # where jaxcache makes its probe directory: watched
    runtime.mkdir(mode=0o700)
    run = subprocess.Popen([sys.executable, "-m", "jaxcache", "run", "--cache-dir",
                            str(tmp_path / "c"), "--record", str(rec), "--", "srun", "-n", "2",
                            "--overcommit", sys.executable, JOB, "--share"],
                           env=slurm.env(_env(XDG_RUNTIME_DIR=str(runtime))),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, start_new_session=True)
    try:
        seen: set[str] = set()
        deadline = time.monotonic() + 180
        while not {"compiling 1", "done 0"} <= seen and time.monotonic() < deadline:
            line = run.stdout.readline()
            if not line:
                break
            seen.add(line.strip())
        assert {"compiling 1", "done 0"} <= seen, seen
        while not _waiting(runtime) and time.monotonic() < deadline:
            time.sleep(0.1)  # rank 1 is stuck; its probe writes every second while it waits
        assert _waiting(runtime), "rank 1's probe never said it waits"
        run.send_signal(signal.SIGTERM)  # forwarded to srun, which cancels the step
        _, err = run.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)  # whatever is left of the job
        run.wait(timeout=30)
    assert "done 1" not in seen
    doc = _valid(json.loads(rec.read_text()))  # an in-progress module, waiting_for
    [rank1] = [p for p in _processes(doc) if p["identity"]["process_index"] == 1]
    [stuck] = [m for m in rank1["modules"] if m["outcome"] == "in-progress"]
    assert stuck["name"] == "jit__lambda" and stuck["reason"] == "waiting-for-process"
    assert stuck["reason_detail"] == {"process_index": 0} and stuck["in_progress"] is True
    assert "waiting for process 0 to publish its executable" in err
    assert slurm.drained() == []
