"""The directory guard: which directories JAX may open its own cache in.

JAX's cache factory (get_file_cache) is replaced once, so that a directory nobody audited gets a
RefusedCache (every get misses, every put is dropped) and the sealed backends registered here are
served for theirs; a hook on the jax_compilation_cache_dir option turns XLA's sub-caches off for
a refused directory. The registries below are this process's, shared with backend.py and
jaxstate.py (which puts them back on disable()).
"""

from __future__ import annotations

import contextlib
import os
import stat

from jaxcache.jaxcompat.internals import JaxInternalsChanged, compilation_cache_module

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from types import ModuleType
    from typing import Any, Protocol

    class SealedBackend(Protocol):
        """backend.py's JaxcacheBackend (a subclass of JAX's CacheInterface, made at run
        time), as the factory sees it."""

        _verifier: object
        wrapped: bool

    # JAX's cache object (a CacheInterface of JAX's, or one jaxcache hands it): its class is
    # found at run time, its get and put are replaced here
    JaxCache = Any
    # JAX's get_file_cache(path): (the cache object, its path), or None for no cache
    Factory = Callable[[object], "tuple[JaxCache, object] | None"]
    Auditor = Callable[[str], tuple[bool, str]]  # (path) -> (ok, reason)
    Witness = Callable[[str, str, bytes], object]  # (directory, key, value), after a put
    Gatekeeper = Callable[[str, str, bytes], bool]  # (directory, key, value): may it load?
    Lease = Callable[[], None]  # before each use of a cache: returns, or stops the process
    GuardSettings = tuple[bool, "Auditor | None", "Witness | None", "Gatekeeper | None",
                          "Lease | None"]

BACKENDS: dict[str, SealedBackend] = {}  # real_path(cache dir) -> the backend JAX must use there


# The directory guard (guard_cache_dirs): which directories JAX may open its own cache in.
ADMITTED: dict[str, str] = {}  # absolute path -> how it was admitted ("audited", ...)
REFUSED: dict[str, str] = {}  # absolute path -> why the guard refused it


class Guard:
    """The guard's own settings: whether it refuses directories nobody audited, who audits one
    in-process, who hears of each new entry, who judges each loaded one, and the lease every
    use of a cache is made under (a grant of `jaxcache run` ends with its run)."""

    __slots__ = ("on", "auditor", "witness", "gatekeeper", "lease")

    def __init__(self) -> None:
        self.on = False
        self.auditor: Auditor | None = None
        self.witness: Witness | None = None
        self.gatekeeper: Gatekeeper | None = None
        self.lease: Lease | None = None

    def saved(self) -> GuardSettings:
        return (self.on, self.auditor, self.witness, self.gatekeeper, self.lease)

    def restore(self, saved: GuardSettings) -> None:
        self.on, self.auditor, self.witness, self.gatekeeper, self.lease = saved


GUARD = Guard()
ENTRY_SUFFIX = "-cache"  # LRUCache's file for key K is <dir>/K-cache (0.5 to 0.12)
# every directory JAX initialized a cache for in this process, in order
_SEEN: list[dict[str, object]] = []
# (directory, entry file name) of each entry this process loaded or wrote through a watched
# cache: its working set, which enable()'s gc at exit never evicts (gc/plan.py's `keep`)
USED: set[tuple[str, str]] = set()
# id(cache object JAX got) -> (its entry in _SEEN, the object: kept alive, so ids stay unique)
_BY_OBJECT: dict[int, tuple[dict[str, object], object]] = {}


_REFUSED_CLASS: list[type] = []


def refused_class() -> type:
    """RefusedCache: what JAX gets for a directory nobody audited, every get a miss, every
    put dropped; a CacheInterface like JAX's own (built at first use: importing jaxcompat
    never imports JAX). JAX then compiles everything itself and leaves nothing there;
    `_path` is what its reset_cache() logs."""
    if not _REFUSED_CLASS:
        from jaxcache.jaxcompat.internals import cache_interface

        class RefusedCache(cache_interface()):  # type: ignore[misc]  # JAX's, at run time
            __doc__ = refused_class.__doc__

            def __init__(self, path: str, reason: str) -> None:
                self._path = path
                self.reason = reason

            def get(self, key: str) -> None:
                return None

            def put(self, key: str, value: bytes) -> None:
                return None

        _REFUSED_CLASS.append(RefusedCache)
    return _REFUSED_CLASS[0]


def _norm(path: object) -> str:
    return os.path.normpath(os.path.abspath(str(path)))  # JAX also takes path-like objects


def _note(where: object, status: str, how: str, reason: str | None, made: object) -> None:
    path = str(where) if "://" in str(where) else _norm(where)
    entry: dict[str, object] = {"path": path, "given": str(where), "status": status,
                                "how": how, "reason": reason, "pid": os.getpid()}
    _SEEN.append(entry)
    _BY_OBJECT[id(made)] = (dict(entry), made)


def _key(where: object) -> str:
    return str(where) if "://" in str(where) else _norm(where)


def real_path(where: object) -> str:
    """A backend's key: a URL as given (realpath would make gs://b/p cwd-relative), else the
    directory with its symlinks resolved."""
    return _key(where) if "://" in str(where) else os.path.realpath(str(where))


def _judge(where: object) -> tuple[str | None, str | None]:
    """How the guard admits `where` (None: refused) and why not. Asks the auditor at most
    once per directory (when the job points JAX there, or at the factory)."""
    if BACKENDS.get(real_path(where)) is not None:
        return "sealed", None
    key = _key(where)
    if key in ADMITTED:
        return ADMITTED[key], None
    if key in REFUSED:
        return None, REFUSED[key]
    reason = "not the directory jaxcache audited"
    if "://" not in key and GUARD.auditor is not None:
        try:
            ok, reason = GUARD.auditor(str(where))
        except Exception as exc:  # noqa: BLE001 - cannot judge it: refuse (fail closed)
            ok, reason = False, f"could not audit it ({type(exc).__name__}: {exc})"
        if ok:
            ADMITTED[key] = "audited-in-process"
            return "audited-in-process", None
    REFUSED[key] = reason
    return None, reason


def _factory(where: object, _original: Factory) -> tuple[JaxCache, object] | None:
    """JAX's get_file_cache, guarded: sealed backends first, then admitted directories; under
    a lease, each cache it hands out is too."""
    held: Lease | None = GUARD.lease
    if held is not None:
        held()  # a grant that ended: the process stops here, before any cache is opened
    made = _choose(where, _original)
    if held is not None and made is not None:
        _leased(made[0], held)
    return made


def _leased(cache: JaxCache, held: Lease) -> None:
    """Every get and put of `cache` first asks the lease: a process that outlived the run
    that granted its cache stops at its next use, whatever the cache holds by then."""
    original_get, original_put = cache.get, cache.put

    def get(key: str) -> bytes | None:
        held()
        value: bytes | None = original_get(key)
        return value

    def put(key: str, value: bytes) -> object:
        held()
        return original_put(key, value)

    try:
        cache.get = get
        cache.put = put
    except AttributeError:  # a cache class that takes no attributes: the factory's check
        pass


def _choose(where: object, _original: Factory) -> tuple[JaxCache, object] | None:
    chosen = BACKENDS.get(real_path(where))
    if chosen is not None:
        from jaxcache.jaxcompat.internals import check_contents, verification_cache

        chosen._verifier = None  # JAX would make a new VerificationCache: forget its keys
        chosen.wrapped = check_contents()
        # as JAX's get_file_cache: its own VerificationCache around the store when asked
        made: object = verification_cache()(chosen) if chosen.wrapped else chosen
        _note(where, "served", "sealed", None, made)
        return made, where
    if not GUARD.on:
        made = _original(where)
        if made is not None:
            _note(where, "served", "unguarded", None, made[0])
        return made
    how, reason = _judge(where)
    if how is None:
        refused = refused_class()(str(where), reason or "refused")
        _note(where, "refused", "guard", reason, refused)
        return refused, where
    # JAX keeps the name as given: a relative one would be read under whatever the working
    # directory is at each load, not in the directory that was judged
    made = _original(where if "://" in str(where) else _norm(where))
    if made is not None:
        _note(where, "served", how, None, made[0])
        if (GUARD.witness is not None or GUARD.gatekeeper is not None) and \
                "://" not in str(where):
            _watch(made[0], _norm(where))
    return made


def _watch(cache: JaxCache, directory: str) -> None:
    """The cache object JAX got for `directory`, watched in both directions: each get's bytes
    go to the gatekeeper first (gate_gets: False or an exception makes the load a miss), and
    after each put that creates the entry (LRUCache.put never replaces a file: one that existed
    before is not this put's) the witness hears (directory, key, value); the witness's
    failure never reaches the job."""
    if getattr(cache, "_jaxcache_witnessed", False):
        return
    original, original_get = cache.put, cache.get

    def get(key: str, _original: Callable[[str], bytes | None] = original_get) -> bytes | None:
        value = _original(key)
        keeper: Gatekeeper | None = GUARD.gatekeeper
        if value is not None and keeper is not None:
            try:
                ok = keeper(directory, key, value)
            except Exception:  # noqa: BLE001 - cannot judge the bytes: a miss (fail closed)
                ok = False
            if not ok:
                return None  # JAX compiles it itself
        if value is not None:
            USED.add((directory, f"{key}{ENTRY_SUFFIX}"))
        return value

    def put(key: str, value: bytes, _original: Callable[[str, bytes], object] = original
            ) -> object:
        name = f"{key}{ENTRY_SUFFIX}"
        existed = os.path.lexists(os.path.join(directory, name))
        try:
            result = _original(key, value)
        except BaseException:
            if not existed:  # JAX writes in place: a full disk leaves a stub under the name
                _drop_partial(directory, name, value)
            raise
        USED.add((directory, name))
        witness: Witness | None = GUARD.witness
        if not existed and witness is not None:
            # the record of origin is not the job's concern: its failure stays here
            with contextlib.suppress(Exception):
                witness(directory, key, value)
        return result

    try:
        cache.put = put
        cache.get = get
        cache._jaxcache_witnessed = True
    except AttributeError:  # a cache class that takes no attributes: nothing is witnessed
        pass


def _drop_partial(directory: str, name: str, value: bytes) -> None:
    """Remove what a failed put of JAX's (LRUCache.put: `write_bytes` on the final name, no
    temporary file) left under `name`: a file of this account, one link, shorter than the
    entry and holding exactly its first bytes, so a stub this very put wrote (or another
    writer's stub of the same entry, no more valid). Left in place, every later run reads it,
    fails to load it, and never replaces it (put skips a name that exists). Anything else
    stays; nothing here reaches the job."""
    with contextlib.suppress(OSError):
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=dfd)
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or \
                        st.st_nlink != 1 or st.st_size >= len(value):
                    return
                data = os.read(fd, st.st_size + 1)  # bounded: shorter than the entry
            finally:
                os.close(fd)
            now = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            if len(data) == st.st_size and value.startswith(data) and \
                    (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):  # still that file
                os.unlink(name, dir_fd=dfd)
        finally:
            os.close(dfd)


def gate_gets(callback: Gatekeeper | None) -> None:
    """From the next cache JAX opens in an admitted directory on, every entry a get returns is
    first shown to `callback(directory, key, value) -> bool`; False (or an exception) makes it
    a miss: the bytes JAX would load are judged, not a listing taken before
    (trust/provenance/origin.py, under CI). None stops it."""
    GUARD.gatekeeper = callback


def lease(callback: Lease | None) -> None:
    """From now on, before JAX opens a cache and before each get and put of the caches it
    opens, call `callback()`, which returns if the grant still holds and otherwise stops the
    process (the probe: the `jaxcache run` that granted the cache has ended); None stops it."""
    GUARD.lease = callback


def witness_puts(callback: Witness | None) -> None:
    """From the next cache JAX opens in an admitted directory on, call
    `callback(directory, key, value)` after each entry its put creates there
    (trust/provenance/origin.py: the origin ledger); None stops it."""
    GUARD.witness = callback


def _on_dir_setting(value: object) -> None:
    """The job set jax_compilation_cache_dir (globally or in a context manager). JAX points
    XLA's own sub-caches (GPU autotune results) inside that setting at every compile, whatever
    cache object it holds: for a directory the guard does not admit, turn them off."""
    if not GUARD.on or value is None or str(value) == "":
        return
    try:
        how, _ = _judge(value)
    except Exception:  # noqa: BLE001 - cannot judge it: as refused
        how = None
    if how is None:
        import jax

        jax.config.update(  # type: ignore[no-untyped-call]  # untyped in JAX
            "jax_persistent_cache_enable_xla_caches", "none")


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

        def hook(value: object, _before: Callable[[object], object] | None = before) -> None:
            if _before is not None:
                _before(value)
            _on_dir_setting(value)

        hook._jaxcache = True  # type: ignore[attr-defined]  # our mark on JAX's hook
        setattr(state, name, hook)


def install_factory(cc: ModuleType) -> None:  # jax._src.compilation_cache: its factory is set
    """Replace JAX's cache factory once (module-level `get_file_cache`, which
    `_initialize_cache` calls by name on the tested versions)."""
    if getattr(cc.get_file_cache, "_jaxcache", False):
        return
    if "get_file_cache" not in cc._initialize_cache.__code__.co_names:
        raise JaxInternalsChanged(
            "jax._src.compilation_cache._initialize_cache no longer calls get_file_cache: "
            "jaxcache cannot control which directory JAX loads from")
    original = cc.get_file_cache

    def get_file_cache(where: object, _original: Factory = original
                       ) -> tuple[JaxCache, object] | None:
        return _factory(where, _original)

    get_file_cache._jaxcache = True  # type: ignore[attr-defined]  # our mark
    cc.get_file_cache = get_file_cache  # type: ignore[attr-defined]  # JAX's, set at run time


def guard_cache_dirs(admit: Iterable[str] = (), *, how: str = "audited",
                     auditor: Auditor | None = None) -> None:
    """From now on JAX opens its own cache only in admitted directories (exact absolute
    path, as audited: a symlinked alias is another path). Any other directory JAX is pointed
    at, by the job's own config.update() or an environment variable, gets a RefusedCache,
    unless `auditor(path) -> (ok, reason)` accepts it on the spot; and setting such a
    directory turns XLA's sub-caches off (they would be read from inside it). Sealed backends
    (install_backend) are served as before. Raises JaxInternalsChanged when the factory
    cannot be replaced; the caller then turns the cache off (fail closed)."""
    import jax

    cc = compilation_cache_module()
    install_factory(cc)
    _install_setting_hooks()
    for path in admit:
        ADMITTED[_key(path)] = how
        REFUSED.pop(_key(path), None)
    if auditor is not None:
        GUARD.auditor = auditor
    GUARD.on = True
    # set before the guard (env, gate); JAX defines its config options at run time
    _on_dir_setting(jax.config.jax_compilation_cache_dir)  # type: ignore[attr-defined]


def guard_log() -> list[dict[str, object]]:
    """Every directory JAX initialized a cache for in this process: path, status (served |
    refused), how (audited, audited-in-process, sealed, unguarded, guard), reason."""
    return [dict(e) for e in _SEEN]


def current_cache() -> dict[str, object] | None:
    """The directory of the cache object JAX holds now, with the guard's word on it
    (status 'unguarded' when it came from JAX's own factory before any guard)."""
    cache = compilation_cache_module()._cache
    if cache is None:
        return None
    found = _BY_OBJECT.get(id(cache))
    if found is not None and found[1] is cache:
        return dict(found[0])
    raw = getattr(cache, "_path", None)
    return {"path": None if raw is None else str(raw), "given": None, "status": "unguarded",
            "how": "unguarded", "reason": None, "pid": os.getpid()}


def uses_sealed(path: str) -> bool:
    """Is a sealed backend what JAX serves for `path` (held now, or registered for its next
    initialization)?"""
    backend = BACKENDS.get(real_path(path))
    cache = compilation_cache_module()._cache
    return backend is not None and (cache is None or getattr(cache, "_base_cache", cache)
                                    is backend)
