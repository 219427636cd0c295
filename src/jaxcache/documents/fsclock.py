"""The file system's clock: the time the kernel stamps files with, read off a file made now.

The age of a file another process wrote (a rival publisher's signature, a publisher's temporary
file, a stale marker) is the kernel's stamp on it against the kernel's time now, never against
this process's clock: a host whose clock is a day ahead (or a process under libfaketime) would
otherwise take a publish in progress for a dead one and replace or delete it, and one a day
behind would never see an orphan age. Found by the fault campaign's clock tests (issue 42).
"""

from __future__ import annotations

import contextlib
import os
import time

from jaxcache.documents.synced import temporary


def now_ns(dir_fd: int) -> int:
    """Nanoseconds since the epoch as the file system of `dir_fd` stamps a file made now: an
    unnamed O_TMPFILE there (never in the listing, gone at close); where the file system has
    none (NFS, most FUSE file systems: there the server's clock stamps files), a publisher's
    temporary file made and removed at once (named as gc and verify know it); where neither
    can be made (a read-only directory), this process's clock."""
    flag = getattr(os, "O_TMPFILE", 0)
    if flag:
        try:
            fd = os.open(".", flag | os.O_WRONLY | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
        except OSError:
            pass
        else:
            try:
                return os.fstat(fd).st_mtime_ns
            finally:
                os.close(fd)
    name = temporary()
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600, dir_fd=dir_fd)
    except OSError:
        return time.time_ns()
    try:
        return os.fstat(fd).st_mtime_ns
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dir_fd)
