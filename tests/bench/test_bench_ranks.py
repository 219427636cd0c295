"""bench on multi-rank jobs: per-rank truth, on a real 2-process jax.distributed CPU job on
localhost and under the test Slurm (srun -n 2 inside the bench)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support import paths
from support.jobs import clean_env, jaxcache

from jaxcache.bench import per_rank
from jaxcache.documents import schemas
from jaxcache.records.run_document import RunRecord

ROOT = paths.CHECKOUT
PROGRAMS = ROOT / "tests" / "programs"
WORKER = str(PROGRAMS / "dist_worker.py")
PHASES = ("startup", "import_jax", "trace", "lower", "compile_or_load")


def _bench(out: Path, *command: str, env: dict) -> tuple:
    proc = jaxcache("bench", "-t", "2", "-k", "1", "--no-prime", "--timeout", "240",
                    "--out", str(out), "--", *command, env=env)
    doc = json.loads((out / "bench.json").read_text()) if (out / "bench.json").exists() \
        else None
    return proc, doc


@pytest.fixture(scope="module")
def localhost(tmp_path_factory):
    pytest.importorskip("jax")
    out = tmp_path_factory.mktemp("ranks") / "out"
    return (*_bench(out, sys.executable, str(PROGRAMS / "dist_launch.py"), WORKER,
                    env=clean_env()), out)


def check_per_rank(proc, doc) -> None:
    """What a 2-rank CPU job must show: rank 1 named as missing, phases the maximum over
    ranks (never their sum), no phase or sum of phases beyond the wall time."""
    assert proc.returncode == 1, proc.stdout + proc.stderr
    s = doc["summary"]
    assert s["verdict"] == "warm-missed" and s["stop_reason"] == "warm-missed"
    assert "rank 1 missed" in s["message"] and "rank 1 missed" in s["detail"]
    assert "rank 0" not in s["message"]
    cold = [x for x in doc["samples"] if x["kind"] == "cold"]
    warm = [x for x in doc["samples"] if x["kind"] == "warm"]
    assert len(cold) == 1 and len(warm) == 1  # stopped after the trial that missed
    for sample in doc["samples"]:
        ranks = sample["ranks"]
        assert [r["rank"] for r in ranks] == [0, 1]
        wall = sample["wall_s"]
        assert sum(v for k, v in sample["phases"].items() if k != "rest") <= wall
        assert all(0 <= v <= wall for v in sample["phases"].values())
        assert 0 < sample["first_step_s"] <= wall
        for phase in PHASES:
            assert sample["phases"][phase] == pytest.approx(max(r["phases"][phase]
                                                                for r in ranks))
        both = [r["phases"]["compile_or_load"] for r in ranks]
        assert min(both) > 0 and sample["phases"]["compile_or_load"] < sum(both)
        assert sample["first_step_s"] == pytest.approx(max(r["first_step_s"] for r in ranks))
    (c,), (w,) = cold, warm
    assert c["ranks"][0]["written"] >= 1 and c["ranks"][1]["written"] == 0
    assert w["ranks"][0]["hits"] >= 1 and w["ranks"][1]["hits"] == 0
    assert w["hits"] >= 1  # counted over the job, the old "any rank hit" would say hit
    (miss,) = w["missed_ranks"]
    assert miss["rank"] == 1 and "jit__lambda" in miss["modules"]
    assert miss["keys_differ"] and miss["not_process_0"]
    by_rank = {r["rank"]: r for r in s["ranks"]}
    assert (by_rank[0]["warm_missed"], by_rank[1]["warm_missed"]) == (0, 1)


def test_localhost_two_ranks_per_rank_truth(localhost):
    proc, doc, out = localhost
    check_per_rank(proc, doc)
    assert "per rank" in proc.stdout and "0 of 1 (compiled again: jit__lambda" in proc.stdout
    assert "time to first step" in proc.stdout and "(2 ranks each)" in proc.stdout
    report = (out / "report.md").read_text()
    assert "| rank 1 |" in report and "| rank 0 |" in report
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(doc, schemas.load("bench"))


def test_decide_names_the_rank_that_missed(localhost, tmp_path):
    _, _, out = localhost
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    proc = jaxcache("decide", "--format", "json", str(cache), "--bench",
                    str(out / "bench.json"))
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    compatible = next(t for t in doc["tests"] if t["name"] == "compatible")
    assert compatible["passed"] is False
    line = next(e for e in compatible["evidence"] if e.startswith("warm runs that hit"))
    assert line.startswith("warm runs that hit: 0 of 1 (0%)") and "rank 1 missed in 1 of 1" in line
    assert any("rank 1 compiled again" in a for a in doc["advice"])


def test_srun_two_ranks_inside_bench(slurm, tmp_path):
    pytest.importorskip("jax")
    env = slurm.env(clean_env())
    proc, doc = _bench(tmp_path / "out", "srun", "-n", "2", "--overcommit", sys.executable,
                       WORKER, env=env)
    try:
        assert doc is not None, proc.stdout + proc.stderr + slurm.log("slurmctld")
        check_per_rank(proc, doc)
    finally:
        assert slurm.drained() == []


def _module(name, key, outcome, reason=None):
    return {"name": name, "input_shapes": "(f32[4],)", "cache_key": key, "outcome": outcome,
            "reason": reason, "trace_s": 0.1, "lower_s": 0.1, "compile_or_load_s": 1.0}


def _run(*ranks: list[dict]) -> RunRecord:
    return RunRecord.from_json(_record(*ranks))


def _record(*ranks: list[dict]) -> dict:
    main, *subs = ranks
    return {"platform": {"process_index": 0}, "import_jax_s": 1.0, "modules": main,
            "subprocesses": [{"pid": 10 + i, "platform": {"process_index": i + 1},
                              "modules": m} for i, m in enumerate(subs)]}


def test_a_module_the_cold_run_skipped_for_its_own_reasons_is_no_miss():
    """Two functions with the same name and shapes: the quick one was never written, so
    compiling it again is no miss; a key skipped only for not being process 0 is one."""
    cold = per_rank.ranks_of(_run([_module("jit_f", "A", "written"),
                                   _module("jit_f", "B", "skipped", "below-min-compile-time")],
                                  [_module("jit_f", "C", "skipped", "not-process-0")]))
    warm = per_rank.ranks_of(_run([_module("jit_f", "A", "hit"),
                                   _module("jit_f", "B", "skipped", "below-min-compile-time")],
                                  [_module("jit_f", "C", "skipped", "not-process-0")]))
    (miss,) = per_rank.misses(cold, warm)
    assert (miss.rank, miss.modules, miss.keys_differ, miss.not_process_0) == \
        (1, ("jit_f",), True, True)
    lost = per_rank.ranks_of(_run([_module("jit_f", "A", "skipped", "read-error")]))
    (miss,) = per_rank.misses(cold, lost)
    assert miss.rank == 0 and not miss.keys_differ  # the entry was there and not loaded


def test_rank_of_prefers_jax_then_the_launcher():
    """JAX's own process index (identity, else the platform read at the first compile), and
    only then the launcher's rank: a launcher may number processes differently."""
    assert per_rank.rank_of({"identity": {"process_index": 2, "launcher": {"rank": 5}},
                             "platform": {"process_index": 7}}) == 2
    assert per_rank.rank_of({"identity": {"process_index": None, "launcher": {"rank": 5}},
                             "platform": {"process_index": 7}}) == 7
    assert per_rank.rank_of({"identity": {"process_index": None, "launcher": {"rank": 5}},
                             "platform": {}}) == 5
    assert per_rank.rank_of({"platform": {"error": "x"}}) is None


def test_phases_are_the_maximum_over_ranks_and_fit_the_wall():
    ranks = per_rank.ranks_of(_run([_module("jit_f", "A", "written")],
                                   [_module("jit_f", "B", "skipped", "not-process-0")]))
    phases, first = per_rank.job_phases(ranks, wall_s=3.0)
    assert phases["compile_or_load"] == 1.0 and phases["import_jax"] == 1.0
    assert sum(phases.values()) == pytest.approx(3.0) and first == pytest.approx(2.2)
