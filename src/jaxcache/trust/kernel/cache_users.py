"""Other processes on this machine that use a cache directory.

A process counts when its cwd or an open descriptor is inside the directory, or its environment
names it in JAX_COMPILATION_CACHE_DIR. Other users' processes are only visible to root (or with
ptrace rights); the ones we could not inspect are counted, not guessed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from jaxcache.trust.kernel.process_table import processes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

ENV_NAME = b"JAX_COMPILATION_CACHE_DIR="


@dataclass(frozen=True, slots=True)
class ProcessUse:
    pid: int
    uid: int
    user: str
    command: str
    how: str  # cwd | open file | JAX_COMPILATION_CACHE_DIR


@dataclass(frozen=True, slots=True)
class ProcessScan:
    uses: tuple[ProcessUse, ...]
    uninspected: int  # processes whose cwd, fds or environment we were not allowed to read
    denied: tuple[tuple[int, str], ...] = ()  # (pid, user) of each of those


def _inside(target: str, path: str) -> bool:
    return target == path or target.startswith(path.rstrip("/") + "/")


def scan(path: str, user_name: Callable[[int], str], *, skip_pid: int | None = None) -> ProcessScan:
    """Look through /proc for processes touching `path` (an absolute, resolved path)."""
    uses: list[ProcessUse] = []
    uninspected = 0
    refused: list[tuple[int, str]] = []
    for proc in processes(skip_pid=skip_pid):
        found, denied = _probe(proc.base, path)
        uninspected += denied
        if denied:
            refused.append((proc.pid, user_name(proc.uid)))
        uses.extend(ProcessUse(proc.pid, proc.uid, user_name(proc.uid), proc.command, how)
                    for how in found)
    return ProcessScan(tuple(uses), uninspected, tuple(refused))


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
