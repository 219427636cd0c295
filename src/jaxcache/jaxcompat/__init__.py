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
    present: bool = False  # a cache object is there (JAX's, or one someone else put there)


def cache_state() -> CacheState:
    cc = _cc()
    cache = cc._cache
    path = None
    if cache is not None:
        raw = getattr(cache, "_path", None)
        path = None if raw is None else str(raw)
    return CacheState(bool(cc._cache_checked), bool(cc._cache_used),
                      bool(cc._cache_initialized), path, cache is not None)


def reset_cache() -> None:
    """JAX's own reset: forget the cache object and the first-compile decision."""
    _cc().reset_cache()


def config_value(name: str):
    import jax

    return getattr(jax.config, name)


def set_cache_dir(path: str) -> None:
    import jax

    jax.config.update("jax_compilation_cache_dir", path)


_BACKENDS: dict[str, object] = {}  # _real(cache dir) -> the backend JAX must use there
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


def _real(where) -> str:
    """A backend's key: a URL as given (realpath would make gs://b/p cwd-relative), else the
    directory with its symlinks resolved."""
    return _key(where) if "://" in str(where) else os.path.realpath(str(where))


def _judge(where) -> tuple[str | None, str | None]:
    """How the guard admits `where` (None: refused) and why not. Asks the auditor at most
    once per directory (when the job points JAX there, or at the factory)."""
    if _BACKENDS.get(_real(where)) is not None:
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
    chosen = _BACKENDS.get(_real(where))
    if chosen is not None:
        chosen._verifier = None  # JAX would make a new VerificationCache: forget its keys
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


def _cache_interface():
    """JAX's CacheInterface (jax._src.compilation_cache_interface on 0.5 to 0.10)."""
    from jax._src import compilation_cache_interface as ci

    base = getattr(ci, "CacheInterface", None)
    if base is None:
        raise JaxInternalsChanged("jax._src.compilation_cache_interface has no CacheInterface")
    return base


_CLASSES: dict[str, type] = {}


def _backend_class() -> type:
    """The CacheInterface subclass JAX holds for a sealed store (built once, at first use,
    so that importing this module never imports JAX)."""
    made = _CLASSES.get("backend")
    if made is not None:
        return made

    class JaxcacheBackend(_cache_interface()):
        """JAX's cache object in front of a jaxcache store (seal/store.py, JAX-free).

        jax_compilation_cache_check_contents is honoured as JAX does it, with JAX's own
        VerificationCache around the store; read at every call, so it counts whenever it
        is set (JAX reads it once, when it creates its cache object)."""

        def __init__(self, store, path: str) -> None:
            self.store = store
            self._path = path  # what JAX's reset_cache() logs and cache_state() reads
            self._verifier = None

        def _target(self):
            if not check_contents():
                return self.store
            if self._verifier is None:
                verification = getattr(_cc(), "VerificationCache", None)
                if verification is None:
                    raise JaxInternalsChanged(
                        "jax_compilation_cache_check_contents is set but this JAX has no "
                        "VerificationCache: jaxcache cannot honour it")
                self._verifier = verification(self.store)
            return self._verifier

        def get(self, key: str) -> bytes | None:
            return self._target().get(key)

        def put(self, key: str, value: bytes) -> None:
            self._target().put(key, value)

    _CLASSES["backend"] = JaxcacheBackend
    return JaxcacheBackend


def check_contents() -> bool:
    """jax_compilation_cache_check_contents as JAX sees it now (the option is 0.9.1+)."""
    from jax._src import config as jax_config

    state = getattr(jax_config, "compilation_cache_check_contents", None)
    return bool(state is not None and state.value)


def max_size() -> int:
    """jax_compilation_cache_max_size as JAX sees it now: a sealed store reads it at every
    write, so a limit set before or after enabling counts."""
    from jax._src import config as jax_config

    return int(jax_config.compilation_cache_max_size.value)


def install_backend(path: str, store) -> None:
    """Make `store` (an object with get(key) / put(key, bytes)) JAX's persistent cache for
    `path`, now, before any compile can create JAX's own, wrapped in a CacheInterface
    subclass made here.

    JAX builds its cache object by calling the module-level factory `get_file_cache(path)` at
    initialization (0.5 to 0.10). We replace the factory once (_install_factory), by one that
    returns the registered backend for a registered directory (so a later reset_cache() and
    re-initialization stay sealed) and JAX's own cache for any other the guard admits; then
    point the config at `path`, initialize, and check that JAX really holds our backend. If it
    does not, the process is left with no persistent cache at all and JaxInternalsChanged is
    raised: a sealed cache must never fall back to an unsealed one. On success, the backends
    installed before are let go (their directory descriptors closed): one per process.
    """
    import jax

    cc = _cc()
    if cc._cache is not None:
        raise JaxInternalsChanged("JAX's cache object already exists; reset it first")
    if not all(callable(getattr(store, name, None)) for name in ("get", "put")):
        raise TypeError("a cache store needs get(key) and put(key, value)")
    try:
        _install_factory(cc)
        backend = _backend_class()(store, path)
    except JaxInternalsChanged as exc:
        disable_cache()
        raise JaxInternalsChanged(f"{exc}; the persistent cache is now OFF for this process "
                                  "rather than unsealed") from None
    before = dict(_BACKENDS)
    _BACKENDS.clear()
    _BACKENDS[_real(path)] = backend
    jax.config.update("jax_compilation_cache_dir", path)
    try:
        cc._initialize_cache()
        ok = cc._cache is backend
    except Exception as exc:  # noqa: BLE001 - any failure here means: not sealed
        ok, why = False, f"{type(exc).__name__}: {exc}"
    else:
        why = f"JAX holds {type(cc._cache).__name__}, not the sealed backend"
    if not ok:
        _BACKENDS.clear()
        _BACKENDS.update(before)
        disable_cache()
        raise JaxInternalsChanged(
            f"could not install the sealed cache into JAX {jax.__version__} ({why}); the "
            "persistent cache is now OFF for this process rather than unsealed")
    for old in before.values():
        _close(old)


def _close(backend) -> None:
    close = getattr(getattr(backend, "store", None), "close", None)
    if close is not None:
        close()


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


def uses_backend(store) -> bool:
    """Is `store` (installed with install_backend) what JAX's cache object serves now?"""
    return getattr(_cc()._cache, "store", None) is store


# --- undo: what enable() changes in JAX, captured and put back -----------------------------
_OPTIONS = ("jax_compilation_cache_dir", "jax_persistent_cache_enable_xla_caches",
            "jax_persistent_cache_min_entry_size_bytes")


@dataclass(frozen=True)
class JaxState:
    """JAX's cache settings (global values) and cache object, and jaxcache's guard, at
    one moment: what enable() may change and disable() puts back."""

    options: tuple[tuple[str, object], ...]
    cache: object
    initialized: bool
    checked: bool
    used: bool
    backends: tuple[tuple[str, object], ...]
    guard: tuple[tuple[str, object], ...]
    admitted: tuple[tuple[str, str], ...]
    refused: tuple[tuple[str, str], ...]


def _state(name: str):
    from jax._src import config as jax_config

    found = getattr(jax_config, "config_states", {}).get(name)
    if found is None or not hasattr(found, "get_global"):
        raise JaxInternalsChanged(f"jax._src.config has no state object for {name}")
    return found


def snapshot() -> JaxState:
    cc = _cc()
    options = tuple((n, _state(n).get_global()) for n in _OPTIONS)
    return JaxState(options, cc._cache, bool(cc._cache_initialized), bool(cc._cache_checked),
                    bool(cc._cache_used), tuple(_BACKENDS.items()), tuple(_GUARD.items()),
                    tuple(_ADMITTED.items()), tuple(_REFUSED.items()))


def restore(state: JaxState) -> None:
    """Put JAX and the guard back as `state` found them; a sealed backend installed since
    is let go. The guard first: restoring the directory setting runs its hook."""
    import jax

    cc = _cc()
    kept = {id(b) for _, b in state.backends}
    for backend in _BACKENDS.values():
        if id(backend) not in kept:
            _close(backend)
    _BACKENDS.clear()
    _BACKENDS.update(state.backends)
    _GUARD.clear()
    _GUARD.update(state.guard)
    _ADMITTED.clear()
    _ADMITTED.update(state.admitted)
    _REFUSED.clear()
    _REFUSED.update(state.refused)
    for name, value in state.options:
        jax.config.update(name, value)
    with cc._cache_initialized_mutex:
        cc._cache = state.cache
        cc._cache_initialized = state.initialized
        cc._cache_checked = state.checked
        cc._cache_used = state.used


def hidden_settings() -> list[str]:
    """Options whose value in this thread differs from the global one (a config context
    manager such as `with jax.config...compilation_cache_dir(...)` is active): a value
    enable() sets globally would not be the one JAX uses here."""
    out = []
    for name in ("jax_compilation_cache_dir", "jax_enable_compilation_cache"):
        state = _state(name)
        if state.value != state.get_global():
            out.append(f"{name} is {state.value!r} in this thread (a config context), "
                       f"{state.get_global()!r} globally")
    return out


def effective(name: str):
    """The value JAX uses in this thread (a thread-local context first)."""
    return _state(name).value


def holds(path: str) -> bool:
    """Does JAX's cache object (if any) serve `path`?"""
    cache = _cc()._cache
    if cache is None:
        return True
    raw = getattr(cache, "_path", None)
    return raw is not None and os.path.normpath(str(raw)) == os.path.normpath(path)


def uses_sealed(path: str) -> bool:
    """Is a sealed backend what JAX serves for `path` (held now, or registered for its next
    initialization)?"""
    backend = _BACKENDS.get(_real(path))
    cache = _cc()._cache
    return backend is not None and (cache is None or cache is backend)
