"""The record against JAX's own word, on whichever JAX this venv has (`make matrix` runs it on
the newest patch of every supported line): a real job run cold, then warm, under `jaxcache
run`; every row must be a module JAX compiled, with the outcome JAX logged and the files on
disk, and `explain` must give no reason JAX did not have.

No outcome here depends on how fast this machine compiles: cold and warm run with the
compile-time threshold at 0 (every module that can be cached is written, then hit), and a
third run, in another directory, with a threshold no compile reaches (every module skipped).
The one module with a host callback is never written up to JAX 0.10 and cached from 0.11."""

from __future__ import annotations

import json
import re
import sys

import pytest
from support import paths
from support.jobs import jaxcache
from support.users import isolation

from jaxcache.jaxcompat import versions

jax = pytest.importorskip("jax")
pytestmark = pytest.mark.matrix
CALLBACKS_CACHED = versions.caches_host_callbacks(jax.__version__)
PHASES = {"cold": ("cache", "0"), "warm": ("cache", "0"), "high": ("other-cache", "1000")}

JOB = str(paths.PROGRAMS / "versions_job.py")
_LINE = {  # JAX's own debug lines (same on every supported line) -> the outcome they mean
    "hit": re.compile(r"Persistent compilation cache hit for '([^']+)'"),
    "miss": re.compile(r"PERSISTENT COMPILATION CACHE MISS for '([^']+)'"),
    "written": re.compile(r"Writing (\S+) to persistent compilation cache"),
    "skipped": re.compile(r"Not writing persistent cache entry for '([^']+)'"),
    "host-callbacks": re.compile(r"Not writing persistent cache entry for '([^']+)' because it "
                                 r"uses host callbacks"),
}


def _jax_says(log: str) -> dict[str, set[str]]:
    return {kind: set(rx.findall(log)) for kind, rx in _LINE.items()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("matrix")
    out = {}
    for phase, (folder, threshold) in PHASES.items():
        cache = base / folder
        env = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": threshold, "PATH": "/usr/bin:/bin",
               "HOME": str(base), **isolation()}
        log = base / f"{phase}.log"
        proc = jaxcache("run", "--cache-dir", str(cache), "--record", str(base / f"{phase}.json"),
                        "--", sys.executable, JOB, "--jax-log", str(log), env=env)
        assert proc.returncode == 0, proc.stderr
        doc = json.loads((base / f"{phase}.json").read_text())
        files = {p.name for p in cache.iterdir()}
        out[phase] = (doc, _jax_says(log.read_text()), files, proc)
    return base, out


@pytest.mark.parametrize("phase", list(PHASES))
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
        if name in said["host-callbacks"]:
            assert m["reason"] == "host-callbacks", (name, m["reason"])
    assert {"jit_train_step", "jit_normalize", "jit_report"} <= set(rows), sorted(rows)
    assert any(n.startswith("jit__lambda") for n in rows)


def test_cold_writes_every_module_and_warm_hits_them(runs):
    """At threshold 0 the cold run writes every module it can, the warm run hits exactly
    those and writes nothing; the host-callback module is among them from JAX 0.11 on."""
    _, out = runs
    cold, warm = out["cold"][0], out["warm"][0]
    written = {m["name"] for m in cold["modules"] if m["outcome"] == "written"}
    rest = {m["name"]: m["reason"] for m in cold["modules"] if m["outcome"] != "written"}
    assert rest == ({} if CALLBACKS_CACHED else {"jit_report": "host-callbacks"}), rest
    assert {m["name"] for m in warm["modules"] if m["outcome"] == "hit"} == written
    assert not {m["name"] for m in warm["modules"] if m["outcome"] == "written"}
    assert sum(1 for f in out["warm"][2] if f.endswith("-cache")) == len(written)
    assert ("jit_report" in written) == CALLBACKS_CACHED
    for phase in ("cold", "warm"):  # the callback ran every time, hit or not
        assert "report " in out[phase][3].stdout, phase


def test_a_threshold_no_compile_reaches_skips_every_module(runs):
    _, out = runs
    doc, said, files, _ = out["high"]
    assert not any(f.endswith("-cache") for f in files), files
    assert {m["outcome"] for m in doc["modules"]} == {"skipped"}
    reasons = {m["name"]: m["reason"] for m in doc["modules"]}
    assert set(reasons.values()) <= {"compile-time-below-threshold", "host-callbacks"}
    assert (reasons["jit_report"] == "host-callbacks") == (not CALLBACKS_CACHED)


def test_explain_gives_only_reasons_jax_had(runs):
    base, _ = runs
    proc = jaxcache("explain", "--format", "json", str(base / "cold.json"),
                    str(base / "warm.json"))
    # everything cached from 0.11; before, the host-callback module is the one left out
    assert proc.returncode in ((0,) if CALLBACKS_CACHED else (0, 1)), proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    reasons = {m["reason"] for m in doc["modules"]}
    allowed = {"written", "hit"} | (set() if CALLBACKS_CACHED else {"host-callbacks"})
    assert reasons <= allowed, reasons
    assert not doc["key_diffs"]
    text = " ".join(jaxcache("explain", str(base / "cold.json"),
                             str(base / "warm.json")).stdout.split())  # unwrapped
    assert ("never writes" in text) == (not CALLBACKS_CACHED), text


def test_sealed_publisher_then_consumer_hits_every_module(tmp_path):
    """`run --sealed`: the publisher signs what it writes, a reader holding only the public
    key hits every module the publisher wrote, and the job's output is the same."""
    key = tmp_path / "keys" / "ci.key"
    assert jaxcache("keygen", str(key)).returncode == 0
    pub = (tmp_path / "keys" / "ci.key.pub").read_text().strip()
    cache = tmp_path / "sealed"
    env = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0", "PATH": "/usr/bin:/bin",
           "HOME": str(tmp_path), **isolation()}
    docs, outputs = [], []
    for name, who in (("publish", ("--signing-key", str(key))),
                      ("consume", ("--trusted-key", pub))):
        record = tmp_path / f"{name}.json"
        proc = jaxcache("run", "--sealed", *who, "--cache-dir", str(cache), "--record",
                        str(record), "--", sys.executable, JOB, env=env)
        assert proc.returncode == 0, proc.stderr
        docs.append(json.loads(record.read_text()))
        outputs.append([line for line in proc.stdout.splitlines() if line.startswith("checksum")])
    publish, consume = docs
    written = {m["name"] for m in publish["modules"] if m["outcome"] == "written"}
    assert "jit_train_step" in written and ("jit_report" in written) == CALLBACKS_CACHED
    assert {m["name"] for m in consume["modules"] if m["outcome"] == "hit"} == written
    assert consume["seal"]["rejections"] == [] and consume["seal"]["writes"] == []
    assert outputs[0] == outputs[1] and outputs[0]
