"""jaxcache.enable() in fresh processes: JAX's cache state is per process and cannot be undone."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("jax")

PRELUDE = """
import os, sys, json, warnings
warnings.simplefilter("always")
import jaxcache
from jaxcache.lifecycle.enabling import CacheLifecycleError, UntrustedCacheError
"""


def py(code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, "JAX_PLATFORMS": "cpu", **(env or {})}
    full.pop("JAX_COMPILATION_CACHE_DIR", None) if "JAX_COMPILATION_CACHE_DIR" not in (
        env or {}) else None
    return subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
                          capture_output=True, text=True, env=full)


def test_enable_before_first_compile_writes_entries(tmp_path):
    cache = tmp_path / "cache"
    proc = py(f"""
        import jax, jax.numpy as jnp
        r = jaxcache.enable({str(cache)!r})
        print(r.path, r.report.verdict.value, [t.code for t in r.traps])
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)  # test only
        jax.jit(lambda x: x * 3)(jnp.ones(3)).block_until_ready()
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[:2] == [str(cache), "PRIVATE"]
    assert oct(cache.stat().st_mode & 0o777) == "0o700"  # created private by enable
    assert any(n.endswith("-cache") for n in os.listdir(cache))


def test_enable_after_a_compile_is_detected(tmp_path):
    proc = py(f"""
        import jax, jax.numpy as jnp
        jax.jit(lambda x: x + 1)(jnp.ones(2))
        with warnings.catch_warnings(record=True) as caught:
            r = jaxcache.enable({str(tmp_path / 'c')!r})
        print([t.code for t in r.traps])
        print(any("already compiled" in str(w.message) for w in caught))
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["['compiled-before']", "True"]


def test_changing_the_directory_after_the_cache_exists(tmp_path):
    first, second = tmp_path / "one", tmp_path / "two"
    code = f"""
        import jax, jax.numpy as jnp
        jaxcache.enable({str(first)!r})
        jax.jit(lambda x: x + 1)(jnp.ones(2))
        try:
            jaxcache.enable({str(second)!r})
        except CacheLifecycleError as e:
            print("refused:", e)
        print("created anyway:", os.path.exists({str(second)!r}))
        r = jaxcache.enable({str(second)!r}, reset=True)
        from jax._src import compilation_cache as cc
        print("reset", r.reset, jax.config.jax_compilation_cache_dir)
    """
    proc = py(code)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("refused:") and f"already exists for {first}" in lines[0]
    assert lines[1] == "created anyway: False"  # a refusal changes nothing
    assert lines[2] == f"reset True {second}"


def test_first_compile_with_cache_disabled(tmp_path):
    proc = py(f"""
        import jax, jax.numpy as jnp
        jax.jit(lambda x: x + 1)(jnp.ones(2))   # first compile: cache disabled
        jax.config.update("jax_enable_compilation_cache", True)
        try:
            jaxcache.enable({str(tmp_path / 'c')!r})
        except CacheLifecycleError as e:
            print("refused:", e)
    """, env={"JAX_ENABLE_COMPILATION_CACHE": "false"})
    assert proc.returncode == 0, proc.stderr
    assert "first compile of this process ran with the cache disabled" in proc.stdout


def test_env_var_set_after_import(tmp_path):
    proc = py(f"""
        import jax
        os.environ["JAX_COMPILATION_CACHE_DIR"] = {str(tmp_path / 'late')!r}
        print(jax.config.jax_compilation_cache_dir)
        r = jaxcache.enable({str(tmp_path / 'c')!r})
        print([t.code for t in r.traps])
        print(os.environ["JAX_COMPILATION_CACHE_DIR"])
    """)
    assert proc.returncode == 0, proc.stderr
    # and the children this process starts now inherit the audited directory, not 'late'
    assert proc.stdout.splitlines() == ["None", "['env-after-import', 'env-replaced']",
                                        str(tmp_path / "c")]


def test_tilde_and_untrusted_and_max_size(tmp_path):
    world = tmp_path / "world"
    world.mkdir()
    world.chmod(0o777)
    proc = py(f"""
        import sys
        sys.modules["filelock"] = None  # unimportable, as where it is not installed
        import jax
        for path, kw in (("~/jax-cache", {{}}), ({str(world / 'c')!r}, {{}})):
            try:
                jaxcache.enable(path, **kw)
            except (CacheLifecycleError, UntrustedCacheError) as e:
                print(type(e).__name__, "|", str(e).splitlines()[0][:160])
        jax.config.update("jax_compilation_cache_max_size", 10_000_000)
        try:
            jaxcache.enable({str(tmp_path / 'ok')!r})
        except CacheLifecycleError as e:
            print(type(e).__name__, "|", str(e)[:80])
    """)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("CacheLifecycleError | '~/jax-cache' starts with '~'")
    assert lines[1].startswith(f"UntrustedCacheError | refusing cache {world / 'c'}: verdict "
                               "UNSAFE (everyone)")
    assert "needs the 'filelock' package" in lines[2]
    assert not (world / "c").exists()


def test_allow_untrusted_is_loud(tmp_path):
    world = tmp_path / "world"
    world.mkdir()
    world.chmod(0o777)
    (world / "c").mkdir(mode=0o700)
    proc = py(f"""
        import jax
        r = jaxcache.enable({str(world / 'c')!r}, allow_untrusted=True)
        print(r.report.verdict.value, jax.config.jax_compilation_cache_dir)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"UNSAFE {world / 'c'}"
    assert "ENABLING AN UNTRUSTED CACHE" in proc.stderr


def test_import_jaxcache_does_not_import_jax():
    proc = subprocess.run([sys.executable, "-c", "import sys, jaxcache; jaxcache.audit; "
                           "print('jax' in sys.modules)"], capture_output=True, text=True)
    assert proc.stdout.strip() == "False", proc.stderr
