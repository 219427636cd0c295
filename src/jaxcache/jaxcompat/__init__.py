"""Every touch of JAX internals, in one place, version-gated.

jaxcache reads JAX's private lifecycle state (jax._src.compilation_cache) to detect the traps
that make a cache setting silently ineffective. Those names are not API: they were verified on
the versions in TESTED, and `tests/test_jaxcompat.py` fails loudly when the pinned JAX moves.
On a JAX outside the supported minor lines, features that need internals fail closed. What JAX
logs and emits per version (which the probe reads) is in versions.py.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from jaxcache.jaxcompat.versions import (
    NEWEST_LINE,
    OLDEST_LINE,
    TESTED,
    support,
    why_unverified,
)

__all__ = ["TESTED", "OLDEST_LINE", "NEWEST_LINE", "support", "why_unverified"]

_STATE = ("_cache", "_cache_checked", "_cache_used", "_cache_initialized", "reset_cache",
          "get_file_cache", "_initialize_cache")

DEFAULT_MIN_COMPILE_TIME_SECS = 1.0
DEFAULT_MIN_ENTRY_SIZE_BYTES = 0


class JaxInternalsChanged(RuntimeError):
    """The installed JAX does not have the internals this version of jaxcache relies on."""


def installed_version(dist: str = "jax") -> str | None:
    """A distribution's version without importing it (the audit must not import JAX)."""
    import importlib.metadata

    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_supported(version: str) -> None:
    """Fail closed outside the supported minor lines (0.4.x ignores a dir set after a
    compile; a newer JAX may have moved its private cache state)."""
    why = why_unverified(version)
    if why is not None:
        raise JaxInternalsChanged(f"{why}. Refusing to guess: pin JAX to a tested version")


def _cc():
    import jax

    check_supported(jax.__version__)
    from jax._src import compilation_cache as cc

    missing = [name for name in _STATE if not hasattr(cc, name)]
    if missing:
        raise JaxInternalsChanged(
            f"jax._src.compilation_cache on JAX {jax.__version__} lacks {', '.join(missing)}; "
            "jaxcache cannot check the cache's lifecycle and fails closed")
    return cc


@dataclass(frozen=True)
class CacheState:
    """JAX's process-wide cache lifecycle, as jaxcache needs to know it."""

    compiled: bool  # a compile already asked whether to use the cache
    used: bool  # ... and the answer was yes
    initialized: bool  # the cache object was created
    path: str | None  # the directory the cache object was created with


def cache_state() -> CacheState:
    cc = _cc()
    cache = cc._cache
    path = None
    if cache is not None:
        raw = getattr(cache, "_path", None)
        path = None if raw is None else str(raw)
    return CacheState(bool(cc._cache_checked), bool(cc._cache_used),
                      bool(cc._cache_initialized), path)


def reset_cache() -> None:
    """JAX's own reset: forget the cache object and the first-compile decision."""
    _cc().reset_cache()


def config_value(name: str):
    import jax

    return getattr(jax.config, name)


def set_cache_dir(path: str) -> None:
    import jax

    jax.config.update("jax_compilation_cache_dir", path)


_BACKENDS: dict[str, object] = {}  # realpath of a cache dir -> the backend JAX must use there
# The directory guard (guard_cache_dirs): which directories JAX may open its own cache in.
_ADMITTED: dict[str, str] = {}  # absolute path -> how it was admitted ("audited", ...)
_REFUSED: dict[str, str] = {}  # absolute path -> why the guard refused it
_GUARD: dict = {"on": False, "auditor": None}
_SEEN: list[dict] = []  # every directory JAX initialized a cache for in this process, in order
_BY_OBJECT: dict[int, dict] = {}  # id(cache object JAX got) -> its entry in _SEEN


class RefusedCache:
    """What JAX gets for a directory nobody audited: every get misses, every put is dropped.

    JAX then compiles everything itself and leaves nothing there; `_path` is what its
    reset_cache() logs."""

    def __init__(self, path: str, reason: str) -> None:
        self._path = path
        self.reason = reason

    def get(self, key: str) -> None:
        return None

    def put(self, key: str, value: bytes) -> None:
        return None


def _norm(path) -> str:
    return os.path.normpath(os.path.abspath(str(path)))  # JAX also takes path-like objects


def _note(where, status: str, how: str, reason: str | None, made) -> None:
    path = str(where) if "://" in str(where) else _norm(where)
    entry = {"path": path, "given": str(where), "status": status, "how": how,
             "reason": reason, "pid": os.getpid()}
    _SEEN.append(entry)
    _BY_OBJECT[id(made)] = dict(entry, _object=made)  # kept alive: ids stay unique


def _key(where) -> str:
    return str(where) if "://" in str(where) else _norm(where)


def _judge(where) -> tuple[str | None, str | None]:
    """How the guard admits `where` (None: refused) and why not. Asks the auditor at most
    once per directory (when the job points JAX there, or at the factory)."""
    if _BACKENDS.get(os.path.realpath(str(where))) is not None:
        return "sealed", None
    key = _key(where)
    if key in _ADMITTED:
        return _ADMITTED[key], None
    if key in _REFUSED:
        return None, _REFUSED[key]
    reason = "not the directory jaxcache audited"
    if "://" not in key and _GUARD["auditor"] is not None:
        try:
            ok, reason = _GUARD["auditor"](str(where))
        except Exception as exc:  # noqa: BLE001 - cannot judge it: refuse (fail closed)
            ok, reason = False, f"could not audit it ({type(exc).__name__}: {exc})"
        if ok:
            _ADMITTED[key] = "audited-in-process"
            return "audited-in-process", None
    _REFUSED[key] = reason
    return None, reason


def _factory(where, _original):
    """JAX's get_file_cache, guarded: sealed backends first, then admitted directories."""
    chosen = _BACKENDS.get(os.path.realpath(str(where)))
    if chosen is not None:
        _note(where, "served", "sealed", None, chosen)
        return chosen, where
    if not _GUARD["on"]:
        made = _original(where)
        if made is not None:
            _note(where, "served", "unguarded", None, made[0])
        return made
    how, reason = _judge(where)
    if how is None:
        refused = RefusedCache(str(where), reason or "refused")
        _note(where, "refused", "guard", reason, refused)
        return refused, where
    # JAX keeps the name as given: a relative one would be read under whatever the working
    # directory is at each load, not in the directory that was judged
    made = _original(where if "://" in str(where) else _norm(where))
    if made is not None:
        _note(where, "served", how, None, made[0])
    return made


def _on_dir_setting(value) -> None:
    """The job set jax_compilation_cache_dir (globally or in a context manager). JAX points
    XLA's own sub-caches (GPU autotune results) inside that setting at every compile, whatever
    cache object it holds: for a directory the guard does not admit, turn them off."""
    if not _GUARD["on"] or value is None or str(value) == "":
        return
    try:
        how, _ = _judge(value)
    except Exception:  # noqa: BLE001 - cannot judge it: as refused
        how = None
    if how is None:
        import jax

        jax.config.update("jax_persistent_cache_enable_xla_caches", "none")


def _install_setting_hooks() -> None:
    """Chain our hook after JAX's own on the jax_compilation_cache_dir option (once)."""
    from jax._src import config as jax_config

    state = getattr(jax_config, "compilation_cache_dir", None)
    if state is None or not all(hasattr(state, n) for n in (
            "_update_global_hook", "_update_thread_local_hook", "value")):
        raise JaxInternalsChanged("jax._src.config.compilation_cache_dir has no update hooks: "
                                  "jaxcache cannot see the job redirect JAX's cache")
    if getattr(state._update_global_hook, "_jaxcache", False):
        return
    for name in ("_update_global_hook", "_update_thread_local_hook"):
        before = getattr(state, name)

        def hook(value, _before=before):
            if _before is not None:
                _before(value)
            _on_dir_setting(value)

        hook._jaxcache = True
        setattr(state, name, hook)


def _install_factory(cc) -> None:
    """Replace JAX's cache factory once (module-level `get_file_cache`, which
    `_initialize_cache` calls by name on the tested versions)."""
    if getattr(cc.get_file_cache, "_jaxcache", False):
        return
    if "get_file_cache" not in cc._initialize_cache.__code__.co_names:
        raise JaxInternalsChanged(
            "jax._src.compilation_cache._initialize_cache no longer calls get_file_cache: "
            "jaxcache cannot control which directory JAX loads from")
    original = cc.get_file_cache

    def get_file_cache(where, _original=original):
        return _factory(where, _original)

    get_file_cache._jaxcache = True
    cc.get_file_cache = get_file_cache


def guard_cache_dirs(admit=(), *, how: str = "audited", auditor=None) -> None:
    """From now on JAX opens its own cache only in admitted directories (exact absolute
    path, as audited: a symlinked alias is another path). Any other directory JAX is pointed
    at, by the job's own config.update() or an environment variable, gets a RefusedCache,
    unless `auditor(path) -> (ok, reason)` accepts it on the spot; and setting such a
    directory turns XLA's sub-caches off (they would be read from inside it). Sealed backends
    (install_backend) are served as before. Raises JaxInternalsChanged when the factory
    cannot be replaced; the caller then turns the cache off (fail closed)."""
    import jax

    cc = _cc()
    _install_factory(cc)
    _install_setting_hooks()
    for path in admit:
        _ADMITTED[_key(path)] = how
        _REFUSED.pop(_key(path), None)
    if auditor is not None:
        _GUARD["auditor"] = auditor
    _GUARD["on"] = True
    _on_dir_setting(jax.config.jax_compilation_cache_dir)  # set before the guard (env, gate)


def guard_log() -> list[dict]:
    """Every directory JAX initialized a cache for in this process: path, status (served |
    refused), how (audited, audited-in-process, sealed, unguarded, guard), reason."""
    return [dict(e) for e in _SEEN]


def current_cache() -> dict | None:
    """The directory of the cache object JAX holds now, with the guard's word on it
    (status 'unguarded' when it came from JAX's own factory before any guard)."""
    cache = _cc()._cache
    if cache is None:
        return None
    entry = _BY_OBJECT.get(id(cache))
    if entry is not None and entry["_object"] is cache:
        return {k: v for k, v in entry.items() if k != "_object"}
    raw = getattr(cache, "_path", None)
    return {"path": None if raw is None else str(raw), "given": None, "status": "unguarded",
            "how": "unguarded", "reason": None, "pid": os.getpid()}


def install_backend(path: str, backend) -> None:
    """Make `backend` (an object with get(key) / put(key, bytes) and the `_path` attribute
    that JAX's reset_cache() logs) JAX's persistent cache for `path`, now, before any compile
    can create JAX's own.

    JAX builds its cache object by calling the module-level factory `get_file_cache(path)` at
    initialization (0.10.2). We replace the factory once (_install_factory), by one that
    returns the registered backend for a registered directory (so a later reset_cache() and
    re-initialization stay sealed) and JAX's own cache for any other the guard admits; then
    point the config at `path`, initialize, and check that JAX really holds our backend. If it
    does not, the process is left with no persistent cache at all and JaxInternalsChanged is
    raised: a sealed cache must never fall back to an unsealed one.
    """
    import jax

    cc = _cc()
    if cc._cache is not None:
        raise JaxInternalsChanged("JAX's cache object already exists; reset it first")
    if not all(hasattr(backend, name) for name in ("get", "put", "_path")):
        raise TypeError("a cache backend needs get(key), put(key, value) and _path")
    try:
        _install_factory(cc)
    except JaxInternalsChanged as exc:
        disable_cache()
        raise JaxInternalsChanged(f"{exc}; the persistent cache is now OFF for this process "
                                  "rather than unsealed") from None
    _BACKENDS[os.path.realpath(path)] = backend
    jax.config.update("jax_compilation_cache_dir", path)
    try:
        cc._initialize_cache()
        ok = cc._cache is backend
    except Exception as exc:  # noqa: BLE001 - any failure here means: not sealed
        ok, why = False, f"{type(exc).__name__}: {exc}"
    else:
        why = f"JAX holds {type(cc._cache).__name__}, not the sealed backend"
    if not ok:
        disable_cache()
        raise JaxInternalsChanged(
            f"could not install the sealed cache into JAX {jax.__version__} ({why}); the "
            "persistent cache is now OFF for this process rather than unsealed")


XLA_SUBCACHE_FLAGS = ("xla_gpu_per_fusion_autotune_cache_dir", "xla_gpu_kernel_cache_file",
                      "xla_gpu_experimental_autotune_cache")


def disable_xla_subcaches() -> None:
    """Keep XLA's own caches (GPU autotune results, compiled kernels) out of the cache dir.

    JAX points them inside jax_compilation_cache_dir by default, and XLA reads them without
    any signature: in a sealed directory they would let its writers choose GPU kernels. Raises
    JaxInternalsChanged when the option is missing, or when XLA_FLAGS sets them itself."""
    import jax

    flags = os.environ.get("XLA_FLAGS", "")
    named = [f for f in XLA_SUBCACHE_FLAGS if f in flags]
    if named:
        raise JaxInternalsChanged(
            f"XLA_FLAGS sets {', '.join(named)}: XLA would read those files unsigned; a sealed "
            "cache refuses to run beside them")
    try:
        jax.config.update("jax_persistent_cache_enable_xla_caches", "none")
    except (AttributeError, ValueError) as exc:
        raise JaxInternalsChanged(f"cannot turn off XLA's sub-caches on JAX {jax.__version__}: "
                                  f"{exc}") from None


def disable_cache() -> None:
    """No persistent cache for the rest of this process (fail closed)."""
    import jax

    jax.config.update("jax_compilation_cache_dir", None)
    _cc().reset_cache()


def uses_backend(backend) -> bool:
    """Is `backend` the cache object JAX is using now?"""
    return _cc()._cache is backend
