"""enable() and the environment: what children inherit, variables that point elsewhere, and a
job that points JAX at another directory that passes the audit. Real JAX, separate processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support import paths
from support.jobs import clean_env, jaxcache

pytest.importorskip("jax")

JOB = str(paths.PROGRAMS / "redirect_job.py")


def py(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=clean_env(**env), timeout=300)


def test_xla_flags_naming_a_cache_elsewhere_are_refused(tmp_path):
    private, elsewhere = tmp_path / "private", tmp_path / "elsewhere"
    code = f"""
import jax, jaxcache, os
try:
    jaxcache.enable({str(private)!r})
except jaxcache.CacheLifecycleError as e:
    print("refused:", e)
print(os.path.exists({str(private)!r}), jax.config.jax_compilation_cache_dir)
"""
    proc = py(code, XLA_FLAGS=f"--xla_gpu_kernel_cache_file={elsewhere}/kernels")
    assert proc.returncode == 0, proc.stderr
    first, second = proc.stdout.splitlines()
    assert first.startswith(f"refused: XLA_FLAGS sets --xla_gpu_kernel_cache_file={elsewhere}")
    assert second == "False None"  # refused before anything was created or set
    inside = py(code, XLA_FLAGS=f"--xla_gpu_per_fusion_autotune_cache_dir={private}/autotune")
    assert inside.returncode == 0 and inside.stdout.splitlines() == [f"True {private}"], \
        inside.stdout + inside.stderr


def test_sealed_enable_leaves_children_no_plain_path(tmp_path):
    """A child without the sealed backend must not read the shared directory unsigned: after
    enable(sealed=True) it inherits no JAX_COMPILATION_CACHE_DIR, and a redirect in the job
    itself is refused."""
    pytest.importorskip("cryptography")
    key = tmp_path / "keys" / "ci.key"
    assert jaxcache("keygen", str(key)).returncode == 0
    shared, other = tmp_path / "sealed", tmp_path / "other"
    other.mkdir(mode=0o700)
    code = f"""
import json, os, subprocess, sys
import jax, jax.numpy as jnp, jaxcache
from jaxcache import jaxcompat
jaxcache.enable({str(shared)!r}, sealed=True, signing_key={str(key)!r})
child = subprocess.run([sys.executable, {JOB!r}], capture_output=True, text=True, check=True)
jax.config.update("jax_compilation_cache_dir", {str(other)!r})
jax.jit(lambda x: x + 1)(jnp.ones(2)).block_until_ready()
print(json.dumps({{"env": os.environ.get("JAX_COMPILATION_CACHE_DIR"),
                  "child": json.loads(child.stdout.splitlines()[-1]),
                  "now": jaxcompat.current_cache()["status"]}}))
"""
    proc = py(code, JAX_COMPILATION_CACHE_DIR=str(other))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["env"] is None and out["child"]["env"] is None and out["child"]["dir"] is None
    # the sealed cache object stays (JAX ignores a later setting once its cache exists)
    assert out["now"] == "served"
    assert os.listdir(other) == []


def test_job_that_enables_another_private_directory(tmp_path):
    """Under `jaxcache run`, a job that calls enable() on another directory that passes the
    audit: JAX uses it, the summary names it first with its verdict, the job's exit stays."""
    private, mine = tmp_path / "private", tmp_path / "mine"
    record = tmp_path / "run.json"
    proc = jaxcache("run", "--cache-dir", str(private), "--record", str(record), "--",
                    sys.executable, JOB, "--enable", str(mine), env=clean_env())
    assert proc.returncode == 0, proc.stderr
    assert f"WARNING: JAX was pointed at {mine} (PRIVATE), not the audited cache: JAX used " \
        "it (enable)" in proc.stderr
    doc = json.loads(record.read_text())
    (other,) = [d for d in doc["jax_cache_dirs"] if not d["audited_dir"]]
    assert (other["path"], other["status"], other["verdict"]) == (str(mine), "served", "PRIVATE")
    [f] = [m for m in doc["modules"] if m["name"] == "jit_f"]
    assert f["cache_dir"] == str(mine) and f["outcome"] == "written"
    assert any(p.name.startswith("jit_f-") for p in mine.iterdir())
    assert jaxcache("explain", str(record)).returncode == 0
