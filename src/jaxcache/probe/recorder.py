"""The probe's recorder: JAX's events (and, through logtap.py, its log lines and warnings)
turned into one record per compiled module, written by document.py after each compile and at
exit.

Loaded by path by probe/site.py once the job imports jax (standard library only, no jaxcache
imports: the job's Python may not have jaxcache), so a Python process that never imports jax
pays nothing for it. While a compile is under way (or waits for another rank) a watcher thread
writes the document every _WRITE_EVERY_S too, so a process killed in a hung compile leaves the
module it was on.
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    import threading
    from collections.abc import Callable
    from types import ModuleType
    from typing import Any, Protocol

    Module = dict[str, Any]  # one compiled module's record (document.py writes it as JSON)
    LoadBeside = Callable[[str, str], ModuleType]  # site.py's loader: (copy, relpath) -> module

    class Compat(Protocol):
        """jaxcache.jaxcompat, as the record reads it (site.py installs its guard)."""

        def current_cache(self) -> dict[str, object] | None: ...

        def guard_log(self) -> list[dict[str, object]]: ...

# What JAX logs and emits on each version lives in jaxcache/jaxcompat/versions.py (stdlib only):
# launch.py copies it beside the probe under this name; from a source tree it is found there.
_KNOWLEDGE_COPY = "_jaxcache_versions.py"
_DOCUMENT_COPY = "_jaxcache_probe_document.py"
_LOGTAP_COPY = "_jaxcache_probe_logtap.py"
_WRITE_EVERY_S = 1.0
_DOC: ModuleType | None = None  # document.py, loaded by begin()
_LOAD: LoadBeside | None = None  # site.py's loader of the files beside the probe
_OUT: str | None = None  # $JAXCACHE_PROBE_DIR, as it was when the process started
_UNSAFE_CHARS: re.Pattern[str] | None = None


def _key(name: str) -> str:
    """One key for JAX's two spellings of a module: 'jit(f)' (events) and 'jit_f' (logs)."""
    global _UNSAFE_CHARS
    if _UNSAFE_CHARS is None:
        import re

        _UNSAFE_CHARS = re.compile(r"[^\w.-]")
    return _UNSAFE_CHARS.sub("_", name).rstrip("_")


class _Lock:
    """A real lock once threading is imported (with JAX); a no-op before, when nothing runs."""

    def __init__(self) -> None:
        self._lock: threading.RLock | None = None

    def arm(self) -> None:
        import threading

        self._lock = threading.RLock()

    def __enter__(self) -> None:
        if self._lock is not None:
            self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        if self._lock is not None:
            self._lock.release()


def _tid() -> int:
    import threading

    return threading.get_ident()


class ProbeState:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.pid = os.getpid()
        self.lock = _Lock()
        self.started = time.time()
        self.import_jax_s: float | None = None
        self.import_jax_started: float | None = None
        self.modules: list[Module] = []
        self.current: dict[int, Module] = {}  # thread id -> module dict being compiled
        self.pending_components: dict[int, dict[str, str]] = {}  # thread id -> {component: hash}
        self.trace: dict[str, float] = {}  # fun_name -> seconds of the latest trace
        # thread id -> seconds of its latest trace (events without names)
        self.trace_here: dict[int, float] = {}
        self.counts = {"compile_requests": 0, "hits": 0, "writes": 0, "tasks_using_cache": 0,
                       "task_disabled_cache": 0}
        self.options: dict[str, object] | None = None
        self.env_cache_dir: str | None = None
        self.warnings: list[str] = []
        # the JAX and jaxlib this process runs: a forked child runs its parent's (without them
        # its view named jaxlib None, which the record took for a rank on another jaxlib)
        self.jax: dict[str, object] = getattr(self, "jax", {})
        self.last_write = 0.0
        self.unsaved = False  # a compile ended since the last write (the write was throttled)
        self.final_done = False  # the exit write happened: nothing may replace it
        # the thread that writes while a compile is under way
        self.watcher: threading.Thread | None = None
        # (jax.process_index(), jax.process_count()) once JAX knows them
        self.proc_ids: tuple[int, int] | None = None
        self.cache_view: dict[str, object] | None = None
        # (jaxcache.lifecycle.sealing, its backend): a forked child shares JAX's sealed backend
        self.seal: tuple[ModuleType, object] | None = getattr(self, "seal", None)
        # jaxcache.jaxcompat, when it guards JAX
        self.compat: Compat | None = getattr(self, "compat", None)
        # {"installed": bool, ...} under jaxcache run
        self.guard: dict[str, object] | None = getattr(self, "guard", None)
        # versions.knowledge() for this JAX
        self.know: dict[str, Any] | None = getattr(self, "know", None)
        self.versions: ModuleType | None = getattr(self, "versions", None)  # the module itself


S = ProbeState()


def _module(name: str | None, sym: bool = False) -> Module | None:
    """The record of the module being compiled on this thread (by name, newest first).

    `sym`: the name is the module's own (from JAX's logs), better than the event's spelling.
    """
    tid = _tid()
    cur = S.current.get(tid)
    key = None if name is None else _key(name)
    if cur is not None and (key is None or cur["key"] == key):
        if sym:
            cur["name"] = name
        return cur
    if key is None:  # no name
        return None
    for m in reversed(S.modules):
        if m["key"] == key and m["compile_or_load_s"] is None:
            S.current[tid] = m
            if sym:
                m["name"] = name
            return m
    m = {"name": name if sym else key, "key": key, "fun_name": None, "input_shapes": None,
         "trace_s": None,
         "lower_s": None, "compile_or_load_s": None, "outcome": None, "reason": None,
         "reason_detail": None, "cache_key": None, "key_components": None,
         "compile_s_logged": None, "retrieval_s": None, "jax_compile_time_saved_s": None,
         "entry_bytes": None, "errors": [], "cache_dir_at_compile": None,
         "cache_dir": None, "cache_dir_status": None,
         "cache_enabled_at_compile": None, "min_compile_time_at_compile": None,
         "thread": tid}
    fun = key[4:] if key.startswith("jit_") else key
    if fun in S.trace:
        m["fun_name"] = fun
        m["trace_s"] = S.trace.pop(fun)
    elif tid in S.trace_here:  # this JAX names no function in its events: the thread's latest
        m["trace_s"] = S.trace_here.pop(tid)
    S.modules.append(m)
    S.current[tid] = m
    _start_watcher()
    return m


def _start_watcher() -> None:
    """A daemon thread that writes the document while a compile is under way or a finished
    one is unsaved: a rank hung in a compile (or waiting for another rank's executable) and
    then killed still names its module. Started at the first compile of each process."""
    if S.watcher is not None:
        return
    import threading

    def watch() -> None:
        me = os.getpid()
        while os.getpid() == me and not S.final_done:
            time.sleep(_WRITE_EVERY_S)
            if (S.current or S.unsaved) and time.monotonic() - S.last_write >= _WRITE_EVERY_S:
                _write()

    S.watcher = threading.Thread(target=watch, name="jaxcache-probe-writer", daemon=True)
    S.watcher.start()


def _on_event(event: str, **kw: object) -> None:
    with S.lock:
        assert S.know is not None and _DOC is not None  # begin() set them before listening
        kind = S.know["event_kinds"].get(event)
        if kind in S.counts:
            S.counts[kind] += 1
        if kind == "compile_requests":
            _DOC.first_compile(S)


def _named(fun: object) -> Module | None:
    """The module a duration event is about: by its name where this JAX gives one, else the
    one this thread's log lines named last (JAX <= 0.5 events carry no fun_name)."""
    assert S.know is not None  # begin() set it before listening
    if fun is not None or S.know["events_name_module"]:
        return _module(str(fun))
    return _module(None)


def _on_duration(event: str, secs: float, **kw: object) -> None:
    flush = False
    with S.lock:
        assert S.know is not None and _DOC is not None  # begin() set them before listening
        fun = kw.get("fun_name")
        kind = S.know["event_kinds"].get(event)
        if kind == "trace":
            if fun is None:
                S.trace_here[_tid()] = secs
            else:
                S.trace[_key(str(fun))] = secs
        elif kind == "lower":
            m = _named(fun)
            if m is not None:
                m["lower_s"] = secs
        elif kind == "compile":
            _DOC.first_compile(S)
            m = _named(fun)
            if m is None:
                S.warnings.append("a compile of %.3f s named no module (JAX %s)"
                                  % (secs, S.know["version"]))
                return
            m["compile_or_load_s"] = secs
            (m["cache_dir_at_compile"], m["cache_enabled_at_compile"],
             m["min_compile_time_at_compile"]) = _DOC.cache_setting()
            used = _DOC.cache_in_use(S)
            if used is not None:
                m["cache_dir"], m["cache_dir_status"] = used.get("path"), used.get("status")
            if m["outcome"] is None:
                m["outcome"] = "uncached"
                m["reason"] = "no-cache-key"  # JAX did not consult a cache for this compile
            S.current.pop(_tid(), None)
            flush = True
        elif kind == "retrieval":
            m = _module(None)
            if m is not None:
                m["retrieval_s"] = secs
        elif kind == "saved":
            m = _module(None)
            if m is not None:
                m["jax_compile_time_saved_s"] = secs
    if flush:
        if time.monotonic() - S.last_write > _WRITE_EVERY_S:
            _write()  # so a job that is killed still leaves what it compiled so far
        else:
            S.unsaved = True  # the watcher writes it within _WRITE_EVERY_S


def _set(m: Module | None, outcome: str, reason: str | None = None,
         detail: dict[str, object] | None = None) -> None:
    if m is None:
        return
    m["outcome"], m["reason"], m["reason_detail"] = outcome, reason, detail


def _guarded(fn: Callable[..., object]) -> Callable[..., None]:
    """A listener that can never raise into JAX: the probe must not break the program."""

    def listener(*args: object, **kwargs: object) -> None:
        try:
            fn(*args, **kwargs)
        except Exception:
            pass

    return listener


def _write(final: bool = False) -> None:
    if _DOC is not None:
        _DOC.write(S, final, _LOAD, _OUT)


def begin(module: ModuleType, import_s: float, imported_at: float, process_started: float,
          out: str | None, load_beside: LoadBeside) -> None:
    """JAX was just imported: start recording this process
    into the directory `out`. Raises if a file it needs is missing; site.py then runs the job
    unrecorded."""
    global _DOC, _LOAD, _OUT
    _LOAD, _OUT = load_beside, out
    _DOC = load_beside(_DOCUMENT_COPY, os.path.join("probe", "document.py"))
    S.started = process_started
    S.import_jax_s = import_s
    S.import_jax_started = imported_at - import_s
    S.lock.arm()
    try:
        version = getattr(module, "__version__", None)
        S.versions = load_beside(_KNOWLEDGE_COPY, os.path.join("jaxcompat", "versions.py"))
        S.know = S.versions.knowledge(version)
        S.know["event_kinds"] = {v: k for k, v in S.know["events"].items()}
        from jax import monitoring

        monitoring.register_event_listener(_guarded(_on_event))
        monitoring.register_event_duration_secs_listener(_guarded(_on_duration))
        load_beside(_LOGTAP_COPY, os.path.join("probe", "logtap.py")).install(
            S, _module, _set, _tid)
        S.jax = {"jax": version, "jaxlib": _DOC.dist("jaxlib"), "support": S.know["support"]}
    except Exception as exc:
        S.jax = {"error": repr(exc)}


def ready(compat: Compat | None, guard: dict[str, object] | None,
          seal: tuple[ModuleType, object] | None) -> None:
    """After site.py installed the guard (jaxcache.jaxcompat, {"installed": ...}) and the
    sealed backend ((jaxcache.lifecycle.sealing, backend)), if any: first write, and the
    last at exit."""
    import atexit

    S.compat, S.guard, S.seal = compat, guard, seal
    atexit.register(_write, True)
    _write()
    S.last_write = 0.0  # the first compile is always written at once


def after_fork() -> None:
    """In a forked child: record it as its own process (JAX and the guard come along)."""
    armed = S.lock._lock is not None
    S.reset()
    if armed:
        S.lock.arm()
