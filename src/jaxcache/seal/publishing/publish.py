"""Putting one file into a directory tier: create-only, so the first writer wins and a rival's
file stays whole, and a signature left without its entry settled by orphan_signatures.py's rule.

Every write goes to a private temporary name (O_EXCL|O_NOFOLLOW), is fsynced, then
hard-linked into place, which fails rather than replaces when the name exists; a killed writer
leaves at most a temporary file that no reader opens. The signature is linked before its entry,
and once the entry is linked the signature beside it is checked again (an evictor may have
removed it meanwhile): an entry never stays without a signature that vouches for it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable

from jaxcache.documents import fsclock
from jaxcache.documents.synced import write_synced
from jaxcache.seal.publishing import lru
from jaxcache.seal.publishing import tier_names as names
from jaxcache.seal.signing import orphan_signatures as orphans
from jaxcache.seal.signing import signature_file as sigfile

Orphan = Callable[[bytes | None, float | None], str]  # orphans.judge for one key and value


def publish(dir_fd: int, name: str, data: bytes, sig: bytes | None,
            name_max: int = names.DEFAULT_NAME_MAX, orphan: Orphan | None = None,
            locked: bool = False) -> bool:
    """Atomically add `name`, its signature first; False if the entry already existed or a
    rival's signature may still get its entry (first writer wins). A signature with no entry
    is judged by `orphan` (orphan_signatures.py) under the tier's lock (`locked`: the caller holds
    it), so no two publishers settle one signature at once: completed, replaced or left. A published
    entry also gets jaxcache's `.used` marker (lru.py)."""
    if exists(dir_fd, name):
        return False
    tmp = _write_temp(dir_fd, data)
    try:
        signame = names.sidecar(name, names.SIGNATURE, name_max)
        if sig is None or link_new(dir_fd, signame, sig):
            if not _link(dir_fd, tmp, name):
                return False
        elif orphan is None:
            return False  # a rival's signature: its entry follows
        else:
            with contextlib.nullcontext() if locked else lru.locked(dir_fd):
                if exists(dir_fd, name) or not _settle(dir_fd, signame, sig, orphan):
                    return False
                if not _link(dir_fd, tmp, name):
                    return False
        if sig is not None and not _still_signed(dir_fd, signame, sig, orphan):
            _take_back(dir_fd, name, tmp)
            return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
    with contextlib.suppress(OSError):  # without it the entry is never evicted, not unsafe
        lru.mark(dir_fd, name, name_max)
    return True


def _still_signed(dir_fd: int, signame: str, sig: bytes, orphan: Orphan | None) -> bool:
    """Once the entry is linked: does the signature beside it still vouch for these bytes?
    Between linking ours and linking the entry, a rival may have completed the entry on our
    signature and an evictor (the LRU, gc) removed both, entry first: our entry then stands
    alone, which every reader rejects and every later publisher takes for published (found by
    the fault campaign's crowd). Ours, or another valid signature of these very bytes, is fine."""
    existing, _ = _look(dir_fd, signame)
    if existing == sig:
        return True
    return existing is not None and orphan is not None and \
        orphan(existing, None) == orphans.COMPLETE


def _take_back(dir_fd: int, name: str, tmp: str) -> None:
    """Remove the entry we just linked, only while it is still our file (the temporary name's
    inode): never a rival's. A reader meanwhile misses it (its signature does not vouch for
    it), so this costs a miss, never a wrong load."""
    with contextlib.suppress(FileNotFoundError):
        if _identity(dir_fd, name) == _identity(dir_fd, tmp):
            os.unlink(name, dir_fd=dir_fd)
            os.fsync(dir_fd)


def _settle(dir_fd: int, signame: str, sig: bytes, orphan: Orphan) -> bool:
    """A signature exists and the entry does not (the tier's lock held): True when ours may
    follow it (orphan_signatures.py), after replacing it in one rename, the name never empty, only
    if it is still the very file judged (same inode, size and mtime)."""
    existing, identity = _look(dir_fd, signame)
    age = None if identity is None else \
        max(0.0, (fsclock.now_ns(dir_fd) - identity[3]) / 1e9)  # by the kernel's clock
    verdict = orphan(existing, age)
    if verdict == orphans.COMPLETE:
        return True
    if verdict != orphans.REPLACE:
        return False
    if identity is None:  # gone meanwhile: create-only again
        return link_new(dir_fd, signame, sig)
    return _swap(dir_fd, signame, sig, identity)


def _swap(dir_fd: int, name: str, data: bytes, identity: Identity) -> bool:
    """Replace `name` by `data` in one rename (the name never empty), only if it is still
    the very file judged (same inode, size and mtime): a rival's newer file is never lost."""
    ours = _write_temp(dir_fd, data)
    try:
        if _identity(dir_fd, name) != identity:
            return False  # changed since it was judged: judged again at the next write
        os.rename(ours, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        os.fsync(dir_fd)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(ours, dir_fd=dir_fd)
    return True


def put_cosignature(dir_fd: int, name: str, sig: bytes,
                    stale: Callable[[bytes | None], bool]) -> bool:
    """Create a co-signature file; where one is there already and `stale` says it is not
    this key's valid signature of the entry (junk, or one of bytes since evicted and
    republished), replace it, compare-and-swap, so no stale file holds
    the key's name forever. False when a valid one is there (or appeared meanwhile)."""
    if link_new(dir_fd, name, sig):
        return True
    # no lock (each account's own, locks.py: it would not exclude a co-signer of another):
    # the swap checks the file is still the one judged; racing a co-signer of the same key,
    # either valid file stays
    existing, identity = _look(dir_fd, name)
    if identity is None:
        return link_new(dir_fd, name, sig)
    if not stale(existing):
        return False
    return _swap(dir_fd, name, sig, identity)


Identity = tuple[int, int, int, int]  # device, inode, size, mtime in ns


def _identity(dir_fd: int, name: str) -> Identity | None:
    try:
        return _identity_of(os.stat(name, dir_fd=dir_fd, follow_symlinks=False))
    except FileNotFoundError:
        return None


def _identity_of(st: os.stat_result) -> Identity:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _look(dir_fd: int, name: str) -> tuple[bytes | None, Identity | None]:
    """A signature file's bytes (bounded) and identity, without following a link; a link or
    a non-file is b"" (no signature), a missing file (None, None)."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None, None
    identity = _identity_of(st)
    if not stat.S_ISREG(st.st_mode):
        return b"", identity
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                     dir_fd=dir_fd)
    except FileNotFoundError:
        return None, None
    except OSError:
        return b"", identity
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != identity[:2]:
            return b"", identity  # swapped between the look and the open: no signature
        return os.read(fd, sigfile.MAX_BYTES + 1), identity
    finally:
        os.close(fd)


def exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _write_temp(dir_fd: int, data: bytes) -> str:
    """`data` in a new private temporary file, fsynced; its name."""
    tmp = names.temporary()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o644, dir_fd=dir_fd)
    try:
        try:
            write_synced(fd, data)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    return tmp


def _link(dir_fd: int, tmp: str, name: str) -> bool:
    try:  # link() never replaces: first writer wins, and a rival's entry stays whole
        os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except FileExistsError:
        return False
    os.fsync(dir_fd)
    return True


def link_new(dir_fd: int, name: str, data: bytes) -> bool:
    """Publish `data` as `name` unless it exists (temporary file, fsync, link)."""
    tmp = _write_temp(dir_fd, data)
    try:
        return _link(dir_fd, tmp, name)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
