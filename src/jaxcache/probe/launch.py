"""Start a program with the probe injected, wait for it, collect what the probe wrote.

The probe travels as `sitecustomize.py` in a private temporary directory put first on
PYTHONPATH; we wait with wait4() for the child's own CPU times and peak RSS, keep the
terminal's Ctrl-C for the child, and always collect what the probe wrote, even after a crash.

This module runs between `jaxcache run` and the start of the user's job, so it imports only
os, signal, sys and time: os.posix_spawn and a few lines of its own instead of subprocess,
tempfile, shutil and threading, and no dataclasses (~20 ms of start-up on a 2-core machine).

The gate: with `admit`, the job starts at once and `admit()` (the audit) runs while it does.
Until admit() returns, no process of the job has the cache: the directory is not in its
environment, and the probe holds JAX at `import jax` until the gate file says what to set.
If admit() raises, the gate says no, the job is killed, and the exception propagates.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

from jaxcache import jobenv
from jaxcache.errors import JaxcacheError
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

    # what signal.getsignal() gives and signal.signal() takes
    Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None

GATE_FILE = "gate.json"  # in the probe directory; the probe's env: JAXCACHE_GATE, _GATE_PID


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


def _safe_root(path: str) -> bool:
    """A place for the probe directory that nobody else can rename it out of: ours or root's,
    and either not writable by others or sticky (like /tmp). The probe directory holds the
    sitecustomize the job runs and the gate that hands over the cache: whoever could swap it
    would choose both."""
    import stat

    try:
        st = os.stat(path)
    except OSError:
        return False
    return (stat.S_ISDIR(st.st_mode) and st.st_uid in (0, os.geteuid())
            and (not st.st_mode & 0o022 or bool(st.st_mode & stat.S_ISVTX))
            and os.access(path, os.W_OK | os.X_OK))


def _tmp_root() -> str:
    candidates = (os.environ.get("XDG_RUNTIME_DIR"), os.environ.get("TMPDIR"), "/tmp",
                  "/var/tmp")
    for candidate in candidates:
        if candidate and _safe_root(candidate):
            return candidate
    raise JaxcacheError("no safe temporary directory: TMPDIR and /tmp must be yours or root's "
                        "and either private or sticky (others could swap the probe directory)")


def _mkdtemp(prefix: str) -> str:
    """A new directory, 0700, that nobody else created (mkdir fails if the name exists)."""
    root = _tmp_root()
    for _ in range(100):
        path = os.path.join(root, prefix + os.urandom(6).hex())
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return path
    raise JaxcacheError(f"cannot create a private temporary directory in {safe(root)}")


def _remove_tree(path: str) -> None:
    """Remove the probe directory we created: our files and what the probes wrote there."""
    try:
        with os.scandir(path) as entries:
            for e in entries:
                if e.is_dir(follow_symlinks=False):
                    _remove_tree(e.path)
                else:
                    os.unlink(e.path)
        os.rmdir(path)
    except FileNotFoundError:
        pass


def _write_new(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def probe_files() -> list[tuple[str, str]]:
    """(source, name in the probe directory) of every file the probe needs in the job's
    Python: site.py as sitecustomize.py, and the stdlib-only files it loads by path once the
    job imports jax, under the names site.py, recorder.py and document.py ask for."""
    from jaxcache.jaxcompat import gate as jaxgate

    here = os.path.dirname(os.path.abspath(__file__))
    return [(os.path.join(here, "site.py"), "sitecustomize.py"),
            (os.path.join(here, "recorder.py"), "_jaxcache_probe_recorder.py"),
            (os.path.join(here, "document.py"), "_jaxcache_probe_document.py"),
            (os.path.join(here, "logtap.py"), "_jaxcache_probe_logtap.py"),
            (jaxgate.VERSIONS_PY, "_jaxcache_versions.py"),
            (os.path.join(here, "launchers.py"),
             "_jaxcache_launchers.py")]


def _probe_dir() -> str:
    path = _mkdtemp("jaxcache-probe-")  # 0700, ours
    cached = os.path.join(path, "__pycache__")
    os.mkdir(cached, 0o700)
    for source, name in probe_files():
        copy = os.path.join(path, name)
        with open(source, "rb") as f:
            _write_new(copy, f.read())
            st = os.fstat(f.fileno())
        os.utime(copy, ns=(st.st_mtime_ns, st.st_mtime_ns))
        _copy_compiled(source, os.path.join(cached, name[:-3]))
    return path


def _copy_compiled(source: str, stem: str) -> None:
    """The installed bytecode of `source`, if any, beside its copy: every process of the job
    loads sitecustomize, and compiling it costs each ~3 ms. The copy keeps the source's mtime,
    so the job's Python checks this bytecode against its source as it checks any (a stale or
    another version's is compiled afresh, never trusted blindly); it is jaxcache's own file,
    as trusted as the source beside it."""
    tag = sys.implementation.cache_tag
    if tag is None:
        return
    head, tail = os.path.split(source)
    try:
        with open(os.path.join(head, "__pycache__", f"{tail[:-3]}.{tag}.pyc"), "rb") as f:
            data = f.read()
    except OSError:
        return
    _write_new(f"{stem}.{tag}.pyc", data)


def _open_gate(probe: str, env: dict[str, str] | None) -> None:
    """Tell the job's probes: set these variables and go on (env), or stop (None)."""
    import json

    tmp = os.path.join(probe, ".gate.tmp")
    _write_new(tmp, json.dumps({"ok": env is not None, "env": env or {}}).encode())
    os.rename(tmp, os.path.join(probe, GATE_FILE))


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
           interactive: bool = True, admit: Callable[[], dict[str, str]] | None = None
           ) -> Ran:
    """Run argv with the probe; returns when the program has ended, however it ended:
    pid, status (as os.wait4 gives it), usage, wall_s, timed_out, probes (main one first).

    interactive: the job shares our terminal, Ctrl-C goes to it and we stay to write the
    record (jaxcache run). Otherwise (jaxcache bench) the job runs in its own session, and
    Ctrl-C or `timeout` seconds kill its whole process group; KeyboardInterrupt propagates.
    """
    if not argv:
        raise JaxcacheError("no command given: jaxcache run [OPTIONS] -- CMD [ARGS...]")
    exe = resolve(argv)
    probe = _probe_dir()
    try:
        child_env = dict(env)
        child_env[jobenv.PROBE_DIR] = probe
        old = child_env.get("PYTHONPATH")
        child_env["PYTHONPATH"] = probe + (os.pathsep + old if old else "")
        for name in jobenv.GATES:  # only this run's gate, never an inherited one (the
            child_env.pop(name, None)  # probe would wait on it)
        if admit is not None:
            child_env.pop("JAX_COMPILATION_CACHE_DIR", None)  # only through the gate
            for name in jobenv.PER_RUN:
                child_env.pop(name, None)
            child_env[jobenv.GATE] = os.path.join(probe, GATE_FILE)
            child_env[jobenv.GATE_PID] = str(os.getpid())
        handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGQUIT)}
        actions = [(os.POSIX_SPAWN_DUP2, f if isinstance(f, int) else f.fileno(), target)
                   for f, target in ((stdout, 1), (stderr, 2)) if f is not None]
        start = time.perf_counter()
        try:
            pid = os.posix_spawn(exe, [exe, *argv[1:]], child_env, file_actions=actions,
                                 setsid=not interactive)
        except OSError as exc:
            raise CommandError(f"cannot run {safe(argv[0])}: {exc.strerror}", 126) from None
        if admit is not None:
            try:
                granted = admit()
            except BaseException:
                _open_gate(probe, None)
                (os.kill if interactive else _kill_group)(pid, signal.SIGKILL)
                os.wait4(pid, 0)
                raise
            _open_gate(probe, granted)
        status, usage, timed_out = _wait(pid, timeout, interactive, handlers)
        wall = time.perf_counter() - start
        if not interactive:
            _end_group(pid)  # leftovers of the job (daemons it started) go with it
        return Ran(pid, status, usage, wall, timed_out, _collect(probe, pid))
    finally:
        _remove_tree(probe)


GRACE_S = 10.0  # after SIGTERM, before SIGKILL: time for a launcher to cancel its ranks


def _wait(pid: int, timeout: float | None, interactive: bool,
          handlers: dict[signal.Signals, Handler]) -> tuple[int, struct_rusage, bool]:
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
    if interactive:  # Ctrl-C reaches the child through the terminal; we stay for the record
        for s in handlers:
            signal.signal(s, lambda *_: None)
    forward = signal.signal(signal.SIGTERM, lambda s, _f: os.kill(pid, s))
    try:
        while True:
            try:
                _, status, usage = os.wait4(pid, 0)
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
                _end_group(pid)
                raise
    finally:
        for t in timers:
            t.cancel()
        if interactive:
            for s, h in handlers.items():
                signal.signal(s, h)
        signal.signal(signal.SIGTERM, forward)
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


def _collect(directory: str, main_pid: int) -> tuple[dict[str, Any], ...]:
    """The probe documents the job's processes left (a process killed mid-write leaves a
    torn one: skipped)."""
    from jaxcache import validate

    docs: list[dict[str, Any]] = []
    for name in sorted(os.listdir(directory)):
        if not (name.startswith("probe-") and name.endswith(".json")):
            continue
        try:
            with open(os.path.join(directory, name), "rb") as f:
                doc = validate.parse_json(f.read())
        except (OSError, validate.Unreadable):
            continue
        if isinstance(doc, dict):
            docs.append(doc)
    docs.sort(key=lambda d: (d.get("pid") != main_pid, d.get("started", 0)))
    return tuple(docs)
