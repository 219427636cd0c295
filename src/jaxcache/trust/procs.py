"""Other processes on this machine that use a cache directory.

A process counts when its cwd or an open descriptor is inside the directory, or its environment
names it in JAX_COMPILATION_CACHE_DIR. Other users' processes are only visible to root (or with
ptrace rights); the ones we could not inspect are counted, not guessed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

ENV_NAME = b"JAX_COMPILATION_CACHE_DIR="


@dataclass(frozen=True)
class ProcessUse:
    pid: int
    uid: int
    user: str
    command: str
    how: str  # cwd | open file | JAX_COMPILATION_CACHE_DIR


@dataclass(frozen=True)
class ProcessScan:
    uses: tuple[ProcessUse, ...]
    uninspected: int  # processes whose cwd, fds or environment we were not allowed to read


def _inside(target: str, path: str) -> bool:
    return target == path or target.startswith(path.rstrip("/") + "/")


@dataclass(frozen=True)
class Process:
    """One process as /proc/PID/status names it: its uids are the kernel's, not the owner of
    /proc/PID, which is root for a process that made itself non-dumpable."""

    pid: int
    base: str  # /proc/PID
    uids: tuple[int, ...]  # real, effective, saved, filesystem
    command: str

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


def processes(*, skip_pid: int | None = None, skip_uids: frozenset[int] = frozenset()):
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


def scan(path: str, user_name, *, skip_pid: int | None = None) -> ProcessScan:
    """Look through /proc for processes touching `path` (an absolute, resolved path)."""
    uses: list[ProcessUse] = []
    uninspected = 0
    for proc in processes(skip_pid=skip_pid):
        found, denied = _probe(proc.base, path)
        uninspected += denied
        uses.extend(ProcessUse(proc.pid, proc.uid, user_name(proc.uid), proc.command, how)
                    for how in found)
    return ProcessScan(tuple(uses), uninspected)


def _probe(base: str, path: str) -> tuple[list[str], int]:
    found: list[str] = []
    denied = 0
    try:
        if _inside(os.readlink(f"{base}/cwd"), path):
            found.append("cwd")
    except PermissionError:
        denied = 1
    except OSError:
        pass
    try:
        for fd in os.listdir(f"{base}/fd"):
            try:
                if _inside(os.readlink(f"{base}/fd/{fd}"), path):
                    found.append("open file")
                    break
            except OSError:
                continue
    except PermissionError:
        denied = 1
    except OSError:
        pass
    try:
        with open(f"{base}/environ", "rb") as f:
            for item in f.read().split(b"\0"):
                if item.startswith(ENV_NAME):
                    value = os.fsdecode(item[len(ENV_NAME):])
                    if os.path.isabs(value) and _inside(os.path.normpath(value), path):
                        found.append("JAX_COMPILATION_CACHE_DIR")
    except PermissionError:
        denied = 1
    except OSError:
        pass
    return found, denied
