"""Run a program unmodified with the probe injected, and measure it from outside.

The probe travels as `sitecustomize.py` in a private temporary directory put first on
PYTHONPATH; the runner waits with wait4() for the child's own CPU times and peak RSS, keeps the
terminal's Ctrl-C for the child, and always collects what the probe wrote, even after a crash.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
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


def _probe_dir() -> str:
    path = tempfile.mkdtemp(prefix="jaxcache-probe-")  # 0700, ours
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
    found = shutil.which(exe)
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
        start = time.perf_counter()
        try:
            proc = subprocess.Popen([exe, *argv[1:]], env=child_env, close_fds=True,
                                    stdout=stdout, stderr=stderr,
                                    start_new_session=not interactive)
        except OSError as exc:
            raise CommandError(f"cannot run {safe(argv[0])}: {exc.strerror}", 126) from None
        timer = None
        expired = threading.Event()
        if timeout is not None:
            def expire() -> None:
                expired.set()
                _kill_group(proc.pid)

            timer = threading.Timer(timeout, expire)
            timer.daemon = True
            timer.start()
        if interactive:  # Ctrl-C reaches the child through the terminal; we stay for the record
            for s in handlers:
                signal.signal(s, lambda *_: None)
        forward = signal.signal(signal.SIGTERM, lambda s, _f: proc.send_signal(s))
        try:
            while True:
                try:
                    _, status, usage = os.wait4(proc.pid, 0)
                    break
                except InterruptedError:
                    continue
                except KeyboardInterrupt:
                    _kill_group(proc.pid)
                    os.wait4(proc.pid, 0)
                    proc.returncode = -9
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
            _kill_group(proc.pid)  # leftovers of the job (daemons it started) go with it
        proc.returncode = 0  # reaped by wait4; keep Popen from waiting again
        code = os.waitstatus_to_exitcode(status)
        probes = _collect(probe, proc.pid)
        return Outcome(tuple(argv), proc.pid, code if code >= 0 else None,
                       -code if code < 0 else None, wall, usage.ru_utime, usage.ru_stime,
                       usage.ru_maxrss * 1024, probes, expired.is_set())
    finally:
        shutil.rmtree(probe, ignore_errors=True)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _collect(directory: str, main_pid: int) -> tuple[dict, ...]:
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
