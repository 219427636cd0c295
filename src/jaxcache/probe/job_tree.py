"""The job as a process tree jaxcache may have to stop (launch.py: a failure of its own while
the job runs, or an interrupt): every process of the job still in its tree, not only its
first, since by then the job may have started helpers.
Standard library only (os, signal): every job's start-up waits for this module's import.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
else:  # the C module: signal's enums cost every run ~0.5 ms
    import _signal as signal


class Job:
    """The job's first process, until reaped: stopped (with what it started) at most once,
    never after it was reaped (its pid could name another process by then)."""

    __slots__ = ("interactive", "pid", "reaped")

    def __init__(self, pid: int, interactive: bool) -> None:
        self.pid, self.interactive, self.reaped = pid, interactive, False

    def stop(self) -> None:
        """SIGKILL the job's tree (and its process group, when it has its own), then reap its
        first process."""
        if self.reaped:
            return
        _kill_tree(self.pid)
        if not self.interactive:
            try:  # noqa: SIM105 (contextlib's import costs every `jaxcache run` ~0.5 ms)
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        os.wait4(self.pid, 0)
        self.reaped = True


def descendants(pid: int) -> list[int]:
    """The processes below `pid` in the process tree now (by /proc's parent ids)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read(4096)
            parent = int(data.rsplit(b")", 1)[1].split()[1])  # the name may hold ')'
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        children.setdefault(parent, []).append(int(name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _kill_tree(pid: int) -> None:
    """Stop the tree first (no process of it forks meanwhile, none is reparented away by its
    parent's death), look again for what was started before the stop, then kill them all.
    Each pass reads the tree before it signals the first process (once that is killed, what
    it started is handed to init and drops out of the tree), and every process the first pass
    stopped is killed (never left stopped); the first process is stopped and killed whatever
    else fails (no descriptor left to read /proc with, say)."""
    stopped: list[int] = []
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        try:
            others = descendants(pid)
        except OSError:
            others = []
        os.kill(pid, sig)  # not reaped yet: it is there, a zombie at worst
        for each in dict.fromkeys([*stopped, *others]) if sig == signal.SIGKILL else others:
            try:  # noqa: SIM105
                os.kill(each, sig)
            except (ProcessLookupError, PermissionError):
                pass
        stopped = others
