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
import builtins, os, signal, sys
_spec, _count, _out = sys.argv[1], [0], sys.argv[2]
_only, _, _n = _spec.rpartition(":")
_at, _calls = int(_n), {}
_kill, _getpid, _real_open, _write, _close = os.kill, os.getpid, os.open, os.write, os.close
def _step(name):
    _count[0] += 1
    _calls[name] = _calls.get(name, 0) + 1
    if (_calls[name] if _only else _count[0]) == _at and _only in ("", name):
        _kill(_getpid(), signal.SIGKILL)
def _counted(real, name):
    def step(*args, **kwargs):
        _step(name)
        return real(*args, **kwargs)
    return step
for _name in STEPS:
    if hasattr(os, _name):
        setattr(os, _name, _counted(getattr(os, _name), _name))
builtins.open = _counted(builtins.open, "open")
import atexit
def _report():
    fd = _real_open(_out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    _write(fd, str(_count[0]).encode())
    _close(fd)
atexit.register(_report)
sys.argv = sys.argv[3:]
exec(compile(sys.argv[0], "<writer>", "exec"), {"__name__": "__main__"})
""".replace("STEPS", repr(STEPS))


class Trial:
    """One run of a writer: how it ended, what it acknowledged, how many steps it took."""

    def __init__(self, returncode: int | None, stdout: str, stderr: str,
                 steps: int | None) -> None:
        self.returncode = returncode  # None: it hung (neither finished nor was killed)
        self.stdout, self.stderr = stdout, stderr
        self.steps = steps  # None when killed (it never reached its end)

    @property
    def hung(self) -> bool:
        return self.returncode is None

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL

    @property
    def acknowledged(self) -> list[str]:
        return self.stdout.splitlines()


def run(writer: str, kill_at: int | str, workdir: Path, *args: str,
        env: dict[str, str] | None = None, timeout: float = 120) -> Trial:
    """Run `writer` (Python source; sys.argv[1:] are `args`) and kill it before step `kill_at`
    (0: never; "unlink:2": before its second os.unlink, a schedule that names the very step
    whatever else the writer does first). A writer that neither finishes nor is killed
    within `timeout` is killed and comes back hung (a generous bound: a trial takes well
    under a second)."""
    out = workdir / f".steps-{os.getpid()}-{str(kill_at).replace(':', '-')}"
    with_src = {**(env or os.environ), "PYTHONPATH": str(SRC)}
    try:
        proc = subprocess.run([sys.executable, "-c", _BOOT, str(kill_at), str(out), writer,
                               *args], capture_output=True, text=True, env=with_src,
                              timeout=timeout)
    except subprocess.TimeoutExpired as exc:  # killed by run(), counted as a hang
        return Trial(None, str(exc.stdout or ""), str(exc.stderr or ""), None)
    steps = None
    if out.exists():
        steps = int(out.read_text())
        out.unlink()
    return Trial(proc.returncode, proc.stdout, proc.stderr, steps)


def count(writer: str, workdir: Path, *args: str, env: dict[str, str] | None = None,
          codes: tuple[int, ...] = (0,)) -> int:
    """The steps of a clean run (which must end with one of `codes`)."""
    t = run(writer, 0, workdir, *args, env=env)
    assert t.returncode in codes and t.steps, t.stderr[-3000:]
    return t.steps
