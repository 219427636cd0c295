"""Start a program with the probe injected, wait for it, collect what the probe wrote.

The probe travels as `sitecustomize.py` in a private temporary folder (probe_folder.py) put
first on PYTHONPATH; we wait with wait4() for the child's own CPU times and peak RSS, keep the
terminal's Ctrl-C for the child, and always collect what the probe wrote, even after a crash.

This module runs between `jaxcache run` and the start of the user's job, so it imports only
os, signal and time: os.posix_spawn and a few lines of its own instead of subprocess,
tempfile, shutil and threading, and no dataclasses (~20 ms of start-up on a 2-core machine).

The lease: every run makes a FIFO in its folder and holds its read end until the run ends; the
job's processes get its path (JAXCACHE_LEASE), and the probe grants a cache only while the
lease is held (site.py): a process that reaches JAX's cache after its run ended is stopped
there.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from jaxcache import jobenv
from jaxcache.errors import JaxcacheError
from jaxcache.probe import job_tree, probe_folder
from jaxcache.text import safe

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
else:  # the C module: signal's enums (Signals, Handlers, Sigmasks) cost every run ~0.5 ms
    import _signal as signal
if TYPE_CHECKING:
    import threading
    from resource import struct_rusage
    from types import FrameType
    from typing import IO, Any

    from jaxcache.probe.probe_folder import ProbeFolder

    # what signal.getsignal() gives and signal.signal() takes
    Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None



class CommandError(JaxcacheError):
    """The command could not be started at all."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def resolve(argv: list[str]) -> str:
    """The executable argv[0] names, or CommandError (127 not found, 126 not executable)."""
    exe = argv[0]
    if "/" in exe:
        if not os.path.exists(exe):
            raise CommandError(f"command not found: {safe(exe)}", 127)
        if os.path.isdir(exe) or not os.access(exe, os.X_OK):
            raise CommandError(f"not executable: {safe(exe)}", 126)
        return exe
    for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(directory or ".", exe)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise CommandError(f"command not found: {safe(exe)}", 127)


def probe_files() -> list[tuple[str, str]]:
    """(source, name in the probe directory) of every file the probe needs in the job's
    Python: site.py as sitecustomize.py (first: what every process loads as it starts), and
    the stdlib-only files it loads by path once the job imports jax, under the names site.py,
    recorder.py and document.py ask for."""
    from jaxcache.jaxcompat import gate as jaxgate

    here = os.path.dirname(os.path.abspath(__file__))
    return [(os.path.join(here, "site.py"), "sitecustomize.py"),
            (os.path.join(here, "recorder.py"), "_jaxcache_probe_recorder.py"),
            (os.path.join(here, "document.py"), "_jaxcache_probe_document.py"),
            (os.path.join(here, "logtap.py"), "_jaxcache_probe_logtap.py"),
            (jaxgate.VERSIONS_PY, "_jaxcache_versions.py"),
            (os.path.join(here, "launchers.py"),
             "_jaxcache_launchers.py")]


class Ran:
    """How launch() left the program: its pid, wait status (as os.wait4 gives it) and usage,
    the wall seconds, whether the timeout ended it, and the probe documents its processes
    wrote (the main one first). A plain slotted class: this module stays light."""

    __slots__ = ("pid", "probes", "status", "timed_out", "usage", "wall_s")

    def __init__(self, pid: int, status: int, usage: struct_rusage, wall_s: float,
                 timed_out: bool, probes: tuple[dict[str, Any], ...]) -> None:
        self.pid, self.status, self.usage, self.wall_s = pid, status, usage, wall_s
        self.timed_out, self.probes = timed_out, probes


def launch(argv: list[str], env: dict[str, str], *,
           stdout: int | IO[str] | IO[bytes] | None = None,
           stderr: int | IO[str] | IO[bytes] | None = None, timeout: float | None = None,
           interactive: bool = True, started: Callable[[], object] | None = None) -> Ran:
    """Run argv with the probe; returns when the program has ended, however it ended:
    pid, status (as os.wait4 gives it), usage, wall_s, timed_out, probes (main one first).

    interactive: the job shares our terminal, Ctrl-C goes to it and we stay to write the
    record (jaxcache run). Otherwise (jaxcache bench) the job runs in its own session, and
    Ctrl-C or `timeout` seconds kill its whole process group; KeyboardInterrupt propagates.

    started: called once the job has started, before it is waited for: to start what this
    process does while the job runs (beside()), which then costs no time before the job.
    """
    if not argv:
        raise JaxcacheError("no command given: jaxcache run [OPTIONS] -- CMD [ARGS...]")
    exe = resolve(argv)
    folder = probe_folder.make(probe_files())
    probe = folder.path
    lease: int | None = None
    try:
        child_env = dict(env)
        child_env[jobenv.PROBE_DIR] = probe
        old = child_env.get("PYTHONPATH")
        child_env["PYTHONPATH"] = probe + (os.pathsep + old if old else "")
        # the lease, before the job starts: every grant of this run is good under it (held
        # until this run ends)
        try:
            lease = probe_folder.hold_lease(folder)
        except OSError as exc:
            raise JaxcacheError(f"cannot make this run's lease (a FIFO) in {safe(probe)}: "
                                f"{exc.strerror}; without it a cache granted to the job could "
                                "outlive the run") from None
        child_env[jobenv.LEASE] = _lease(os.path.join(probe, probe_folder.LEASE_FILE))
        handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGQUIT)}
        actions = [(os.POSIX_SPAWN_DUP2, f if isinstance(f, int) else f.fileno(), target)
                   for f, target in ((stdout, 1), (stderr, 2)) if f is not None]
        start = time.perf_counter()
        # a signal that comes while the job is spawned waits until ours are handled: it is
        # then the job's (else its default would end us, leaving the job and the folder)
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
        try:
            pid = os.posix_spawn(exe, [exe, *argv[1:]], child_env, file_actions=actions,
                                 setsid=not interactive, setsigmask=mask)
        except OSError as exc:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            raise CommandError(f"cannot run {safe(argv[0])}: {exc.strerror}", 126) from None
        job = job_tree.Job(pid, interactive)
        forward = _hold_signals(pid, interactive, handlers)  # until it is reaped
        try:
            try:
                if started is not None:
                    started()
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # what came meanwhile: now
                status, usage, timed_out = _wait(job, timeout)
            except BaseException:  # the job goes too
                job.stop()
                raise
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            _restore_signals(interactive, handlers, forward)
        wall = time.perf_counter() - start
        if not interactive:
            _end_group(pid)  # leftovers of the job (daemons it started) go with it
        return Ran(pid, status, usage, wall, timed_out, _collect(folder, pid))
    finally:
        if lease is not None:
            os.close(lease)
        probe_folder.remove(folder)


def _lease(fifo: str) -> str:
    """The lease as the probe reads it (site.py _lease): this process's pid and start time
    (/proc's field 22: a pid reused later starts later), its host, the FIFO's path."""
    with open("/proc/self/stat", "rb") as f:
        start = f.read(4096).rsplit(b")", 1)[1].split()[19].decode()
    return f"{os.getpid()}:{start}:{os.uname().nodename}:{fifo}"


_HELD = (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP)


def beside(work: Callable[[], object], name: str) -> threading.Thread | None:
    """`work` on a daemon thread while the job runs; None where no thread can be started (a
    process or cgroup limit): the caller then does the work itself, after the job. The
    thread starts with the job's signals blocked and keeps them so: they always reach the main
    thread, which hands them on to the job. (One a thread took would wait there until the job
    ended, or, before our handlers are set, end this process and leave the job running.)"""
    import threading

    thread = threading.Thread(target=work, name=name, daemon=True)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    try:
        thread.start()
    except RuntimeError:  # "can't start new thread"
        return None
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    return thread


def _hold_signals(pid: int, interactive: bool, handlers: dict[signal.Signals, Handler]
                  ) -> dict[signal.Signals, Handler]:
    """While the job runs: Ctrl-C (and Ctrl-\\) reach it through the terminal and we stay for
    the record (interactive); SIGTERM and SIGHUP are passed on to it (we stay, the folder is
    removed). Returns their handlers before."""
    if interactive:
        for s in handlers:
            signal.signal(s, lambda *_: None)
    return {s: signal.signal(s, lambda sig, _f: os.kill(pid, sig))
            for s in (signal.SIGTERM, signal.SIGHUP)}


def _restore_signals(interactive: bool, handlers: dict[signal.Signals, Handler],
                     forward: dict[signal.Signals, Handler]) -> None:
    if interactive:
        for s, h in handlers.items():
            signal.signal(s, h)
    for s, h in forward.items():
        signal.signal(s, h)


GRACE_S = 10.0  # after SIGTERM, before SIGKILL: time for a launcher to cancel its ranks


def _wait(job: job_tree.Job, timeout: float | None) -> tuple[int, struct_rusage, bool]:
    """The job's end (wait4); past `timeout` seconds its process group is ended."""
    pid = job.pid
    expired: threading.Event | None = None
    timers: list[threading.Timer] = []
    if timeout is not None:
        import threading

        expired = threading.Event()

        def after(seconds: float, action: Callable[[], object]) -> None:
            t = threading.Timer(seconds, action)
            t.daemon = True
            timers.append(t)
            t.start()

        def expire() -> None:
            expired.set()
            _kill_group(pid, signal.SIGTERM)  # srun cancels its step on SIGTERM
            after(GRACE_S, lambda: _kill_group(pid))

        after(timeout, expire)
    try:
        while True:
            try:
                _, status, usage = os.wait4(pid, 0)
                job.reaped = True
                break
            except InterruptedError:
                continue
            except KeyboardInterrupt:
                _kill_group(pid, signal.SIGTERM)
                deadline = time.monotonic() + GRACE_S
                while os.wait4(pid, os.WNOHANG)[0] == 0:
                    if time.monotonic() > deadline:
                        _kill_group(pid)
                        os.wait4(pid, 0)
                        break
                    time.sleep(0.05)
                job.reaped = True
                _end_group(pid)
                raise
    finally:
        for t in timers:
            t.cancel()
    return status, usage, expired is not None and expired.is_set()


def _kill_group(pid: int, sig: int = signal.SIGKILL) -> None:
    try:  # noqa: SIM105 (contextlib's import costs every `jaxcache run` ~0.5 ms)
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _end_group(pid: int, grace: float = GRACE_S) -> None:
    """What is left of the job's process group after its leader was reaped: SIGTERM, up to
    `grace` seconds to go, then SIGKILL. SIGKILL first would leave a launcher such as srun
    no chance to cancel its job step, which then keeps its nodes allocated."""
    _kill_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.05)
    _kill_group(pid)


def _collect(folder: ProbeFolder, main_pid: int) -> tuple[dict[str, Any], ...]:
    """The probe documents the job's processes left, the main process's first (a process
    killed mid-write leaves a torn one: skipped; a link or anything not a file: skipped)."""
    from stat import S_ISREG

    from jaxcache import validate

    docs: list[dict[str, Any]] = []
    for name in sorted(os.listdir(folder.fd)):
        if not (name.startswith("probe-") and name.endswith(".json")):
            continue
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=folder.fd)
            with os.fdopen(fd, "rb") as f:
                if not S_ISREG(os.fstat(f.fileno()).st_mode):
                    continue
                doc = validate.parse_json(f.read())
        except (OSError, validate.Unreadable):
            continue
        if isinstance(doc, dict):
            docs.append(doc)
    docs.sort(key=lambda d: (d.get("pid") != main_pid, d.get("started", 0)))
    return tuple(docs)
