"""A directory tier's files, as both sealed backends read and write them: read once through
the directory's descriptor, never following a symbolic link, bounded where the writer is not
trusted (Rejected says why a file is refused, and carries the error JAX's own read would have
met); written create-only (publish.py), least recently used entries of ours evicted first when
there is a limit (lru.py); a local tier kept apart from the sealed directory.
"""

from __future__ import annotations

import errno
import os
import stat
import warnings

from jaxcache.errors import JaxcacheError
from jaxcache.seal.publishing import lru
from jaxcache.seal.publishing import tier_names as names
from jaxcache.seal.publishing.publish import Orphan, exists, publish
from jaxcache.seal.signing import signature_file as sigfile
from jaxcache.seal.signing import signature_rule as signature
from jaxcache.text import safe


class Rejected(Exception):
    """An entry judged unusable. `io`: the error JAX's own cache would have met reading it
    (a directory in its place, a file it may not open), which the sealed reader hands to JAX
    as JAX's cache would (get_io); None for a judgement of its own (a link, a signature).
    `signer`: the id of the key whose signature was judged, where one was named."""

    def __init__(self, status: str, reason: str, uid: int, io: OSError | None = None, *,
                 signer: str | None = None) -> None:
        super().__init__(reason)
        self.status, self.reason, self.uid, self.io = status, reason, uid, io
        self.signer = signer


def get_io(exc: Rejected, directory: str, name: str) -> None:
    """The sealed reader's get() follows JAX on I/O errors reading the entry `name` itself:
    they go to JAX, which warns and misses, or raises with jax_raise_persistent_cache_errors
    (JAX's _cache_read), naming the file in `directory` as JAX's would. Anything else
    returns, to be a reported miss: a signature rejection is not an I/O error, and a sidecar
    JAX never reads (a directory at the signature's name) is jaxcache's own judgement."""
    io = exc.io
    if io is not None and io.filename == name:
        raise type(io)(io.errno, io.strerror, os.path.join(directory, name)) from None


def open_dir(path: str) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def read_whole(dir_fd: int, name: str, limit: int | None = None, *, unread: bool = False
               ) -> bytes | None:
    """The whole file, read once; None if absent. A symlink or non-file is rejected; where
    JAX's own read would have failed too (a directory, a file it may not open), the
    rejection carries that error (`io`). `unread`: a read that is no use of the entry (verify,
    seal judging it) leaves its read time, which gc counts as a use, where the kernel lets it
    (O_NOATIME: the file's owner and root)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        try:
            fd = os.open(name, flags | (os.O_NOATIME if unread else 0), dir_fd=dir_fd)
        except PermissionError:
            if not unread:
                raise
            fd = os.open(name, flags, dir_fd=dir_fd)  # another's file: read as anyone would
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            try:
                uid = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_uid
            except FileNotFoundError:
                return None  # the link went away meanwhile: nothing there now
            raise Rejected("not-a-file", f"{name} is a symbolic link", uid) from None
        raise Rejected("not-a-file", f"cannot open {name}: {exc.strerror}", -1,
                        io=exc) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # a directory, FIFO or device: judged, never read
            io = IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), name) \
                if stat.S_ISDIR(st.st_mode) else None  # what JAX's read_bytes() raises
            raise Rejected("not-a-file", f"{name} is not a regular file", st.st_uid, io=io)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb", buffering=0) as f:
        data = f.read(limit) if limit is not None else f.readall()
    return data


def cosignatures(dir_fd: int, name: str, name_max: int) -> signature.Fetch:
    """The co-signature of `name` by a key id, read as a signature is (bounded, O_NOFOLLOW);
    a link or special file there counts as none."""
    def fetch(key_id: str) -> bytes | None:
        where = names.cosignature(name, key_id, name_max)
        if where is None:
            return None
        try:
            return read_whole(dir_fd, where, limit=sigfile.MAX_BYTES + 1)
        except Rejected:
            return None
    return fetch


def owner_of(uid: int) -> str:
    """A file owner as a rejection names it: the account, with its uid."""
    import pwd

    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def fits(key: str, value: bytes, max_size: int) -> bool:
    """JAX's rule: an entry larger than jax_compilation_cache_max_size is not stored."""
    if max_size != -1 and len(value) > max_size:
        warnings.warn(f"Cache value for key {safe(key)!r} of size {len(value)} bytes "
                      f"exceeds the maximum cache size of {max_size} bytes", stacklevel=3)
        return False
    return True


def write_tier(fd: int, name: str, value: bytes, sig: bytes | None, limit: int,
               max_size: int, evictions: list[tuple[str, str]], where: str,
               orphan: Orphan | None = None) -> bool:
    """Publish into a directory tier, evicting least recently used entries of ours first
    when there is a limit; False if the name was taken (first writer wins)."""
    if max_size == -1:
        return publish(fd, name, value, sig, limit, orphan)  # takes the lock if it must
    with lru.locked(fd):
        if exists(fd, name):
            return False
        for gone in lru.evict(fd, max_size, len(value), limit):
            evictions.append((gone, where))
        return publish(fd, name, value, sig, limit, orphan, locked=True)


def apart(local: str, shared: str) -> None:
    """Refuse a local tier that is the sealed directory, inside it or above it: its entries
    would be loaded unsigned from where others write, or it would hold the sealed cache.
    Both absolute; symlinks in what exists are resolved before comparing."""
    a, b = os.path.realpath(local), os.path.realpath(shared)
    if a == b:
        where = "is the sealed cache directory itself"
    elif a.startswith(b.rstrip("/") + "/"):
        where = f"is inside the sealed cache {safe(b)}"
    elif b.startswith(a.rstrip("/") + "/"):
        where = f"contains the sealed cache {safe(b)}"
    else:
        return
    raise JaxcacheError(f"the local tier {safe(os.path.normpath(local))} {where}: give a "
                        "private directory apart from it")
