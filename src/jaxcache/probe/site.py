"""jaxcache probe, loaded as `sitecustomize` by `jaxcache run`.

Rules it keeps: standard library only (the job may run another Python than jaxcache's); never
imports jax itself, only reacts once the program imports it; never writes to stdout or stderr;
chains the sitecustomize it shadows; survives fork (each process records itself). It writes one
JSON file per process into $JAXCACHE_PROBE_DIR, after each compile and at exit, atomically.

This file is what every Python process under `jaxcache run` loads at start-up, and most never
import jax: it only waits for `import jax`. Then it loads the recorder (recorder.py,
document.py: by path, from beside this file) and, under `jaxcache run`, jaxcache's guard and
sealed backend (jaxcache itself, from JAXCACHE_LIB), under the run's lease, failing closed when
they cannot be installed.
"""

import os
import stat
import sys
import time

# Only os, sys and time at start-up: every Python process under `jaxcache run` loads this file,
# most never import jax. json, logging, re and threading come in with JAX (which imports them
# anyway), when the probe wakes up.

# Names for the type checker only. No `from __future__ import annotations` here (it would
# import __future__ into every process): annotations are evaluated at definition, so those
# that name the type checker's names are strings.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import Any

    from jaxcache.probe.recorder import Compat

_HERE = os.path.dirname(os.path.abspath(__file__))
_OUT = os.environ.get("JAXCACHE_PROBE_DIR")  # read at start-up: the job may change it
# the run's lease (launch.py): a FIFO whose read end `jaxcache run` holds until it ends, as
# "PID:START:HOST:PATH" (jaxcache's pid and start time, its host, the FIFO); a grant of the
# run is good only while the lease is held
_LEASE = (os.environ.get("JAXCACHE_LEASE") or "").split(":", 3)
HELD, ENDED, ELSEWHERE = "held", "ended", "elsewhere"
_OLDEST_PYTHON = (3, 11)  # pyproject.toml's requires-python: the guard is jaxcache's code
_RECORDER_COPY = "_jaxcache_probe_recorder.py"  # probe/recorder.py, copied here by launch.py
_STARTED = [time.time()]  # when this process started (a forked child: when it forked)
_RECORDER: "list[ModuleType]" = []  # the recorder module, once loaded


def _lease() -> str:
    """Is the `jaxcache run` that started this job still there: HELD, ENDED, or ELSEWHERE (this
    process runs on another host than the run: nothing here can tell, so no grant holds).
    jaxcache holds the lease FIFO's read end open from before the job starts until it has
    ended: the kernel closes it when jaxcache ends, however (a kill, not yet reaped), so
    opening the FIFO to write fails with ENXIO from then on. Only where the FIFO is gone
    (ENOENT: the run's folder removed, by the run at its end or by a cleaner while it runs)
    is jaxcache's process asked after, by its pid and its start time (a pid reused by another
    process starts later; a zombie is gone)."""
    if len(_LEASE) != 4:
        return ENDED
    pid, start, host, path = _LEASE
    if host != os.uname().nodename:
        return ELSEWHERE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return HELD if _running(pid, start) else ENDED
    except OSError:  # ENXIO: no reader any more
        return ENDED
    try:
        return HELD if stat.S_ISFIFO(os.fstat(fd).st_mode) else ENDED
    finally:
        os.close(fd)


def _running(pid: str, start: str) -> bool:
    """Is process `pid` running, and the one that started at `start` (clock ticks since boot,
    /proc's field 22)?"""
    try:
        with open("/proc/%s/stat" % pid, "rb") as f:
            fields = f.read(4096).rsplit(b")", 1)[1].split()  # the name may hold ')'
    except (OSError, IndexError):
        return False
    return len(fields) > 19 and fields[0] != b"Z" and fields[19].decode() == start


def _grant_ended() -> None:
    """The `jaxcache run` that granted this process its cache has ended (the process outlived
    it: detached, or left behind), and this process now reaches for JAX's cache: nothing judges
    what the cache holds now, so it is stopped, with one line (a silent exit would look like
    the program's)."""
    sys.stderr.write("jaxcache: stopping this process: the `jaxcache run` that granted it its "
                     "cache has ended, and a grant ends with its run (start a process that "
                     "outlives its run under its own `jaxcache run`)\n")
    sys.stderr.flush()
    os._exit(1)


def _on_cache_use() -> None:
    """Before JAX opens, reads or writes its cache (jaxcompat's lease): the run's lease still
    held, or the process stopped; on another host than its run, no grant (ValueError: the
    guard's installer turns the cache off, and the record says why)."""
    state = _lease()
    if state == ELSEWHERE:
        raise ValueError("this process runs on host %s, not on %s where its `jaxcache run` "
                         "holds the cache's lease: no cache is granted here"
                         % (os.uname().nodename, _LEASE[2]))
    if state != HELD:
        _grant_ended()


def _on_jax_imported(module: "ModuleType", started: float) -> None:
    import_s = time.perf_counter() - started
    imported_at = time.time()
    try:
        recorder = _load_beside(_RECORDER_COPY, os.path.join("probe", "recorder.py"))
        recorder.begin(module, import_s, imported_at, _STARTED[0], _OUT, _load_beside)
        _RECORDER.append(recorder)
    except Exception:
        recorder = None  # nothing is recorded; the guard and the seal still fail closed
    compat, guard = _install_guard(module)
    seal = None
    if os.environ.get("JAXCACHE_SEAL"):
        seal = _install_seal(os.environ["JAXCACHE_SEAL"])
    if recorder is not None:
        try:
            recorder.ready(compat, guard, seal)
        except Exception:
            pass


_LOADED: "dict[str, ModuleType]" = {}


def _private(folder: str) -> bool:
    """A real directory of this user's that no one else may write: jaxcache's probe folder,
    not one someone made again at its path after it was removed."""
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077


def _load_beside(copy: str, relpath: str) -> "ModuleType":
    """A stdlib-only file of jaxcache: the copy beside this file (launch.py), while its folder
    is still jaxcache's private one, or this file's own package's (this file is site.py in the
    installed package, not its copy), or JAXCACHE_LIB's. Never the folder above a copy's:
    beside a probe folder in /tmp, that is /tmp. Loaded by path, once, not imported: the
    job's Python may not have jaxcache."""
    if copy in _LOADED:
        return _LOADED[copy]
    import importlib.util

    places = [os.path.join(_HERE, copy)] if _private(_HERE) else []
    if os.path.basename(__file__) == "site.py":  # jaxcache/probe/site.py itself
        places.append(os.path.join(os.path.dirname(_HERE), relpath))
    if os.environ.get("JAXCACHE_LIB"):
        places.append(os.path.join(os.environ["JAXCACHE_LIB"], relpath))
    for path in places:
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location(copy[:-3], path)
            assert spec is not None and spec.loader is not None  # a .py file: always both
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            _LOADED[copy] = module
            return module
    raise ImportError("jaxcache's %s is not beside the probe" % relpath)


_PLAN: "list[str]" = []  # the fetch ahead's plan (JAXCACHE_PREFETCH), for the sealed enable


def _load_jaxcache() -> None:
    """jaxcache itself, from where `jaxcache run` says it lives (the job's Python may not
    have it installed): loaded only once the job imports jax."""
    if "jaxcache" not in sys.modules and os.environ.get("JAXCACHE_LIB"):
        import importlib.util

        lib = os.environ["JAXCACHE_LIB"]
        spec = importlib.util.spec_from_file_location(
            "jaxcache", os.path.join(lib, "__init__.py"), submodule_search_locations=[lib])
        assert spec is not None and spec.loader is not None  # a .py file: always both
        module = importlib.util.module_from_spec(spec)
        sys.modules["jaxcache"] = module
        spec.loader.exec_module(module)


def _install_guard(jax_module: "ModuleType"
                   ) -> "tuple[Compat | None, dict[str, object] | None]":
    """`jaxcache run`: JAX gets the directory jaxcache audited (JAXCACHE_AUDITED; none for a
    sealed run, whose backend is served by itself) here, put into its config, and may open
    its cache only there. A job that points JAX elsewhere (jax.config.update, set_cache_dir)
    gets a cache that never hits and never writes, and the record says so. All of it only
    under the run's lease, checked now and before every use of the cache (a process that
    outlived its run is stopped). If any of it cannot be put in
    force, or the guard cannot be installed, the persistent cache is turned off for this
    process: fail closed, the job still runs.
    Returns (jaxcache.jaxcompat or None, what the record says of the guard or None)."""
    audited = os.environ.get("JAXCACHE_AUDITED")
    if not audited and not os.environ.get("JAXCACHE_SEAL"):
        return None, None  # not a cache `jaxcache run` audited (bench makes its own)
    try:
        if sys.version_info < _OLDEST_PYTHON:  # jaxcache's guard cannot run here: uncached,
            # and the run's summary says why, in one line
            raise RuntimeError("this process runs Python %d.%d, older than jaxcache supports "
                               "(%d.%d)" % (sys.version_info[:2] + _OLDEST_PYTHON))
        _on_cache_use()  # a grant is good only under its run's lease
        _load_jaxcache()
        from jaxcache import jaxcompat

        if audited and not getattr(jax_module.config, "jax_compilation_cache_dir", None):
            # the directory reaches JAX here, never through the job's environment (a child
            # without the probe, or one that outlives the run, gets no cache); a directory
            # the program or its launcher named before `import jax` stays, for the guard to
            # judge and the record to name (refused: never hits, never writes)
            jaxcompat.put_in_force({"JAX_COMPILATION_CACHE_DIR": audited})
        jaxcompat.guard_cache_dirs([audited] if audited else [])
        jaxcompat.lease(_on_cache_use)
        if audited and os.environ.get("JAXCACHE_WITNESS"):
            _install_witness(jaxcompat, os.environ["JAXCACHE_WITNESS"])
        if audited and os.environ.get("JAXCACHE_ORIGIN_GATE"):
            # entries of unknown origin are refused: each load is judged by its bytes (an
            # entry that arrived after jaxcache's audit too); failing that, no cache at all
            from jaxcache.lifecycle import witness

            # and trusted writers' ledgers, each read again as the audit read it
            trusted = witness.vouching_from_env(os.environ.get("JAXCACHE_ORIGIN_TRUSTED"))
            jaxcompat.gate_gets(witness.gatekeeper(os.environ["JAXCACHE_ORIGIN_GATE"], trusted))
            jaxcompat.disable_xla_subcaches()  # XLA's own loads could not be judged (enable())
        return jaxcompat, {"installed": True, "audited": audited}
    except BaseException as exc:
        guard: dict[str, object] = {"installed": False, "audited": audited,
                                    "error": "%s: %s" % (type(exc).__name__, exc)}
        try:
            jax_module.config.update("jax_compilation_cache_dir", None)
            jax_module.config.update("jax_enable_compilation_cache", False)
        except Exception:
            pass
        return None, guard


def _install_witness(jaxcompat: "ModuleType", ledger: str) -> None:
    """Each entry the job makes JAX write in the audited directory goes into the user's origin
    ledger (lifecycle/witness.py). If that cannot be set up the job still runs: its entries
    are then of unknown origin, which fails closed."""
    try:
        from jaxcache.lifecycle import witness

        jaxcompat.witness_puts(witness.recorder(ledger))
    except Exception:
        pass


def _install_seal(value: str) -> "tuple[ModuleType, object]":
    """`jaxcache run --sealed`: put the sealed backend into JAX before the program goes on.

    The job was started without JAX_COMPILATION_CACHE_DIR, so if this fails JAX has no
    persistent cache at all; we still stop the job, loudly: it asked for a sealed cache.
    """
    try:
        _load_jaxcache()
        from jaxcache.lifecycle import sealing

        return sealing, sealing.enable_from_env(value, _PLAN[0] if _PLAN else None).backend
    except BaseException as exc:
        sys.stderr.write("jaxcache: the sealed cache could not be enabled in this process "
                         "(%s: %s); stopping the job rather than running it unsealed\n"
                         % (type(exc).__name__, exc))
        sys.stderr.flush()
        os._exit(1)


class _JaxWatcher:
    """Meta-path finder that lets `import jax` run normally, then installs the listeners.
    It stays on the meta path until jax is imported: a program that first only looks for jax
    (`importlib.util.find_spec("jax")`, an "is it installed?" check) would otherwise import
    it past the probe. The finders below it are asked through importlib.util.find_spec, with
    this one passed over on that thread (_inside)."""

    _inside: "set[int]" = set()  # the threads asking the finders below on its behalf

    def find_spec(self, name: str, path: object = None, target: object = None
                  ) -> "ModuleSpec | None":
        from _thread import get_ident

        me = get_ident()
        if name != "jax" or me in self._inside:
            return None
        import importlib.util

        self._inside.add(me)
        try:
            spec = importlib.util.find_spec("jax")
        finally:
            self._inside.discard(me)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader: Any = spec.loader  # its exec_module is replaced on this instance
        original = loader.exec_module
        if getattr(original, "_jaxcache_probe", False):
            return spec  # a loader given out twice (by a caching finder): wrapped once
        started = time.perf_counter()
        watcher = self

        def exec_module(module: "ModuleType") -> None:
            # as JAX's import begins (not at interpreter start: site is not done; not in
            # find_spec, which runs under the global import lock: no other thread could
            # import until it returns)
            if module.__name__ != "jax":  # a loader jax shares (a zipimporter): not jax's
                original(module)
                return
            _start_prefetch()
            original(module)  # if it fails, the watcher stays for the next `import jax`
            try:
                sys.meta_path.remove(watcher)
            except ValueError:
                pass
            _on_jax_imported(module, started)

        exec_module._jaxcache_probe = True  # type: ignore[attr-defined]
        loader.exec_module = exec_module
        return spec


def _chain_sitecustomize() -> None:
    """Run the sitecustomize this file shadows, as site.py would have. Through the import
    system's own frozen modules, always loaded: importlib.util would cost every process of the
    job ~3 ms of imports (contextlib, functools, collections) that most never use."""
    try:
        from _frozen_importlib import module_from_spec
        from _frozen_importlib_external import PathFinder
    except ImportError:  # not CPython
        from importlib.machinery import PathFinder
        from importlib.util import module_from_spec

    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    sys.path[:] = rest
    spec = PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = module_from_spec(spec)
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


def _after_fork_in_child() -> None:
    _STARTED[0] = time.time()
    for recorder in _RECORDER:
        try:
            recorder.after_fork()
        except Exception:
            pass


def _start_prefetch() -> None:
    """`jaxcache run --sealed` on a bucket, with the keys the same job hit last time
    (JAXCACHE_PREFETCH): start fetching and verifying them (lifecycle/prefetching.py) as
    `import jax` begins, on this thread, before JAX's import goes on: the set-up imports here,
    so that the pool's threads, which wait on the network beside JAX's import, import nothing.
    Taken out of the environment: this process prefetches, not its children. Nothing reaches
    JAX from here: the sealed enable after `import jax` audits, then adopts the fetch (if
    it could not start, the record says why). One process of the job fetches ahead, the first
    to import jax (_claim_prefetch): a launcher that never imports it hands the plan to each
    of its children, which would each fetch it all, in memory and in requests."""
    plan = os.environ.pop("JAXCACHE_PREFETCH", None)
    seal = os.environ.get("JAXCACHE_SEAL")
    if not plan or not seal or not _claim_prefetch():
        return
    _PLAN.append(plan)
    try:
        _load_jaxcache()
        from jaxcache.lifecycle import prefetching
    except Exception:
        return  # the sealed enable loads jaxcache again, and stops the job if it cannot
    prefetching.start_early(seal, plan)  # never raises: a failure is kept for the enable


def _claim_prefetch() -> bool:
    """Is this the job's first process to import jax with a plan to fetch ahead? It creates
    a file in the probe directory (jaxcache's, private to the user) that no other process of
    the job can create again; without that directory nothing is claimed, nothing fetched."""
    if not _OUT:
        return False
    try:
        os.close(os.open(os.path.join(_OUT, "prefetch.claimed"),
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
    except OSError:  # claimed by another process of the job, or no directory to claim in
        return False
    return True


if "jax" in sys.modules:  # imported by something earlier in start-up
    _on_jax_imported(sys.modules["jax"], time.perf_counter())
else:
    sys.meta_path.insert(0, _JaxWatcher())
os.register_at_fork(after_in_child=_after_fork_in_child)
_chain_sitecustomize()
