"""The file system's clock: the time the kernel stamps files with, read off a file made now.

The age of a file another process wrote (a rival publisher's signature, a publisher's temporary
file, a stale marker) is the kernel's stamp on it against the kernel's time now, never against
this process's clock: a host whose clock is a day ahead (or a process under libfaketime) would
otherwise take a publish in progress for a dead one and replace or delete it, and one a day
behind would never see an orphan age. Found by the fault campaign's clock tests (issue 42).
"""

from __future__ import annotations

import os
import time


def now_ns(dir_fd: int) -> int:
    """Nanoseconds since the epoch as the file system of `dir_fd` stamps a file made now: an
    unnamed O_TMPFILE there (never in the listing, gone at close). Where the file system has
    none or refuses it (NFS, a read-only directory), this process's clock."""
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag:
        return time.time_ns()
    try:
        fd = os.open(".", flag | os.O_WRONLY | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    except OSError:
        return time.time_ns()
    try:
        return os.fstat(fd).st_mtime_ns
    finally:
        os.close(fd)
