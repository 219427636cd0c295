"""jaxcache probe, loaded as `sitecustomize` by `jaxcache run`.

Rules it keeps: standard library only (the job may run another Python than jaxcache's); never
imports jax itself, only reacts once the program imports it; never writes to stdout or stderr;
chains the sitecustomize it shadows; survives fork (each process records itself). It writes one
JSON file per process into $JAXCACHE_PROBE_DIR, after each compile and at exit, atomically;
while a compile is under way (or waits for another rank) a watcher thread writes it every
_WRITE_EVERY_S too, so a process killed in a hung compile leaves the module it was on.
Every document says which process wrote it (`identity`: JAX's process index and count, the
host, the launcher's ids) and how this process sees the cache directory (`cache_view`).
"""

import os
import stat
import sys
import time

# Only os, sys and time at start-up: every Python process under `jaxcache run` loads this file,
# most never import jax. json, logging, re and threading come in with JAX (which imports them
# anyway), when the probe wakes up.

_HERE = os.path.dirname(os.path.abspath(__file__))
_OUT = os.environ.get("JAXCACHE_PROBE_DIR")
SCHEMA = "jaxcache.probe/1"
# What JAX logs and emits on each version lives in jaxcache/jaxcompat/versions.py (stdlib only):
# launch.py copies it here under this name; from a source tree it is found beside the package.
_KNOWLEDGE_COPY = "_jaxcache_versions.py"
_LAUNCHERS_COPY = "_jaxcache_launchers.py"  # jaxcache/run/launchers.py: the launcher's rank ids
_WRITE_EVERY_S = 1.0
_PLUGINS = ("jax-cuda12-plugin", "jax-cuda13-plugin", "jax-cuda12-pjrt", "jax-cuda13-pjrt",
            "jax-rocm60-plugin", "jax-rocm7-plugin", "libtpu", "libtpu-nightly", "jax-metal")
_CACHE_OPTIONS = (
    "jax_compilation_cache_dir", "jax_enable_compilation_cache",
    "jax_persistent_cache_min_compile_time_secs", "jax_persistent_cache_min_entry_size_bytes",
    "jax_compilation_cache_max_size", "jax_persistent_cache_enable_xla_caches",
    "jax_explain_cache_misses", "jax_raise_persistent_cache_errors",
    "jax_compilation_cache_check_contents", "jax_compilation_cache_include_metadata_in_key",
    "jax_share_binary_between_hosts",
)


_UNSAFE_CHARS = None


def _key(name):
    """One key for JAX's two spellings of a module: 'jit(f)' (events) and 'jit_f' (logs)."""
    global _UNSAFE_CHARS
    if _UNSAFE_CHARS is None:
        import re

        _UNSAFE_CHARS = re.compile(r"[^\w.-]")
    return _UNSAFE_CHARS.sub("_", name).rstrip("_")


class _Lock:
    """A real lock once threading is imported (with JAX); a no-op before, when nothing runs."""

    def __init__(self):
        self._lock = None

    def arm(self):
        import threading

        self._lock = threading.RLock()

    def __enter__(self):
        if self._lock is not None:
            self._lock.acquire()

    def __exit__(self, *exc):
        if self._lock is not None:
            self._lock.release()


def _tid():
    import threading

    return threading.get_ident()


class _State:
    def __init__(self):
        self.reset()

    def reset(self):
        self.pid = os.getpid()
        self.lock = _Lock()
        self.started = time.time()
        self.jax_imported_s = None
        self.import_jax_s = None
        self.import_jax_started = None
        self.modules = []
        self.current = {}  # thread id -> module dict being compiled
        self.pending_components = {}  # thread id -> {component: hash}
        self.trace = {}  # fun_name -> seconds of the latest trace
        self.trace_here = {}  # thread id -> seconds of its latest trace (events without names)
        self.counts = {"compile_requests": 0, "hits": 0, "writes": 0, "tasks_using_cache": 0,
                       "task_disabled_cache": 0}
        self.options = None
        self.env_cache_dir = None
        self.warnings = []
        self.jax = {}
        self.last_write = 0.0
        self.unsaved = False  # a compile ended since the last write (the write was throttled)
        self.final_done = False  # the exit write happened: nothing may replace it
        self.watcher = None  # the thread that writes while a compile is under way
        self.proc_ids = None  # (jax.process_index(), jax.process_count()) once JAX knows them
        self.cache_view = None
        self.seal = getattr(self, "seal", None)  # a forked child shares JAX's sealed backend
        self.compat = getattr(self, "compat", None)  # jaxcache.jaxcompat, when it guards JAX
        self.guard = getattr(self, "guard", None)  # {"installed": bool, ...} under jaxcache run
        self.know = getattr(self, "know", None)  # versions.knowledge() for this JAX
        self.versions = getattr(self, "versions", None)  # the versions module itself


S = _State()


def _module(name, sym=False):
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
    if name is None:
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


def _start_watcher():
    """A daemon thread that writes the document while a compile is under way or a finished
    one is unsaved: a rank hung in a compile (or waiting for another rank's executable) and
    then killed still names its module. Started at the first compile of each process."""
    if S.watcher is not None:
        return
    import threading

    def watch():
        me = os.getpid()
        while os.getpid() == me and not S.final_done:
            time.sleep(_WRITE_EVERY_S)
            if (S.current or S.unsaved) and time.monotonic() - S.last_write >= _WRITE_EVERY_S:
                _write()

    S.watcher = threading.Thread(target=watch, name="jaxcache-probe-writer", daemon=True)
    S.watcher.start()


def _cache_setting():
    try:
        import jax

        return (jax.config.jax_compilation_cache_dir, jax.config.jax_enable_compilation_cache,
                jax.config.jax_persistent_cache_min_compile_time_secs)
    except Exception:
        return None, None, None


def _first_compile():
    if S.options is None:
        S.env_cache_dir = os.environ.get("JAX_COMPILATION_CACHE_DIR")
        S.cache_view = _cache_view()
        try:
            import jax

            S.options = {}
            for name in _CACHE_OPTIONS:
                try:
                    value = getattr(jax.config, name)
                except AttributeError:
                    continue
                ok = isinstance(value, (str, int, float, bool, type(None)))
                S.options[name] = value if ok else str(value)
        except Exception as exc:  # never break the program
            S.options = {"error": repr(exc)}


def _on_event(event, **kw):
    with S.lock:
        kind = S.know["event_kinds"].get(event)
        if kind in S.counts:
            S.counts[kind] += 1
        if kind == "compile_requests":
            _first_compile()


def _named(fun):
    """The module a duration event is about: by its name where this JAX gives one, else the
    one this thread's log lines named last (JAX <= 0.5 events carry no fun_name)."""
    if fun is not None or S.know["events_name_module"]:
        return _module(str(fun))
    return _module(None)


def _on_duration(event, secs, **kw):
    flush = False
    with S.lock:
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
            _first_compile()
            m = _named(fun)
            if m is None:
                S.warnings.append("a compile of %.3f s named no module (JAX %s)"
                                  % (secs, S.know["version"]))
                return
            m["compile_or_load_s"] = secs
            (m["cache_dir_at_compile"], m["cache_enabled_at_compile"],
             m["min_compile_time_at_compile"]) = _cache_setting()
            used = _cache_in_use()
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


def _cache_in_use():
    """The directory of the cache object JAX holds now (not the setting, which JAX ignores
    once its cache exists), and whether jaxcache served or refused it."""
    if S.compat is None:
        return None
    try:
        return S.compat.current_cache()
    except Exception:
        return None


def _set(m, outcome, reason=None, detail=None):
    if m is None:
        return
    m["outcome"], m["reason"], m["reason_detail"] = outcome, reason, detail


def _on_log(record):
    msg, args = record.msg, record.args if isinstance(record.args, tuple) else ()
    if not isinstance(msg, str):
        return
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


def _install_logging():
    import logging

    def make(logger, original_level, original_call):
        def call_handlers(record):
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

    for name in S.know["loggers"]:
        logger = logging.getLogger(name)
        original_level = logger.level
        logger.callHandlers = make(logger, original_level, logger.callHandlers)
        logger.setLevel(logging.DEBUG)


def _install_warnings():
    import warnings

    original = warnings.showwarning

    def showwarning(message, category, filename, lineno, file=None, line=None):
        if getattr(category, "__module__", "") == "jaxcache.seal.store":
            return  # a sealed rejection: the run summary names it, without JAX's source line
        text = str(message)
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


def _platform():
    try:
        import jax

        if not S.modules:
            return {}
        devices = jax.devices()
        return {"backend": jax.default_backend(), "device_kind": devices[0].device_kind,
                "device_count": len(devices), "local_device_count": jax.local_device_count(),
                "process_index": jax.process_index(), "process_count": jax.process_count()}
    except Exception as exc:
        return {"error": repr(exc)}


def _identity():
    """Which process of the job this is: JAX's process index and count (asked only once
    something compiled: before that, asking would create the backend and break a later
    jax.distributed.initialize), the host, and the launcher's ids from the environment."""
    if S.proc_ids is None and S.modules:
        try:
            import jax

            S.proc_ids = (jax.process_index(), jax.process_count())
        except Exception:
            pass
    index, count = S.proc_ids or (None, None)
    try:
        launcher = _load_beside(_LAUNCHERS_COPY, os.path.join("run", "launchers.py")).identify()
    except Exception:
        launcher = None
    return {"process_index": index, "process_count": count, "host": os.uname().nodename,
            "launcher": launcher}


def _cache_view():
    """How this process sees the directory jaxcache audited (or JAX's own setting): its
    path, the filesystem and inode it resolves to here, jaxlib and XLA_FLAGS. A rank on
    another host or in another mount namespace can see another directory at the same path."""
    audited = os.environ.get("JAXCACHE_AUDITED")
    path = audited or (S.options or {}).get("jax_compilation_cache_dir")
    view = {"path": path if isinstance(path, str) else None,
            "source": "audited" if audited else "jax", "device": None, "inode": None,
            "mode": None, "uid": None, "fs_type": None, "mnt_ns": None,
            "jaxlib": (S.jax or {}).get("jaxlib"), "xla_flags": os.environ.get("XLA_FLAGS")}
    try:
        view["mnt_ns"] = os.readlink("/proc/self/ns/mnt")
    except OSError:
        pass
    if view["path"] is None or "://" in view["path"]:
        return view
    try:
        st = os.stat(view["path"])
    except OSError as exc:
        view["error"] = exc.strerror
        return view
    dev = "%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev))
    view.update(device=dev, inode=st.st_ino, mode="%04o" % (st.st_mode & 0o7777),
                uid=st.st_uid)
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                if left.split()[2:3] == [dev]:
                    view["fs_type"] = right.split()[0]
                    break
    except (OSError, IndexError):
        pass
    return view


def _module_doc(m):
    doc = {k: v for k, v in m.items() if k not in ("thread", "key")}
    doc["in_progress"] = m["compile_or_load_s"] is None and any(
        c is m for c in S.current.values())
    return doc


def _write(final=False):
    if not _OUT or os.getpid() != S.pid:
        return
    try:
        import json

        with S.lock:  # the watcher thread and the exit write never interleave
            if S.final_done:
                return
            doc = {"schema": SCHEMA, "pid": S.pid, "ppid": os.getppid(), "final": final,
                   "argv": list(sys.argv), "started": S.started, "now": time.time(),
                   "import_jax_started": S.import_jax_started,
                   "import_jax_s": S.import_jax_s, "jax": S.jax,
                   "identity": _identity(), "cache_view": S.cache_view,
                   "cache_options_at_first_compile": S.options, "counts": dict(S.counts),
                   "env_cache_dir_at_first_compile": S.env_cache_dir,
                   "modules": [_module_doc(m) for m in S.modules],
                   "warnings": list(S.warnings)}
            if S.seal is not None:
                doc["seal"] = S.seal[0].summary(S.seal[1])
            if S.guard is not None:
                doc["cache_guard"] = dict(S.guard)
            if S.compat is not None:
                doc["cache_dirs"] = S.compat.guard_log()
            if final:
                doc["platform"] = _platform()
                doc["jax"] = dict(S.jax, plugins=_plugins())
            S.last_write = time.monotonic()
            S.unsaved = False
            path = os.path.join(_OUT, "probe-%d.json" % S.pid)
            tmp = path + ".tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(doc, f, default=str)
            os.replace(tmp, path)
            S.final_done = final
    except Exception:
        pass  # the probe must never change what the program does


def _guarded(fn):
    """A listener that can never raise into JAX: the probe must not break the program."""

    def listener(*args, **kwargs):
        try:
            fn(*args, **kwargs)
        except Exception:
            pass

    return listener


def _wait_gate(jax_module):
    """`jaxcache run` started the job while it audits the cache: hold JAX here until the
    gate file says which cache to use, or stop the process if the audit refused it."""
    gate = os.environ.get("JAXCACHE_GATE")
    if not gate:
        return
    import json

    parent = int(os.environ.get("JAXCACHE_GATE_PID") or 0)
    me = os.geteuid()
    while True:
        try:
            where = os.lstat(os.path.dirname(gate))  # the private probe directory jaxcache made
            if not stat.S_ISDIR(where.st_mode) or where.st_uid != me or where.st_mode & 0o077:
                raise ValueError("the gate's directory is not jaxcache's private one")
            fd = os.open(gate, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as f:
                st = os.fstat(f.fileno())
                if not stat.S_ISREG(st.st_mode) or st.st_uid != me:
                    raise ValueError("the gate is not a file of ours")
                doc = json.loads(f.read(1 << 16))
            break
        except FileNotFoundError:
            if not os.path.isdir(os.path.dirname(gate)):
                doc = {}  # the directory is gone: jaxcache has ended, no verdict will come
                break
        except (OSError, ValueError):
            doc = {}
            break
        try:
            if parent:
                os.kill(parent, 0)
        except ProcessLookupError:  # jaxcache is gone: no verdict will come
            doc = {}
            break
        except OSError:
            pass
        time.sleep(0.001)
    if not doc.get("ok"):
        os._exit(1)  # refused: jaxcache run reports why; JAX never had the directory
    for name in ("JAXCACHE_GATE", "JAXCACHE_GATE_PID"):
        os.environ.pop(name, None)
    env = doc.get("env") or {}
    os.environ.update(env)
    if env.get("JAX_COMPILATION_CACHE_DIR"):  # JAX read its environment before the gate
        jax_module.config.update("jax_compilation_cache_dir", env["JAX_COMPILATION_CACHE_DIR"])


def _on_jax_imported(module, started):
    import atexit

    S.import_jax_s = time.perf_counter() - started
    S.jax_imported_s = time.time()
    S.import_jax_started = S.jax_imported_s - S.import_jax_s
    _wait_gate(module)
    S.lock.arm()
    try:
        version = getattr(module, "__version__", None)
        S.versions = _load_versions()
        S.know = S.versions.knowledge(version)
        S.know["event_kinds"] = {v: k for k, v in S.know["events"].items()}
        from jax import monitoring

        monitoring.register_event_listener(_guarded(_on_event))
        monitoring.register_event_duration_secs_listener(_guarded(_on_duration))
        _install_logging()
        _install_warnings()
        S.jax = {"jax": version, "jaxlib": _dist("jaxlib"), "support": S.know["support"]}
    except Exception as exc:
        S.jax = {"error": repr(exc)}
    _install_guard(module)
    if os.environ.get("JAXCACHE_SEAL"):
        _install_seal(os.environ["JAXCACHE_SEAL"])
    atexit.register(_write, True)
    _write()
    S.last_write = 0.0  # the first compile is always written at once


_LOADED = {}


def _load_versions():
    """jaxcache's knowledge of JAX's messages and events (jaxcompat/versions.py)."""
    return _load_beside(_KNOWLEDGE_COPY, os.path.join("jaxcompat", "versions.py"))


def _load_beside(copy, relpath):
    """A stdlib-only file of jaxcache: the copy beside this file (launch.py), or the source
    tree's, or JAXCACHE_LIB's. Loaded by path, once, not imported: the job's Python may not
    have jaxcache."""
    if copy in _LOADED:
        return _LOADED[copy]
    import importlib.util

    places = [os.path.join(_HERE, copy), os.path.join(os.path.dirname(_HERE), relpath)]
    if os.environ.get("JAXCACHE_LIB"):
        places.append(os.path.join(os.environ["JAXCACHE_LIB"], relpath))
    for path in places:
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location(copy[:-3], path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            _LOADED[copy] = module
            return module
    raise ImportError("jaxcache's %s is not beside the probe" % relpath)


def _load_jaxcache():
    """jaxcache itself, from where `jaxcache run` says it lives (the job's Python may not
    have it installed): loaded only once the job imports jax."""
    if "jaxcache" not in sys.modules and os.environ.get("JAXCACHE_LIB"):
        import importlib.util

        lib = os.environ["JAXCACHE_LIB"]
        spec = importlib.util.spec_from_file_location(
            "jaxcache", os.path.join(lib, "__init__.py"), submodule_search_locations=[lib])
        module = importlib.util.module_from_spec(spec)
        sys.modules["jaxcache"] = module
        spec.loader.exec_module(module)


def _install_guard(jax_module):
    """`jaxcache run`: JAX may open its cache only in the directory jaxcache audited
    (JAXCACHE_AUDITED; none for a sealed run, whose backend is served by itself). A job that
    points JAX elsewhere (jax.config.update, set_cache_dir) gets a cache that never hits and
    never writes, and the record says so. If the guard cannot be installed the persistent
    cache is turned off for this process: fail closed, the job still runs."""
    audited = os.environ.get("JAXCACHE_AUDITED")
    if not audited and not os.environ.get("JAXCACHE_SEAL"):
        return  # not a cache `jaxcache run` audited (bench makes its own): nothing to guard
    try:
        _load_jaxcache()
        from jaxcache import jaxcompat

        jaxcompat.guard_cache_dirs([audited] if audited else [])
        S.compat = jaxcompat
        S.guard = {"installed": True, "audited": audited}
    except BaseException as exc:
        S.guard = {"installed": False, "audited": audited,
                   "error": "%s: %s" % (type(exc).__name__, exc)}
        try:
            jax_module.config.update("jax_compilation_cache_dir", None)
            jax_module.config.update("jax_enable_compilation_cache", False)
        except Exception:
            pass


def _install_seal(value):
    """`jaxcache run --sealed`: put the sealed backend into JAX before the program goes on.

    The job was started without JAX_COMPILATION_CACHE_DIR, so if this fails JAX has no
    persistent cache at all; we still stop the job, loudly: it asked for a sealed cache.
    """
    try:
        _load_jaxcache()
        from jaxcache.lifecycle import sealing

        S.seal = (sealing, sealing.enable_from_env(value).backend)
    except BaseException as exc:
        sys.stderr.write("jaxcache: the sealed cache could not be enabled in this process "
                         "(%s: %s); stopping the job rather than running it unsealed\n"
                         % (type(exc).__name__, exc))
        sys.stderr.flush()
        os._exit(1)


def _dist(name):
    try:
        from importlib import metadata

        return metadata.version(name)
    except Exception:
        return None


def _plugins():
    """Versions of the accelerator plugins that are installed (at exit: off the hot path)."""
    found = {}
    for name in _PLUGINS:
        version = _dist(name)
        if version is not None:
            found[name] = version
    return found


class _JaxWatcher:
    """Meta-path finder that lets `import jax` run normally, then installs the listeners."""

    def find_spec(self, name, path=None, target=None):
        if name != "jax":
            return None
        import importlib.util

        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        spec = importlib.util.find_spec("jax")
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        original = loader.exec_module
        started = time.perf_counter()

        def exec_module(module):
            original(module)
            _on_jax_imported(module, started)

        loader.exec_module = exec_module
        return spec

    def invalidate_caches(self):
        pass


def _chain_sitecustomize():
    """Run the sitecustomize this file shadows, as site.py would have."""
    import importlib.machinery
    import importlib.util

    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    sys.path[:] = rest
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        if sys.flags.verbose:
            sys.excepthook(*sys.exc_info())
        else:
            sys.stderr.write(
                "Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                "%s: %s\n" % (err.__class__.__name__, err))


def _after_fork_in_child():
    armed = S.lock._lock is not None
    S.reset()
    if armed:
        S.lock.arm()


if "jax" in sys.modules:  # imported by something earlier in start-up
    _on_jax_imported(sys.modules["jax"], time.perf_counter())
else:
    sys.meta_path.insert(0, _JaxWatcher())
os.register_at_fork(after_in_child=_after_fork_in_child)
_chain_sitecustomize()
