"""The process table as /proc shows it, read cheaply: who runs each process.

Shared by cache_users.py (who uses a cache) and open_handles.py (who holds a write handle on it);
read with os.read, not open(), because `jaxcache run` waits for it before the job gets its cache.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator


class Process:
    """One process as /proc/PID/status names it: its uids are the kernel's, not the owner of
    the files under /proc/PID, which is root for a process that made itself non-dumpable.
    (A plain class, not a dataclass: building one costs ~1.5 ms of `jaxcache run` start-up.)"""

    __slots__ = ("pid", "base", "uids", "command")

    def __init__(self, pid: int, base: str, uids: tuple[int, ...], command: str) -> None:
        self.pid, self.base, self.command = pid, base, command
        self.uids = uids  # real, effective, saved, filesystem

    def __repr__(self) -> str:
        return f"Process({self.pid}, uids={self.uids}, {self.command!r})"

    @property
    def uid(self) -> int:
        """The uid to judge it by: the first that is not root (else root)."""
        return next((u for u in self.uids if u != 0), 0)


def read(path: str, limit: int = 1 << 26) -> bytes:
    """A /proc file, whole (up to `limit`), by os.read: a buffered file object costs 7x more."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if limit <= 4096:
            return os.read(fd, limit)  # one page: a status or fdinfo file, in one read
        chunks = []
        size = 0
        while size < limit:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def processes(*, skip_pid: int | None = None, skip_uids: frozenset[int] = frozenset()
              ) -> Iterator[Process]:
    """Every process we can see but ourselves and those all of whose uids are in skip_uids
    (an iterator: /proc changes as we read it)."""
    skip = os.getpid() if skip_pid is None else skip_pid
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return
    for pid in pids:
        if pid == skip:
            continue
        base = f"/proc/{pid}"
        try:
            status = read(f"{base}/status", 4096)
        except OSError:
            continue  # the process ended
        at = status.find(b"\nUid:")
        try:
            uids = tuple(int(u) for u in status[at + 5:status.find(b"\n", at + 1)].split())
        except ValueError:
            uids = ()
        if at < 0 or len(uids) != 4:
            uids = (-1,)  # unreadable: judged as nobody we trust
        elif skip_uids.issuperset(uids):
            continue
        name = status[5:status.find(b"\n")].strip().decode("utf-8", "replace")  # "Name:" first
        yield Process(pid, base, uids, name)
