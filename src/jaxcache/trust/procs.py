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


def processes(*, skip_pid: int | None = None):
    """Every process we can see but ourselves (an iterator: /proc changes as we read it)."""
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
            with open(f"{base}/status", "rb") as f:
                status = f.read(4096)
        except OSError:
            continue  # the process ended
        name, uids = "", ()
        for line in status.split(b"\n"):
            if line.startswith(b"Name:"):
                name = line[5:].strip().decode("utf-8", "replace")
            elif line.startswith(b"Uid:"):
                try:
                    uids = tuple(int(u) for u in line[4:].split())
                except ValueError:
                    uids = ()
                break  # Uid follows Name
        yield Process(pid, base, uids or (-1,), name)


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
