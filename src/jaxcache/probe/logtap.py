"""The probe's taps on JAX's log lines and warnings: each line JAX logs about a module (its
cache key, hit or miss, why it was not written) or warns about (a failed write), set on that
module's record.

Loaded by path by recorder.py, in the job's own Python (standard library only, no jaxcache
imports). What each JAX version logs is in jaxcompat/versions.py, read through S.versions.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import logging
    from collections.abc import Callable
    from typing import Any, Protocol, TextIO, overload

    from jaxcache.probe.recorder import Module, ProbeState

    class ModuleOf(Protocol):
        """recorder._module: the record of the module a name speaks of (made if new), or with
        no name the one this thread is compiling (None: none)."""

        @overload
        def __call__(self, name: str, sym: bool = ...) -> Module: ...

        @overload
        def __call__(self, name: None, sym: bool = ...) -> Module | None: ...

    SetOutcome = Callable[..., None]  # recorder._set(m, outcome, reason=None, detail=None)

    _REC: tuple[ProbeState, ModuleOf, SetOutcome, Callable[[], int]]
else:
    _REC = ()  # (S, module, set, tid) of recorder.py, given to install()


def install(state: ProbeState, module: ModuleOf, set_outcome: SetOutcome,
            tid: Callable[[], int]) -> None:
    """Route the loggers JAX writes to (S.know["loggers"]) and warnings.showwarning through
    the recorder; what the program itself would have seen still reaches it."""
    global _REC
    _REC = (state, module, set_outcome, tid)
    _install_logging()
    _install_warnings()


def _on_log(record: logging.LogRecord) -> None:
    S, _module, _set, _tid = _REC

    msg, args = record.msg, record.args if isinstance(record.args, tuple) else ()
    if not isinstance(msg, str):
        return
    assert S.versions is not None and S.know is not None  # recorder.begin() set them first
    kind = S.versions.classify(S.know, msg)
    if kind is None:
        return
    with S.lock:
        tid = _tid()
        if kind == "compiling":
            name = str(args[0]) if args else None
            if name is not None and S.know["compiling_name"] == "bare":
                name = "jit_" + name  # JAX <= 0.6 logs `f` for the module jit_f
            m = _module(name) if name else None
            if m is not None and len(args) > 1:
                m["input_shapes"] = str(args[1])
        elif kind == "key-component":
            S.pending_components.setdefault(tid, {})[str(args[0])] = str(args[1])
        elif kind in ("hit", "miss"):
            m = _module(str(args[0]), sym=True)
            m["cache_key"] = str(args[1]) if len(args) > 1 else None
            m["key_components"] = S.pending_components.pop(tid, None)
            _set(m, kind)
        elif kind == "not-process-0":
            _set(_module(None), "skipped", "not-process-0")
        elif kind == "host-callbacks":
            _set(_module(str(args[0])), "skipped", "host-callbacks")
        elif kind == "below-compile-time":
            m = _module(str(args[0]))
            _set(m, "skipped", "compile-time-below-threshold",
                 {"threshold_s": args[1], "compile_s": args[2]})
            m["compile_s_logged"] = args[2]
        elif kind == "compile-time":
            _module(str(args[0]))["compile_s_logged"] = args[2]
        elif kind == "below-entry-size":
            _set(_module(None), "skipped", "entry-size-below-threshold",
                 {"entry_bytes": args[1], "threshold_bytes": args[2]})
        elif kind == "cache-disabled":
            _set(_module(None), "skipped", "cache-disabled-or-uninitialized")
        elif kind == "writing":
            _set(_module(str(args[0])), "written")
        elif kind == "share-wait":  # jax_share_binary_between_hosts: blocked on another rank
            m = _module(str(args[0]), sym=True)
            m["waiting_for"] = {"what": "shared-executable",
                                "process_index": args[1] if len(args) > 1 else None}


def _install_logging() -> None:
    import logging

    S = _REC[0]

    def make(logger: logging.Logger, original_level: int,
             original_call: Callable[[logging.LogRecord], None]
             ) -> Callable[[logging.LogRecord], None]:
        def call_handlers(record: logging.LogRecord) -> None:
            try:
                _on_log(record)
            except Exception:  # never break the program
                pass
            # only records the program would have seen reach its handlers
            level = original_level if original_level else (
                logger.parent.getEffectiveLevel() if logger.parent else logging.WARNING)
            if record.levelno >= level:
                original_call(record)
        return call_handlers

    assert S.know is not None  # recorder.begin() set it first
    for name in S.know["loggers"]:
        logger: Any = logging.getLogger(name)  # its callHandlers is replaced on the instance
        original_level = logger.level
        logger.callHandlers = make(logger, original_level, logger.callHandlers)
        logger.setLevel(logging.DEBUG)


def _install_warnings() -> None:
    import warnings

    S, _module, _set, _tid = _REC

    original = warnings.showwarning

    def showwarning(message: Warning | str, category: type[Warning], filename: str,
                    lineno: int, file: TextIO | None = None, line: str | None = None) -> None:
        if getattr(category, "__module__", "") == "jaxcache.seal.stores.backend_reports":
            return  # a sealed rejection: the run summary names it, without JAX's source line
        text = str(message)
        assert S.versions is not None and S.know is not None  # recorder.begin() set them first
        kind = S.versions.classify_warning(S.know, text)
        if kind is not None:
            with S.lock:
                S.warnings.append(text[:2000])
                m = _module(None)
                if m is not None:
                    m["errors"].append({"kind": kind, "message": text[:500]})
                    if kind in ("write-error", "max-size"):
                        _set(m, "skipped" if kind == "max-size" else "error", kind,
                             {"message": text[:500]})
        return original(message, category, filename, lineno, file, line)

    warnings.showwarning = showwarning
