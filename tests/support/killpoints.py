"""Kill a writer at a chosen step, deterministically: the fault campaign's tracing hook.

A trial runs a light writer (a Python snippet that drives jaxcache's own publish, append and
delete code, no JAX) in its own process, with every filesystem call that can change what a
reader sees counted as a step: os.open, write, pwrite, fsync, fdatasync, rename, replace,
link, unlink, ftruncate, mkdir, symlink and the builtin open. With `kill_at=k` the process
SIGKILLs itself just before its k-th step, so the state left behind is exactly what steps
1..k-1 made: no sleep decides where the kill lands. A clean run (kill_at=0) says how many
steps the writer takes; killing before each of them in turn covers every prefix of its work.

The snippet may print lines to stdout (flushed): what the writer acknowledged before the
kill (a ledger line written, a record saved), which the checks then hold it to.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from support.paths import SRC

STEPS = ("open", "write", "pwrite", "fsync", "fdatasync", "rename", "replace", "link",
         "unlink", "ftruncate", "mkdir", "symlink")

_BOOT = r"""
import builtins, errno, os, signal, sys
_spec, _count, _out, _fault = sys.argv[1], [0], sys.argv[2], sys.argv[3]
_only, _, _n = _spec.rpartition(":")
_at, _calls, _fired = int(_n), {}, [False]
_kill, _getpid, _real_open, _write, _close = os.kill, os.getpid, os.open, os.write, os.close
def _full(name, args, kwargs):
    # what a full disk refuses: new bytes, new names; reading, renaming, removing still work
    if name in ("rename", "replace", "unlink", "ftruncate"):
        return False
    if name == "open" and len(args) > 1 and isinstance(args[1], int):  # os.open's flags
        return bool(args[1] & os.O_CREAT)
    if name == "open":
        mode = args[1] if len(args) > 1 else kwargs.get("mode", "r")
        return isinstance(mode, str) and any(c in mode for c in "wax+")
    return True
def _step(name, args, kwargs):
    _count[0] += 1
    _calls[name] = _calls.get(name, 0) + 1
    if (_calls[name] if _only else _count[0]) == _at and _only in ("", name):
        _fired[0] = True
        if _fault == "kill":
            _kill(_getpid(), signal.SIGKILL)
    if _fired[0] and (_fault == "EIO" or _fault == "ENOSPC" and _full(name, args, kwargs)):
        code = getattr(errno, _fault)
        named = args[:1] if args and isinstance(args[0], (str, bytes, os.PathLike)) else ()
        raise OSError(code, os.strerror(code), *named)  # as the kernel's, with the path
def _counted(real, name):
    def step(*args, **kwargs):
        _step(name, args, kwargs)
        return real(*args, **kwargs)
    return step
for _name in STEPS:
    if hasattr(os, _name):
        setattr(os, _name, _counted(getattr(os, _name), _name))
builtins.open = _counted(builtins.open, "open")
import atexit
def _report():
    fd = _real_open(_out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    _write(fd, f"{_count[0]} {int(_fired[0])}".encode())
    _close(fd)
atexit.register(_report)
_real_exit = os._exit
def _exit(code):  # a writer that leaves through os._exit (as `jaxcache run` does) reports too
    _report()
    _real_exit(code)
os._exit = _exit
sys.argv = sys.argv[4:]
exec(compile(sys.argv[0], "<writer>", "exec"), {"__name__": "__main__"})
""".replace("STEPS", repr(STEPS))


class Trial:
    """One run of a writer: how it ended, what it acknowledged, how many steps it took."""

    def __init__(self, returncode: int | None, stdout: str, stderr: str,
                 steps: int | None, fired: bool = False) -> None:
        self.returncode = returncode  # None: it hung (neither finished nor was killed)
        self.stdout, self.stderr = stdout, stderr
        self.steps = steps  # None when killed (it never reached its end)
        self._fired = fired  # an I/O error was injected (a kill shows as the signal)

    @property
    def hung(self) -> bool:
        return self.returncode is None

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL

    @property
    def faulted(self) -> bool:
        """The fault was injected: killed, or the chosen step (and those after) failed."""
        return self.killed or self._fired

    @property
    def acknowledged(self) -> list[str]:
        return self.stdout.splitlines()


def run(writer: str, kill_at: int | str, workdir: Path, *args: str,
        env: dict[str, str] | None = None, timeout: float = 120, fault: str = "kill") -> Trial:
    """Run `writer` (Python source; sys.argv[1:] are `args`) and kill it before step `kill_at`
    (0: never; "unlink:2": before its second os.unlink, a schedule that names the very step
    whatever else the writer does first). A writer that neither finishes nor is killed
    within `timeout` is killed and comes back hung (a generous bound: a trial takes well
    under a second).

    With `fault` "EIO" or "ENOSPC" the step fails instead, and so does every step after it as
    that disk would fail them: EIO every call (a dead device), ENOSPC what needs new space
    (writes, fsyncs, creating opens, mkdir, link, symlink), not renames, removals or reads
    (a full disk). SQLite's I/O-error tests inject errors the same way."""
    out = workdir / f".steps-{os.getpid()}-{str(kill_at).replace(':', '-')}"
    with_src = {**(env or os.environ), "PYTHONPATH": str(SRC)}
    try:
        proc = subprocess.run([sys.executable, "-c", _BOOT, str(kill_at), str(out), fault,
                               writer, *args], capture_output=True, text=True, env=with_src,
                              timeout=timeout)
    except subprocess.TimeoutExpired as exc:  # killed by run(), counted as a hang
        return Trial(None, str(exc.stdout or ""), str(exc.stderr or ""), None)
    steps, fired = None, False
    if out.exists():
        counted, flag = out.read_text().split()
        steps, fired = int(counted), flag == "1"
        out.unlink()
    return Trial(proc.returncode, proc.stdout, proc.stderr, steps, fired)


def count(writer: str, workdir: Path, *args: str, env: dict[str, str] | None = None,
          codes: tuple[int, ...] = (0,)) -> int:
    """The steps of a clean run (which must end with one of `codes`)."""
    t = run(writer, 0, workdir, *args, env=env)
    assert t.returncode in codes and t.steps, t.stderr[-3000:]
    return t.steps
