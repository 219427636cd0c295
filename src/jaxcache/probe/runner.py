"""Run a program unmodified with the probe injected, and measure it from outside.

The probe travels as `sitecustomize.py` in a private temporary directory put first on
PYTHONPATH; the runner waits with wait4() for the child's own CPU times and peak RSS, keeps the
terminal's Ctrl-C for the child, and always collects what the probe wrote, even after a crash.

Everything here sits between `jaxcache run` and the start of the user's job, so it uses
os.posix_spawn and a few lines of its own instead of importing subprocess, tempfile, shutil
and threading (about 10 ms of start-up on a 2-core machine); the timer thread of `bench
--timeout` is imported only when asked for.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass

from jaxcache.display import safe
from jaxcache.errors import JaxcacheError


class CommandError(JaxcacheError):
    """The command could not be started at all."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Outcome:
    argv: tuple[str, ...]
    pid: int
    exit_code: int | None
    signal: int | None
    wall_s: float
    user_s: float
    sys_s: float
    peak_rss_bytes: int
    probes: tuple[dict, ...]  # what each probed process wrote; the main one first
    timed_out: bool = False

    @property
    def status(self) -> int:
        """The exit status a shell would report: the code, or 128 + signal."""
        return self.exit_code if self.exit_code is not None else 128 + (self.signal or 0)


def _tmp_root() -> str:
    for candidate in (os.environ.get("TMPDIR"), "/tmp", "/var/tmp", os.getcwd()):
        if candidate and os.path.isdir(candidate) and os.access(candidate, os.W_OK | os.X_OK):
            return candidate
    raise JaxcacheError("no writable temporary directory (set TMPDIR)")


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


def _which(name: str) -> str | None:
    for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(directory or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _probe_dir() -> str:
    path = _mkdtemp("jaxcache-probe-")  # 0700, ours
    with open(os.path.join(os.path.dirname(__file__), "site.py"), "rb") as f:
        source = f.read()
    fd = os.open(os.path.join(path, "sitecustomize.py"),
                 os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(source)
    return path


def _resolve(argv: list[str]) -> str:
    exe = argv[0]
    if "/" in exe:
        if not os.path.exists(exe):
            raise CommandError(f"command not found: {safe(exe)}", 127)
        if os.path.isdir(exe) or not os.access(exe, os.X_OK):
            raise CommandError(f"not executable: {safe(exe)}", 126)
        return exe
    found = _which(exe)
    if found is None:
        raise CommandError(f"command not found: {safe(exe)}", 127)
    return found


def run(argv: list[str], env: dict[str, str], *, stdout=None, stderr=None,
        timeout: float | None = None, interactive: bool = True) -> Outcome:
    """Run argv with the probe; returns when the program has ended, however it ended.

    interactive: the job shares our terminal, Ctrl-C goes to it and we stay to write the
    record (jaxcache run). Otherwise (jaxcache bench) the job runs in its own session, and
    Ctrl-C or `timeout` seconds kill its whole process group; KeyboardInterrupt propagates.
    """
    if not argv:
        raise JaxcacheError("no command given: jaxcache run [OPTIONS] -- CMD [ARGS...]")
    exe = _resolve(argv)
    probe = _probe_dir()
    try:
        child_env = dict(env)
        child_env["JAXCACHE_PROBE_DIR"] = probe
        old = child_env.get("PYTHONPATH")
        child_env["PYTHONPATH"] = probe + (os.pathsep + old if old else "")
        handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGQUIT)}
        actions = [(os.POSIX_SPAWN_DUP2, _fileno(f), target)
                   for f, target in ((stdout, 1), (stderr, 2)) if f is not None]
        start = time.perf_counter()
        try:
            pid = os.posix_spawn(exe, [exe, *argv[1:]], child_env, file_actions=actions,
                                 setsid=not interactive)
        except OSError as exc:
            raise CommandError(f"cannot run {safe(argv[0])}: {exc.strerror}", 126) from None
        timer = expired = None
        if timeout is not None:
            import threading

            expired = threading.Event()

            def expire() -> None:
                expired.set()
                _kill_group(pid)

            timer = threading.Timer(timeout, expire)
            timer.daemon = True
            timer.start()
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
                    _kill_group(pid)
                    os.wait4(pid, 0)
                    raise
        finally:
            if timer is not None:
                timer.cancel()
            if interactive:
                for s, h in handlers.items():
                    signal.signal(s, h)
            signal.signal(signal.SIGTERM, forward)
        wall = time.perf_counter() - start
        if not interactive:
            _kill_group(pid)  # leftovers of the job (daemons it started) go with it
        code = os.waitstatus_to_exitcode(status)
        probes = _collect(probe, pid)
        return Outcome(tuple(argv), pid, code if code >= 0 else None,
                       -code if code < 0 else None, wall, usage.ru_utime, usage.ru_stime,
                       usage.ru_maxrss * 1024, probes, expired is not None and expired.is_set())
    finally:
        _remove_tree(probe)


def _fileno(f) -> int:
    return f if isinstance(f, int) else f.fileno()


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _collect(directory: str, main_pid: int) -> tuple[dict, ...]:
    import json

    docs = []
    for name in sorted(os.listdir(directory)):
        if not (name.startswith("probe-") and name.endswith(".json")):
            continue
        try:
            with open(os.path.join(directory, name), encoding="utf-8") as f:
                docs.append(json.load(f))
        except (OSError, ValueError):
            continue
    docs.sort(key=lambda d: (d.get("pid") != main_pid, d.get("started", 0)))
    return tuple(docs)
