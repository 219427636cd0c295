"""LRU eviction under `jax_compilation_cache_max_size`, for the tiers jaxcache writes.

Like JAX's LRUCache: an entry larger than the limit is not stored (with a warning), and
before a write the least recently used entries go until the new one fits. Unlike it, only
entries jaxcache wrote count and are ever deleted: each has a `.used` marker that jaxcache
created beside it (its mtime is the last use; its text binds it to the entry's inode), and
the entry must still be that file, owned by this user. An entry goes first, then its
signature, then its marker, so no reader ever sees an entry without its signature.
All of it runs under an flock on the writing account's own lock of the tier, kept in its
state folder (locks.py), as JAX locks `.lockfile`: what it guards is that account's alone.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass

from jaxcache.documents import fsclock
from jaxcache.seal.publishing import locks
from jaxcache.seal.publishing import tier_names as names
from jaxcache.text import safe

LOCK_TIMEOUT_S = 10.0  # as JAX's lock_timeout_secs
ORPHAN_AGE_S = 60.0  # a sidecar without its entry is removed only when this old
_MARK = "jaxcache.used/1"
# A marker's stamp is the kernel's (a process's clock may be a day off), refined by the
# process's own clock when that lies within this much after it: filesystems without
# fine-grained stamps (ramfs, FUSE, older kernels) give a whole tick (4-10 ms), so a hit and
# another entry's write in one tick would tie and evict in name order, not use order.
_REFINE_NS = 50_000_000


class LockTimeout(OSError):
    """Another process held the tier's lock for too long: nothing is written."""


@dataclass(frozen=True, slots=True)
class Owned:
    """An entry jaxcache wrote, as the eviction sees it."""

    used_ns: int
    entry: str
    size: int


def marker_text(st: os.stat_result) -> bytes:
    return f"{_MARK} {st.st_ino} {st.st_size}\n".encode()


def mark(dir_fd: int, entry: str, name_max: int) -> None:
    """Record that jaxcache wrote `entry` (just linked): its marker, created or replacing an
    orphan marker of ours; someone else's file of that name is left alone."""
    st = os.stat(entry, dir_fd=dir_fd, follow_symlinks=False)
    used = names.sidecar(entry, names.USED, name_max)
    old = _lstat(dir_fd, used)
    if old is not None and (old.st_uid != os.geteuid() or not stat.S_ISREG(old.st_mode)):
        return
    tmp = names.temporary()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o644, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(marker_text(st))
            f.flush()
            _refine(f.fileno())
        os.replace(tmp, used, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)


def touch(dir_fd: int, entry: str, name_max: int) -> None:
    """A hit: the entry is now the most recently used (only a marker we own can change),
    stamped by the kernel (UTIME_NOW) and refined as a new marker is: ages compare one clock."""
    used = names.sidecar(entry, names.USED, name_max)
    with contextlib.suppress(OSError):
        os.utime(used, dir_fd=dir_fd, follow_symlinks=False)
        _refine(used, dir_fd)


def _refine(target: int | str, dir_fd: int | None = None) -> None:
    """Within the kernel's tick, order by the process's clock (see _REFINE_NS); a clock
    outside that window is not believed and the kernel's stamp stays. `target`: an open
    file, or a name in `dir_fd` (never followed)."""
    if isinstance(target, int):
        kernel = os.fstat(target).st_mtime_ns
    else:
        kernel = os.stat(target, dir_fd=dir_fd, follow_symlinks=False).st_mtime_ns
    mine = time.time_ns()
    if not kernel < mine <= kernel + _REFINE_NS:
        return
    if isinstance(target, int):
        os.utime(target, ns=(mine, mine))
    else:
        os.utime(target, ns=(mine, mine), dir_fd=dir_fd, follow_symlinks=False)


@contextlib.contextmanager
def locked(dir_fd: int) -> Iterator[None]:
    """Exclusive across this account's processes (flock on its lock of this tier, in its state
    folder, never followed: locks.LockRefused when that folder or name is not its own)."""
    fd = locks.hold(dir_fd)
    try:
        if not locks.flock_within(fd, LOCK_TIMEOUT_S):
            raise LockTimeout(f"{safe(locks.path_of(dir_fd))} held by another process "
                              f"for {LOCK_TIMEOUT_S:.0f} s")
        yield
    finally:
        os.close(fd)  # releases the lock


def owned(dir_fd: int, name_max: int) -> list[Owned]:
    """Every entry of this tier jaxcache wrote and may delete; removes stale orphan
    sidecars of ours (left by a writer or evictor that died) on the way."""
    found = []
    now = fsclock.now_ns(dir_fd) / 1e9  # markers' ages by the kernel's clock, as it stamps them
    for name in os.listdir(dir_fd):
        entry = names.entry_of_sidecar(name, names.USED)
        if entry is None or names.sidecar(entry, names.USED, name_max) != name:
            continue
        used = _mine(dir_fd, name)
        if used is None:
            continue
        st = _lstat(dir_fd, entry)
        if st is None:
            if now - used.st_mtime > ORPHAN_AGE_S:
                _remove_sidecars(dir_fd, entry, name_max, now)
            continue
        if _is_ours(dir_fd, name, st):
            found.append(Owned(used.st_mtime_ns, entry, st.st_size))
    return found


def evict(dir_fd: int, limit: int, incoming: int, name_max: int) -> list[str]:
    """Delete least recently used entries of ours until they and `incoming` bytes fit in
    `limit`; returns the entries deleted. Call it under `locked`."""
    heap = [(o.used_ns, o.entry, o.size) for o in owned(dir_fd, name_max)]
    heapq.heapify(heap)
    total = sum(size for _, _, size in heap)
    gone = []
    while heap and total > limit - incoming:
        _, entry, size = heapq.heappop(heap)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(entry, dir_fd=dir_fd)
        _remove_sidecars(dir_fd, entry, name_max, None)
        total -= size
        gone.append(entry)
    return gone


def _remove_sidecars(dir_fd: int, entry: str, name_max: int, now: float | None) -> None:
    """The signature, then the marker, of an entry that is gone: only files of ours, and
    (now given) only old ones, so a writer between its two links keeps its signature."""
    for suffix in (names.SIGNATURE, names.USED):
        name = names.sidecar(entry, suffix, name_max)
        st = _mine(dir_fd, name)
        if st is None or (now is not None and now - st.st_mtime <= ORPHAN_AGE_S):
            continue
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dir_fd)


def _is_ours(dir_fd: int, used: str, st: os.stat_result) -> bool:
    """The entry is the very file jaxcache wrote: our marker names its inode and size."""
    if st.st_uid != os.geteuid() or not stat.S_ISREG(st.st_mode):
        return False
    try:
        fd = os.open(used, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                     dir_fd=dir_fd)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        text = f.read(128)
    return text == marker_text(st)


def _mine(dir_fd: int, name: str) -> os.stat_result | None:
    st = _lstat(dir_fd, name)
    if st is None or st.st_uid != os.geteuid() or not stat.S_ISREG(st.st_mode):
        return None
    return st


def _lstat(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
