"""Adding lines to the origin ledger's very file (trust/provenance/ledger_file.py is its format):
who may (appendable()), in one write each, under the file's lock, so that gc's compaction
(gc/compaction.py), which replaces the file by a rename, loses no line: appenders take the lock
shared, the compaction exclusive, and an appender that waited on a replaced file opens the new one
(hold()). The witness (lifecycle/witness.py) appends as JAX writes; relearn() appends what an audit
found yours by its bytes.
"""

from __future__ import annotations

import os
import stat
import time

from jaxcache.trust.provenance import birth
from jaxcache.trust.provenance.ledger_file import Ledger, Written, line
from jaxcache.trust.provenance.ledger_place import MAX_BYTES


def appendable(st: os.stat_result) -> bool:
    """May lines be added to the ledger file with this status: a regular file of yours with one
    link that no one else can write (what the reader will accept as a trusted input)?"""
    return (stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and st.st_nlink == 1
            and not st.st_mode & 0o022)


LOCK_WAIT_S = 30.0  # compaction holds it to re-read what was appended and write the new file


def hold(fd: int, dfd: int, name: str, exclusive: bool = False,
         wait_s: float = LOCK_WAIT_S) -> bool | None:
    """Lock the ledger open as `fd` (shared to append, `exclusive` to compact: gc/ledger.py),
    then check that `name` in the folder `dfd` still is that very file. Compaction replaces the
    file by a rename, so an appender that waited on the old file must open the new one: None
    then (open again). False when the lock was not had within `wait_s` (a line not added only
    leaves an entry of unknown origin: fail closed). Closing `fd` releases the lock."""
    import fcntl

    op = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
    deadline = time.monotonic() + wait_s
    pause = 0.002
    while True:
        try:
            fcntl.flock(fd, op)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
    try:
        now = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    st = os.fstat(fd)
    return True if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino) else None


def write_lines(fd: int, st: os.stat_result, data: bytes) -> bool:
    """Add `data` (whole lines) to the ledger open as `fd` (O_APPEND), in one write so that
    lines stay whole; False where it would pass the size a reader accepts (then those entries
    stay of unknown origin, failing closed)."""
    if st.st_size + len(data) > MAX_BYTES:
        return False
    return os.write(fd, data) == len(data)


_APPEND = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def relearn(ledger: Ledger, lines: tuple[Written, ...]) -> bool:
    """Append `lines` to the very ledger file `ledger` was read from (same device, inode and
    birth time, appendable()), reached by the fd walk and never through a link; False when
    that file is not there any more or cannot be written (the entries are hashed again next
    time)."""
    if ledger.identity is None or ledger.problem or not lines:
        return False
    from jaxcache.errors import JaxcacheError
    from jaxcache.trust.kernel.walk import walk_open

    parent, name = os.path.split(os.path.abspath(ledger.path))
    try:
        w, dfd = walk_open(parent)
    except (OSError, JaxcacheError):
        return False
    fd = -1
    try:
        if w.missing or w.blocked:
            return False
        fd = os.open(name, _APPEND, dir_fd=dfd)
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino, birth.of_fd(fd)) != ledger.identity or not appendable(st):
            return False
        # compacted meanwhile (the file read is not the ledger any more) or being compacted:
        # nothing is added, these entries are hashed again next time
        if not hold(fd, dfd, name, wait_s=1.0):
            return False
        return write_lines(fd, os.fstat(fd), b"".join(line(w) for w in lines))
    except OSError:
        return False
    finally:
        if fd >= 0:
            os.close(fd)
        os.close(dfd)
