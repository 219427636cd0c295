"""The sealed backend: a CacheInterface subclass JAX holds in front of a jaxcache store,
installed through the guard's factory, with XLA's unsigned sub-caches turned off.
"""

from __future__ import annotations

import os

from jaxcache.jaxcompat.guard import BACKENDS, install_factory, real_path
from jaxcache.jaxcompat.internals import (
    JaxInternalsChanged,
    cache_interface,
    check_contents,
    compilation_cache_module,
    disable_cache,
    verification_cache,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    class Store(Protocol):
        """What a sealed backend serves JAX from (seal/stores/sealed_cache.py's caches)."""

        def get(self, key: str) -> bytes | None: ...

        def put(self, key: str, value: bytes) -> None: ...

_BACKEND_CLASS: list[type] = []  # JaxcacheBackend, once made (as guard.py's RefusedCache)


def _backend_class() -> type:
    """The CacheInterface subclass JAX holds for a sealed store (built once, at first use,
    so that importing this module never imports JAX)."""
    if _BACKEND_CLASS:
        return _BACKEND_CLASS[0]

    class JaxcacheBackend(cache_interface()):  # type: ignore[misc]  # JAX's class, found at run time
        """JAX's cache object in front of a jaxcache store (seal/stores/sealed_cache.py, JAX-free).

        jax_compilation_cache_check_contents is honoured as JAX does it: set when the cache
        object is made, the factory (guard.py) hands JAX its own VerificationCache around
        this one (`wrapped`), exactly as JAX's get_file_cache does. Set later, this object
        wraps the store in one itself, so the option counts whenever it is set."""

        def __init__(self, store: Store, path: str) -> None:
            self.store = store
            self._path = path  # what JAX's reset_cache() logs and cache_state() reads
            self._verifier: Store | None = None
            self.wrapped = False  # JAX holds a VerificationCache around this object

        def _target(self) -> Store:
            if self.wrapped or not check_contents():
                return self.store
            if self._verifier is None:
                self._verifier = verification_cache()(self.store)
            return self._verifier

        def get(self, key: str) -> bytes | None:
            return self._target().get(key)

        def put(self, key: str, value: bytes) -> None:
            self._target().put(key, value)

    _BACKEND_CLASS.append(JaxcacheBackend)
    return JaxcacheBackend


def max_size() -> int:
    """jax_compilation_cache_max_size as JAX sees it now: a sealed store reads it at every
    write, so a limit set before or after enabling counts."""
    from jax._src import config as jax_config

    return int(jax_config.compilation_cache_max_size.value)


def install_backend(path: str, store: Store) -> None:
    """Make `store` (an object with get(key) / put(key, bytes)) JAX's persistent cache for
    `path`, now, before any compile can create JAX's own, wrapped in a CacheInterface
    subclass made here.

    JAX builds its cache object by calling the module-level factory `get_file_cache(path)` at
    initialization (0.5 to 0.12). We replace the factory once (install_factory), by one that
    returns the registered backend for a registered directory (so a later reset_cache() and
    re-initialization stay sealed) and JAX's own cache for any other the guard admits; then
    point the config at `path`, initialize, and check that JAX really holds our backend. If it
    does not, the process is left with no persistent cache at all and JaxInternalsChanged is
    raised: a sealed cache must never fall back to an unsealed one. On success, the backends
    installed before are let go (their directory descriptors closed): one per process.
    """
    import jax

    cc = compilation_cache_module()
    if cc._cache is not None:
        raise JaxInternalsChanged("JAX's cache object already exists; reset it first")
    if not all(callable(getattr(store, name, None)) for name in ("get", "put")):
        raise TypeError("a cache store needs get(key) and put(key, value)")
    try:
        install_factory(cc)
        backend = _backend_class()(store, path)
    except JaxInternalsChanged as exc:
        disable_cache()
        raise JaxInternalsChanged(f"{exc}; the persistent cache is now OFF for this process "
                                  "rather than unsealed") from None
    before = dict(BACKENDS)
    BACKENDS.clear()
    BACKENDS[real_path(path)] = backend
    jax.config.update(  # type: ignore[no-untyped-call]  # untyped in JAX
        "jax_compilation_cache_dir", path)
    try:
        cc._initialize_cache()
        ok = getattr(cc._cache, "_base_cache", cc._cache) is backend  # maybe verified
    except Exception as exc:  # noqa: BLE001 - any failure here means: not sealed
        ok, why = False, f"{type(exc).__name__}: {exc}"
    else:
        why = f"JAX holds {type(cc._cache).__name__}, not the sealed backend"
    if not ok:
        BACKENDS.clear()
        BACKENDS.update(before)
        disable_cache()
        raise JaxInternalsChanged(
            f"could not install the sealed cache into JAX {jax.__version__} ({why}); the "
            "persistent cache is now OFF for this process rather than unsealed")
    for old in before.values():
        close_backend(old)


def close_backend(backend: object) -> None:
    close = getattr(getattr(backend, "store", None), "close", None)
    if close is not None:
        close()


XLA_SUBCACHE_FLAGS = ("xla_gpu_per_fusion_autotune_cache_dir", "xla_gpu_kernel_cache_file",
                      "xla_gpu_experimental_autotune_cache")


def disable_xla_subcaches() -> None:
    """Keep XLA's own caches (GPU autotune results, compiled kernels) out of the cache dir.

    JAX points them inside jax_compilation_cache_dir by default, and XLA reads them without
    any signature: in a sealed directory they would let its writers choose GPU kernels. Raises
    JaxInternalsChanged when the option is missing, when XLA_FLAGS sets them itself, or when it
    names a file of flags (which XLA reads, and which could)."""
    import jax

    flags = os.environ.get("XLA_FLAGS", "")
    if flags.strip() and not flags.lstrip().startswith("-"):
        # XLA reads a value that does not start with '-' as the name of a file of flags
        # (parse_flags_from_env): what it sets cannot be judged here, and may change later
        raise JaxInternalsChanged(
            "XLA_FLAGS names a file of flags, which XLA reads when it starts and jaxcache cannot "
            "judge (it could set XLA's sub-caches, read unsigned); give the flags themselves")
    named = [f for f in XLA_SUBCACHE_FLAGS if f in flags]
    if named:
        raise JaxInternalsChanged(
            f"XLA_FLAGS sets {', '.join(named)}: XLA would read those files unsigned; a sealed "
            "cache refuses to run beside them")
    try:
        jax.config.update(  # type: ignore[no-untyped-call]  # untyped in JAX
            "jax_persistent_cache_enable_xla_caches", "none")
    except (AttributeError, ValueError) as exc:
        raise JaxInternalsChanged(f"cannot turn off XLA's sub-caches on JAX {jax.__version__}: "
                                  f"{exc}") from None


def uses_backend(store: object) -> bool:
    """Is `store` (installed with install_backend) what JAX's cache object serves now?"""
    return getattr(held_backend(), "store", None) is store


def held_backend() -> object:
    """The cache object JAX holds, seen through JAX's VerificationCache around it."""
    cache = compilation_cache_module()._cache
    return getattr(cache, "_base_cache", cache)
