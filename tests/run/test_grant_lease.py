"""A grant ends with its run: a process the job started that outlives `jaxcache run` loads
nothing from the cache once the run has ended. It is stopped with one line when it reaches
JAX's cache (it imported jax after the run, or before and compiles after), and a child that
cannot carry the probe (`python -I`) never gets the directory at all: the job's environment
holds no JAX_COMPILATION_CACHE_DIR, the probe sets it in each process under the run's lease."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from support.jobs import clean_env, jaxcache

pytestmark = pytest.mark.matrix

JOB = str(Path(__file__).resolve().parents[1] / "programs" / "outliving.py")


def _after_the_run(tmp_path: Path, mode: str) -> tuple[dict | None, str]:
    """Warm the cache with the job's own entry, run the job in `mode`, let its child go on
    once the run has ended; the child's result (None: it wrote none) and its output."""
    cache = tmp_path / "cache"
    env = clean_env(XDG_STATE_HOME=str(tmp_path / "state"))
    warm = jaxcache("run", "--cache-dir", str(cache), "--", sys.executable, JOB, "none",
                    str(tmp_path / "never"), str(tmp_path / "warm.json"), env=env)
    assert warm.returncode == 0, warm.stderr
    assert any(n.endswith("-cache") for n in os.listdir(cache))
    go, result = tmp_path / "go", tmp_path / "result.json"
    ran = jaxcache("run", "--cache-dir", str(cache), "--", sys.executable, JOB, mode, str(go),
                   str(result), env=env)
    assert ran.returncode == 0, ran.stderr
    go.touch()  # `jaxcache run` has ended: now the child uses JAX's cache
    log = Path(f"{result}.log")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not result.exists() and "stopping" not in (
            log.read_text() if log.exists() else ""):
        time.sleep(0.1)
    time.sleep(0.5)  # the child's exit, after its last line
    return (json.loads(result.read_text()) if result.exists() else None), log.read_text()


@pytest.mark.parametrize("mode", ["later", "early"])
def test_a_process_that_outlives_its_run_is_stopped_at_the_cache(tmp_path, mode):
    result, log = _after_the_run(tmp_path, mode)
    assert result is None, result  # never got to load anything
    lines = [line for line in log.splitlines() if line.startswith("jaxcache:")]
    assert lines == ["jaxcache: stopping this process: the `jaxcache run` that granted it its "
                     "cache has ended, and a grant ends with its run (start a process that "
                     "outlives its run under its own `jaxcache run`)"], log


def test_a_child_without_the_probe_gets_no_directory(tmp_path):
    result, log = _after_the_run(tmp_path, "isolated")
    assert result == {"dir": None, "hits": 0}, (result, log)


def test_during_the_run_the_job_and_its_children_have_the_cache(tmp_path):
    """The grant itself still works: the same job's entry is a hit in a second run."""
    cache = tmp_path / "cache"
    env = clean_env(XDG_STATE_HOME=str(tmp_path / "state"))
    for name in ("cold", "warm"):
        rec = tmp_path / f"{name}.json"
        ran = jaxcache("run", "--cache-dir", str(cache), "--record", str(rec), "--",
                       sys.executable, JOB, "none", str(tmp_path / "never"),
                       str(tmp_path / "r.json"), env=env)
        assert ran.returncode == 0, ran.stderr
    doc = json.loads((tmp_path / "warm.json").read_text())
    assert [m["outcome"] for m in doc["modules"] if "lambda" in m["name"]] == ["hit"]
    assert doc["env_cache_dir_at_first_compile"] is None  # never through the environment
    assert doc["cache_options_at_first_compile"]["jax_compilation_cache_dir"] == str(cache)


def test_a_run_whose_folder_is_removed_keeps_its_grant_while_it_runs(tmp_path):
    """A cleaner (logind at logout, a /tmp reaper) removes the run's probe folder, FIFO and
    all, while `jaxcache run` still runs: the job's processes are not taken for leftovers (the
    run is asked after by its pid and start time), and the job ends as it would have."""
    import shutil
    import subprocess

    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    told, go = tmp_path / "probe-dir", tmp_path / "go"
    job = ("import os, sys, time, jax, jax.numpy as jnp\n"
           "jax.config.update('jax_persistent_cache_min_compile_time_secs', 0)\n"
           "float(jax.jit(lambda x: x * 2.0)(jnp.ones(4)).sum())\n"
           f"open({str(told)!r}, 'w').write(os.environ['JAXCACHE_PROBE_DIR'])\n"
           f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.05)\n"
           "print(float(jax.jit(lambda x: x * 3.0)(jnp.ones(4)).sum()))\n")
    argv = [sys.executable, "-m", "jaxcache", "run", "-q", "--cache-dir", str(cache), "--",
            sys.executable, "-c", job]
    env = clean_env(XDG_STATE_HOME=str(tmp_path / "state"))
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 120
    while not told.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    shutil.rmtree(told.read_text())  # the run's folder, FIFO and all
    go.touch()
    out, err = proc.communicate(timeout=120)
    assert out.strip() == "12.0", err
    assert "stopping this process" not in err


def test_a_job_on_a_python_older_than_jaxcache_supports_runs_uncached_and_says_so(tmp_path):
    """A job's interpreter older than the package declares (Python 3.9, with a JAX of its
    own: a stand-in module here, all the probe touches) runs on without the cache, and the
    summary says why in one line: no internal error, no traceback."""
    import glob
    import subprocess

    found = [p for p in (*glob.glob("/root/.pyenv/versions/3.9*/bin/python3.9"),
                         "/usr/bin/python3.9")
             if os.path.exists(p) and subprocess.run([p, "-c", "pass"]).returncode == 0]
    if not found:
        pytest.skip("no Python 3.9 interpreter here (pyenv's, or /usr/bin/python3.9)")
    py39 = found[0]
    fake = tmp_path / "fake" / "jax"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "class _Config:\n    jax_compilation_cache_dir = None\n"
        "    jax_enable_compilation_cache = True\n"
        "    def update(self, name, value):\n        setattr(self, name, value)\n"
        "config = _Config()\n__version__ = '0.4.30'\n")
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    env = clean_env(XDG_STATE_HOME=str(tmp_path / "state"), PYTHONPATH=str(fake.parent))
    ran = jaxcache("run", "--cache-dir", str(cache), "--", py39, "-c",
                   "import jax; print(jax.config.jax_compilation_cache_dir, "
                   "jax.config.jax_enable_compilation_cache)", env=env)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["None", "False"]  # no directory, the cache off
    said = [line for line in ran.stderr.splitlines() if "Python 3.9" in line]
    assert said == [f"WARNING: process {said[0].split()[2].rstrip(':')}: jaxcache could not "
                    "guard which directory JAX loads from (RuntimeError: this process runs "
                    "Python 3.9, older than jaxcache supports (3.11)); its persistent cache "
                    "was turned off"], ran.stderr
    assert "Traceback" not in ran.stderr
