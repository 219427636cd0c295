"""enable() is all-or-nothing, disable() / enabled() put JAX back, and a sealed store
holds no descriptor it does not need; real JAX in a fresh process each."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.jobs import jaxcache

pytest.importorskip("cryptography")
pytest.importorskip("jax")

PRELUDE = """
import os, warnings
warnings.simplefilter("ignore")
import jax, jax.numpy as jnp
from jax._src import compilation_cache as cc, config
import jaxcache
from jaxcache import jaxcompat
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
BASE, KEY = {base!r}, {key!r}
PLAIN, SEALED = os.path.join(BASE, "plain"), os.path.join(BASE, "sealed")
os.makedirs(PLAIN, mode=0o700, exist_ok=True)

def state():
    return (config.compilation_cache_dir.get_global(),
            jax.config.jax_persistent_cache_enable_xla_caches, cc._cache,
            cc._cache_initialized, cc._cache_checked, cc._cache_used,
            os.environ.get("JAX_COMPILATION_CACHE_DIR"))

def entries(d):
    return sorted(n for n in os.listdir(d) if n.endswith("-cache"))
"""


@pytest.fixture(scope="module")
def key(tmp_path_factory):
    base = tmp_path_factory.mktemp("undo-keys")
    path = base / "ci.key"
    assert jaxcache("keygen", str(path)).returncode == 0
    return path


def check(tmp_path: Path, key: Path, body: str) -> None:
    base = tmp_path / "b"
    base.mkdir(mode=0o700)
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    code = PRELUDE.format(base=str(base), key=str(key)) + body
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_sealed_stores_leak_no_descriptors(tmp_path, key):
    check(tmp_path, key, """
fds = lambda: len(os.listdir("/proc/self/fd"))
jaxcache.enable(SEALED, sealed=True, signing_key=KEY)
one = fds()
for _ in range(20):
    jaxcache.enable(SEALED, sealed=True, signing_key=KEY, reset=True)
assert fds() == one, (one, fds())
jax.jit(lambda x: x * 2)(jnp.ones(3))
assert jaxcache.disable()
assert fds() == one - 1, (one, fds())  # the store's directory is let go
""")


def test_failed_enable_changes_nothing(tmp_path, key):
    """A plain cache is in use; a sealed enable that fails after resetting JAX's cache
    (XLA_FLAGS names an XLA sub-cache) leaves it exactly as it was, and so does one inside
    a config context that would hide the setting, sealed or not."""
    check(tmp_path, key, """
jax.config.update("jax_compilation_cache_dir", PLAIN)
os.environ["JAX_COMPILATION_CACHE_DIR"] = PLAIN
jax.jit(lambda x: x * 2)(jnp.ones(3))
before, written = state(), len(entries(PLAIN))
assert before[2] is not None and before[1] != "none"
os.environ["XLA_FLAGS"] = "--xla_gpu_per_fusion_autotune_cache_dir=/tmp/elsewhere"
try:
    jaxcache.enable(SEALED, sealed=True, signing_key=KEY, reset=True)
except Exception as exc:
    assert "refuses to run beside them" in str(exc), exc
else:
    raise SystemExit("enabled beside XLA_FLAGS")
assert state() == before, (state(), before)
assert not os.path.exists(SEALED)  # it made the directory, and took it back
del os.environ["XLA_FLAGS"]
other = os.path.join(BASE, "other")
for kwargs in ({"sealed": True, "signing_key": KEY, "reset": True}, {"reset": True}):
    with config.compilation_cache_dir(other):
        try:
            jaxcache.enable(SEALED if kwargs.get("sealed") else PLAIN, **kwargs)
        except jaxcache.CacheLifecycleError as exc:
            assert "in this thread" in str(exc), exc
        else:
            raise SystemExit("enabled under a config context that hides it")
    assert state() == before, (state(), before)
jax.jit(lambda x: x * 5)(jnp.ones(3))
assert len(entries(PLAIN)) == written + 1  # JAX's own cache still works as before
""")


def test_reset_is_honoured_with_a_cache_object_jax_did_not_create(tmp_path, key):
    check(tmp_path, key, """
from jax._src.lru_cache import LRUCache
cc._cache = LRUCache(PLAIN, max_size=-1)  # put there by someone else: not initialized
try:
    jaxcache.enable(SEALED, sealed=True, signing_key=KEY)
except jaxcache.CacheLifecycleError as exc:
    assert "reset=True" in str(exc)
else:
    raise SystemExit("enabled over a foreign cache object without reset")
result = jaxcache.enable(SEALED, sealed=True, signing_key=KEY, reset=True)
assert result.reset and jaxcompat.uses_backend(result.backend)
jax.jit(lambda x: x * 2)(jnp.ones(3))
assert entries(SEALED) and not entries(PLAIN)
cc._cache = LRUCache(PLAIN, max_size=-1)
jaxcache.enable(PLAIN, reset=True)  # the plain path too
jax.jit(lambda x: x * 3)(jnp.ones(3))
assert entries(PLAIN)
""")


def test_disable_and_enabled_put_jax_back(tmp_path, key):
    check(tmp_path, key, """
jax.config.update("jax_compilation_cache_dir", PLAIN)
jax.jit(lambda x: x * 2)(jnp.ones(3))
before, written = state(), len(entries(PLAIN))
with jaxcache.enabled(SEALED, sealed=True, signing_key=KEY, reset=True) as result:
    assert jaxcompat.uses_backend(result.backend)
    assert jax.config.jax_persistent_cache_enable_xla_caches == "none"
    jax.jit(lambda x: x * 3)(jnp.ones(3))
assert state() == before, (state(), before)
assert result.backend.closed
jax.jit(lambda x: x * 4)(jnp.ones(3))  # JAX's own cache object, as before
assert len(entries(PLAIN)) == written + 1 and len(entries(SEALED)) == 1
plain2 = os.path.join(BASE, "plain2")
jaxcache.enable(plain2, reset=True)
jaxcache.enable(SEALED, sealed=True, signing_key=KEY, reset=True)
assert jaxcache.disable() and not jaxcache.disable()  # both undone, back to the start
assert state() == before, (state(), before)
assert not jaxcompat.GUARD.on
""")
