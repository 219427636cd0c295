"""`jaxcache explain`: every reason that can happen on the CPU, produced by a real JAX program."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import paths
from support.jobs import jaxcache

pytest.importorskip("jax")

ROOT = paths.CHECKOUT
TRAIN = str(ROOT / "examples" / "train.py")
# where every module is written however fast it compiles (threshold 0), the train step's size
# decides nothing a test asserts: a small one spares ~3 s of compile per process
SMALL = ("--steps", "5")

EXPENSIVE = """
import jax, jax.numpy as jnp
def expensive(x):
    for i in range(60):
        x = jnp.tanh(x @ x.T * (1.0 + i * 1e-3)) + jnp.sin(x)
    return x
"""


def record_of(tmp_path, name, *cmd, cache=None, env=None, extra=()):
    rec = tmp_path / f"{name}.json"
    full_env = {**os.environ, **(env or {})}
    proc = jaxcache("run", "--quiet", "--cache-dir", str(cache or tmp_path / "cache"),
                    "--record", str(rec), *extra, "--", *cmd, env=full_env)
    assert rec.exists(), proc.stderr
    return rec


def program(tmp_path, name, code):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(code))
    return [sys.executable, str(path)]


def explain(*records):
    proc = jaxcache("explain", "--format", "json", *map(str, records))
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def reasons(doc, name=None):
    return {m["name"]: m["reason"] for m in doc["modules"] if name is None or m["name"] == name}


def test_compile_time_below_threshold_is_not_a_fault(tmp_path):
    # a threshold no compile reaches, however slow the machine
    rec = record_of(tmp_path, "r", sys.executable, TRAIN, "--steps", "2",
                    env={"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "1000"})
    rc, doc = explain(rec)
    assert set(reasons(doc).values()) == {"compile-time-below-threshold"}
    [m] = [m for m in doc["modules"] if m["name"] == "jit_train_step"]
    assert m["text"] == ("below the 1000 s compile-time threshold "
                         "(jax_persistent_cache_min_compile_time_secs)")
    # material = >= 2 s and >= 20% of start-up left uncached; on a quiet machine these
    # compiles sum to far less, but a machine loaded enough can push them further: the rule
    # decides, and only material (beyond the margin) exits 1
    [advice] = doc["thresholds"]
    if advice["material"]:
        assert rc == 1 and "; material (at least 2 s and 20%" in advice["text"]
    else:
        assert rc == 0 and ("not material" in advice["text"]) != advice["near"]


def test_entry_size_below_threshold(tmp_path):
    rec = record_of(tmp_path, "r", sys.executable, TRAIN, "--steps", "5",
                    env={"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
                         "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "1000000000"})
    _, doc = explain(rec)
    assert reasons(doc)["jit_train_step"] == "entry-size-below-threshold"
    [m] = [m for m in doc["modules"] if m["name"] == "jit_train_step"]
    assert "1000000000 B" in m["text"]


def test_cache_disabled(tmp_path):
    rec = record_of(tmp_path, "r", sys.executable, TRAIN, "--steps", "5",
                    env={"JAX_ENABLE_COMPILATION_CACHE": "false"})
    _, doc = explain(rec)
    assert reasons(doc)["jit_train_step"] == "cache-disabled"


def test_compiled_before_the_cache_was_enabled(tmp_path):
    cmd = program(tmp_path, "late", EXPENSIVE + """
        import os
        jax.config.update("jax_compilation_cache_dir", None)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.jit(lambda x: x + 1)(jnp.ones(3)).block_until_ready()   # before
        jax.config.update("jax_compilation_cache_dir", os.environ["CACHE"])
        jax.jit(expensive)(jnp.ones((8, 8))).block_until_ready()     # after
    """.replace("\n        ", "\n"))
    cache = tmp_path / "cache"
    rec = record_of(tmp_path, "r", *cmd, cache=cache, env={"CACHE": str(cache)})
    _, doc = explain(rec)
    r = reasons(doc)
    assert r["jit__lambda"] == "compiled-before-enabled" and r["jit_expensive"] == "written"


def test_env_var_set_after_import(tmp_path):
    cmd = program(tmp_path, "envlate", """
        import os
        import jax, jax.numpy as jnp
        jax.config.update("jax_compilation_cache_dir", None)  # as if the variable came late
        os.environ["JAX_COMPILATION_CACHE_DIR"] = os.environ["CACHE"]
        jax.jit(lambda x: x * 2)(jnp.ones(3)).block_until_ready()
    """)
    rec = record_of(tmp_path, "r", *cmd, env={"CACHE": str(tmp_path / "cache")})
    _, doc = explain(rec)
    assert reasons(doc)["jit__lambda"] == "env-after-import"


def test_first_compile_ran_disabled(tmp_path):
    cmd = program(tmp_path, "firstoff", EXPENSIVE + """
        jax.jit(lambda x: x + 1)(jnp.ones(3)).block_until_ready()   # first compile: disabled
        jax.config.update("jax_enable_compilation_cache", True)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.jit(expensive)(jnp.ones((8, 8))).block_until_ready()
    """.replace("\n        ", "\n"))
    rec = record_of(tmp_path, "r", *cmd, env={"JAX_ENABLE_COMPILATION_CACHE": "false"})
    rc, doc = explain(rec)
    assert reasons(doc)["jit_expensive"] == "first-compile-disabled"
    assert rc == 1  # it compiled for longer than the (lowered) threshold and was not cached


def test_host_callbacks(tmp_path):
    """Up to JAX 0.10 a module with a host callback is never written, and explain says so;
    from 0.11 it is written, then hit, the callback still runs, and explain says nothing of
    callbacks never being cached."""
    import jax

    from jaxcache.jaxcompat import versions

    cmd = program(tmp_path, "cb", """
        import jax, jax.numpy as jnp
        def f(x):
            jax.debug.print("x={x}", x=x.sum())
            return x * 2
        jax.jit(f)(jnp.ones(3)).block_until_ready()
    """)
    env = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}
    cold = record_of(tmp_path, "cold", *cmd, env=env)
    warm = record_of(tmp_path, "warm", *cmd, env=env)
    outcomes = [{m["name"]: m["outcome"] for m in json.loads(r.read_text())["modules"]}["jit_f"]
                for r in (cold, warm)]
    _, doc = explain(cold)
    text = " ".join(jaxcache("explain", str(cold), str(warm)).stdout.split())  # unwrapped
    if versions.caches_host_callbacks(jax.__version__):
        assert outcomes == ["written", "hit"]
        assert reasons(doc)["jit_f"] == "written"
        assert "host callback" not in text and "never writes" not in text, text
    else:
        assert outcomes == ["skipped", "skipped"]
        assert reasons(doc)["jit_f"] == "host-callbacks"
        assert "JAX <= 0.10 never writes such modules" in text, text


def test_max_size_without_filelock(tmp_path):
    """filelock is installed for the tests; the job makes it unimportable, as where it is not."""
    hide = ("import runpy, sys; sys.modules['filelock'] = None; sys.argv = sys.argv[1:]; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")
    rec = record_of(tmp_path, "r", sys.executable, "-c", hide, TRAIN, "--steps", "5",
                    env={"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
                         "JAX_COMPILATION_CACHE_MAX_SIZE": "1000000"})
    _, doc = explain(rec)
    assert reasons(doc)["jit_train_step"] == "filelock-missing"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for chattr +i")
def test_directory_not_writable(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    if subprocess.run(["chattr", "+i", str(cache)], capture_output=True).returncode:
        pytest.skip("chattr +i refused here")
    try:
        rec = record_of(tmp_path, "r", sys.executable, TRAIN, "--steps", "5", cache=cache,
                        env={"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"},
                        extra=["--allow-untrusted"])
    finally:
        subprocess.run(["chattr", "-i", str(cache)], check=True)
    _, doc = explain(rec)
    assert reasons(doc)["jit_train_step"] == "dir-not-writable"


def test_corrupt_entry_blocks_its_key_forever(tmp_path):
    cache = tmp_path / "cache"
    every = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}  # written however fast
    cold = record_of(tmp_path, "cold", sys.executable, TRAIN, *SMALL, cache=cache, env=every)
    [entry] = [p for p in cache.iterdir() if p.name.startswith("jit_train_step-")]
    entry.write_bytes(entry.read_bytes()[:100])  # truncated, as by a full disk or a crash
    warm = record_of(tmp_path, "warm", sys.executable, TRAIN, *SMALL, cache=cache, env=every)
    rc, doc = explain(warm)
    [m] = [m for m in doc["modules"] if m["name"] == "jit_train_step"]
    assert m["reason"] == "corrupt-entry" and "first writer wins" in m["text"]
    assert rc == 1 and m["missed_chance"]
    assert entry.stat().st_size == 100  # jaxcache never deletes it for you
    assert json.loads(cold.read_text())["modules"]


def test_not_process_0_in_a_real_two_process_job(tmp_path):
    programs = ROOT / "tests" / "programs"
    rec = record_of(tmp_path, "r", sys.executable, str(programs / "dist_launch.py"),
                    str(programs / "dist_worker.py"))
    _, doc = explain(rec)
    by_process = {}
    for m in doc["modules"]:
        by_process.setdefault(m["process"], set()).add(m["reason"])
    assert {"written"} in by_process.values()  # process 0 writes (thresholds set to 0)
    assert {"not-process-0"} in by_process.values()
    [m] = [m for m in doc["modules"] if m["reason"] == "not-process-0"][:1]
    assert m["text"] == "only process 0 writes; this was process 1"


def test_warm_miss_names_the_changed_key_component(tmp_path):
    """The same job over a copy of the cache in another directory misses on JAX <= 0.10
    (the path enters the compile options) and explain blames the path; from 0.11 it hits and
    explain blames nothing. Other XLA flags miss on every line."""

    from jaxcache.jaxcompat import versions

    every = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}  # written however fast
    a = tmp_path / "a"
    cold = record_of(tmp_path, "cold", sys.executable, TRAIN, *SMALL, cache=a, env=every)
    b = tmp_path / "b"
    b.mkdir(mode=0o700)
    for p in a.iterdir():
        (b / p.name).write_bytes(p.read_bytes())
    moved = record_of(tmp_path, "moved", sys.executable, TRAIN, *SMALL, cache=b, env=every)
    flags = record_of(tmp_path, "flags", sys.executable, TRAIN, *SMALL, cache=a,
                      env={**every, "XLA_FLAGS": "--xla_cpu_enable_fast_math=true"})
    rc, doc = explain(cold, moved, flags)
    assert rc == 1
    by_later = {Path(d["later"]).name: d for d in doc["key_diffs"]}
    moved_doc = json.loads(moved.read_text())
    if versions.path_in_key(moved_doc["versions"]["jax"]):
        assert by_later["moved.json"]["components"] == ["compile_options"]
        assert "cache directory path differs" in by_later["moved.json"]["causes"][0]
    else:
        assert "moved.json" not in by_later, by_later["moved.json"]
        step = [m for m in moved_doc["modules"] if m["name"] == "jit_train_step"]
        assert step and {m["outcome"] for m in step} == {"hit"}, step
        assert all("path" not in c for d in doc["key_diffs"] for c in d["causes"])
    assert "XLA flags" in by_later["flags.json"]["components"]
    assert any("--xla_cpu_enable_fast_math=true" in c for c in by_later["flags.json"]["causes"])


def test_explain_by_running_the_command(tmp_path):
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    proc = jaxcache("explain", "--", sys.executable, TRAIN, "--steps", "10", env=env)
    # 1 is honest too: on a machine loaded enough, the helpers' compiles left out by JAX's 1 s
    # threshold can add up to a material share of start-up (beyond the margin of the line)
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 0 or "thresholds leave" in proc.stdout
    assert proc.stdout.count("jit_train_step") == 2 and "from 2 records" in proc.stdout


@pytest.mark.parametrize("content,fragment", [
    (None, "no such record"),
    ("{not json", "is not JSON (line 1, column 2): expected a jaxcache run record"),
    ('{"schema": "jaxcache.audit/1"}', "not a jaxcache run record"),
    ('{"schema": "jaxcache.run/9"}', "newer than this jaxcache understands"),
])
def test_bad_records(tmp_path, content, fragment):
    path = tmp_path / "r.json"
    if content is not None:
        path.write_text(content)
    proc = jaxcache("explain", str(path))
    assert proc.returncode == 2 and fragment in proc.stderr and "Traceback" not in proc.stderr


def test_a_version_change_is_named_before_the_path():
    """Records from two JAX versions: the changed compile options follow from the version,
    whatever the paths; the path is blamed only where both records' JAX keeps it in the key."""
    from jaxcache.explain.key_causes import compile_options_cause as cause
    from jaxcache.records.run_document import ProcessEntry

    def rec(jax, path):  # each record's main process, as explain reads it
        return ProcessEntry.from_json({"versions": {"jax": jax, "jaxlib": jax},
                                       "cache_dir": {"path": path}})

    mixed = cause(rec("0.10.2", "/a"), rec("0.12.0.1", "/b"), {"compile_options"})
    assert "version change (jax 0.10.2 vs 0.12.0.1)" in mixed and "path differs" not in mixed
    old = cause(rec("0.10.2", "/a"), rec("0.10.2", "/b"), {"compile_options"})
    assert "cache directory path differs" in old
    new = cause(rec("0.12.0.1", "/a"), rec("0.12.0.1", "/b"), {"compile_options"})
    assert "path differs" not in new and "not the cache path" in new


def test_a_skipped_module_is_not_paired_with_its_written_namesake(tmp_path):
    """Two `jit__normal` modules with the same input shapes, different keys: one written then
    hit, the other skipped (below the threshold) in both runs. Nothing was missed: each pairs
    with its own key, never the skipped one with the written one."""
    cmd = [sys.executable, str(ROOT / "tests" / "programs" / "two_normals.py")]
    env = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}
    cold = record_of(tmp_path, "cold", *cmd, env=env)
    warm = record_of(tmp_path, "warm", *cmd, env=env)
    normals = [[(m["outcome"], m["cache_key"]) for m in json.loads(r.read_text())["modules"]
                if m["name"] == "jit__normal"] for r in (cold, warm)]
    assert [o for o, _ in normals[0]] == ["written", "skipped"], normals
    assert [o for o, _ in normals[1]] == ["hit", "skipped"], normals
    assert [k for _, k in normals[0]] == [k for _, k in normals[1]], normals
    rc, doc = explain(cold, warm)
    assert doc["key_diffs"] == [], doc["key_diffs"]
    proc = jaxcache("explain", str(cold), str(warm))
    assert "cross-process" not in proc.stdout and "key components" not in proc.stdout, proc.stdout
    # the one thing that may still exit 1: a machine so loaded that the skipped compile alone
    # is a material share of start-up (the thresholds' rule, not a miss)
    if not any(a["material"] for a in doc["thresholds"]):
        assert rc == 0 and proc.returncode == 0, proc.stdout
