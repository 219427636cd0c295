"""The record against JAX's own word, on whichever JAX this venv has (`make matrix` runs it on
the newest patch of every supported line): a real job run cold, then warm, under `jaxcache
run`; every row must be a module JAX compiled, with the outcome JAX logged and the files on
disk, and `explain` must give no reason JAX did not have."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from conftest import jaxcache

jax = pytest.importorskip("jax")
pytestmark = pytest.mark.matrix

JOB = str(Path(__file__).parent / "programs" / "versions_job.py")
_LINE = {  # JAX's own debug lines (same on every supported line) -> the outcome they mean
    "hit": re.compile(r"Persistent compilation cache hit for '([^']+)'"),
    "miss": re.compile(r"PERSISTENT COMPILATION CACHE MISS for '([^']+)'"),
    "written": re.compile(r"Writing (\S+) to persistent compilation cache"),
    "skipped": re.compile(r"Not writing persistent cache entry for '([^']+)'"),
}


def _jax_says(log: str) -> dict[str, set[str]]:
    return {kind: set(rx.findall(log)) for kind, rx in _LINE.items()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("matrix")
    cache = base / "cache"
    env = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0.3", "PATH": "/usr/bin:/bin",
           "HOME": str(base)}
    out = {}
    for phase in ("cold", "warm"):
        log = base / f"{phase}.log"
        proc = jaxcache("run", "--cache-dir", str(cache), "--record", str(base / f"{phase}.json"),
                        "--", sys.executable, JOB, "--jax-log", str(log), env=env)
        assert proc.returncode == 0, proc.stderr
        doc = json.loads((base / f"{phase}.json").read_text())
        files = {p.name for p in cache.iterdir()}
        out[phase] = (doc, _jax_says(log.read_text()), files, proc)
    return base, out


@pytest.mark.parametrize("phase", ["cold", "warm"])
def test_every_row_is_a_module_jax_compiled_with_its_outcome(runs, phase):
    _, out = runs
    doc, said, files, _ = out[phase]
    assert doc["versions"]["jax"] == jax.__version__
    rows = {m["name"]: m for m in doc["modules"]}
    assert len(rows) == len(doc["modules"]), "one module twice: a phantom row"
    consulted = said["hit"] | said["miss"]
    assert set(rows) == consulted, f"rows {sorted(rows)} vs JAX's {sorted(consulted)}"
    for name, m in rows.items():
        assert m["compile_or_load_s"] is not None and m["compile_or_load_s"] > 0, name
        want = ("hit" if name in said["hit"] else "written" if name in said["written"]
                else "skipped" if name in said["skipped"] else None)
        assert m["outcome"] == want, (name, m["outcome"], want)
        assert m["cache_key"] and m["cache_key"].startswith(name + "-")
        if want in ("hit", "written"):
            assert f"{m['cache_key']}-cache" in files, name
            assert m["entry_bytes"] and m["entry_bytes"] > 0
        else:
            assert f"{m['cache_key']}-cache" not in files, name
    assert "jit_train_step" in rows and any(n.startswith("jit__lambda") for n in rows)


def test_cold_writes_and_warm_hits_what_was_written(runs):
    """Compile times near the threshold may differ between the two processes: the warm one
    hits what the cold one wrote, and may write what the cold one skipped, nothing else."""
    _, out = runs
    cold, warm = out["cold"][0], out["warm"][0]
    written = {m["name"] for m in cold["modules"] if m["outcome"] == "written"}
    assert "jit_train_step" in written
    assert {m["name"] for m in warm["modules"] if m["outcome"] == "hit"} == written
    late = {m["name"] for m in warm["modules"] if m["outcome"] == "written"}
    assert not late & written
    assert sum(1 for f in out["warm"][2] if f.endswith("-cache")) == len(written | late)


def test_explain_gives_only_reasons_jax_had(runs):
    base, _ = runs
    proc = jaxcache("explain", "--format", "json", str(base / "cold.json"),
                    str(base / "warm.json"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    reasons = {m["reason"] for m in doc["modules"]}
    assert reasons <= {"written", "hit", "compile-time-below-threshold"}, reasons
    assert not doc["key_diffs"]
