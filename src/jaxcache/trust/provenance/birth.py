"""When a file was made: its birth time, which no file-level restore, copy or edit reproduces.

Device and inode numbers are predictable (a fresh tmpfs numbers both the same way every time;
ext4 hands a freed inode back), and a user sets a file's mtime at will; the birth time is set
by the kernel when the inode is made and no system call changes it. So a file that names its
own birth time, to the nanosecond, names that very file: `tar x`, `cp -a`, `rsync -a` and an
image build all make new inodes with new birth times (a block-level copy of the whole
filesystem, a disk image or snapshot, does reproduce it: see fingerprint/boot.py).
The origin ledger binds itself to it (trust/provenance/ledger_file.py).

Linux gives it through statx(2) only (Python's os.stat has no st_birthtime on Linux before
3.15), reached through ctypes' C module; a filesystem that does not record it (some network
and older filesystems) gives None, and whoever relies on it fails closed.
"""

from __future__ import annotations

import os
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

_AT_EMPTY_PATH = 0x1000
_STATX_BTIME = 0x800
_BUF = 256  # sizeof(struct statx)
_BTIME_AT = 80  # offsetof(struct statx, stx_btime): {s64 tv_sec; u32 tv_nsec; s32 reserved}
_statx: list[tuple[Callable[..., int], type] | None] = []  # the libc function and a buffer
# type, found once: through _ctypes, the C module, as ctypes.CDLL(None).statx would (the
# ctypes package itself costs ~2.5 ms to import, on the path of every `jaxcache run`)


def _function() -> tuple[Callable[..., int], type] | None:
    if not _statx:
        try:
            import _ctypes

            class _Int(_ctypes._SimpleCData):  # type: ignore[type-arg]  # ctypes.c_int
                _type_ = "i"

            class _Char(_ctypes._SimpleCData):  # type: ignore[type-arg]  # ctypes.c_char
                _type_ = "c"

            class _Function(_ctypes.CFuncPtr):  # a CDLL(use_errno=True) function
                _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
                _restype_ = _Int

            class _Libc:  # what CFuncPtr((name, library)) reads of a library: its handle
                _handle = _ctypes.dlopen(None, _ctypes.RTLD_LOCAL)  # type: ignore[arg-type]

            # int statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *)
            # called with (int, bytes, int, int, a char array): C int, char *, int, int and
            # the array's address, as ctypes passes them without argtypes
            _statx.append((_Function(("statx", _Libc)),  # type: ignore[arg-type]
                           _Char * _BUF))
        except (OSError, AttributeError, ImportError):  # no statx in this libc (glibc < 2.28,
            _statx.append(None)  # musl < 1.2.5), or no ctypes in this Python
    return _statx[0]


def of_fd(fd: int) -> int | None:
    """The birth time of the file open as `fd`, in nanoseconds since the epoch, or None where
    the system or the filesystem does not record it."""
    found = _function()
    if found is None:
        return None
    fn, buffer = found
    buf = buffer()
    if fn(fd, b"", _AT_EMPTY_PATH, _STATX_BTIME, buf) != 0:
        return None
    raw: bytes = buf.raw
    mask: int = struct.unpack_from("=I", raw, 0)[0]
    if not mask & _STATX_BTIME:
        return None
    sec: int
    nsec: int
    sec, nsec = struct.unpack_from("=qI", raw, _BTIME_AT)
    if sec == 0 and nsec == 0:
        return None  # a filesystem that answers but keeps nothing (seen: 0 from overlays)
    return sec * 1_000_000_000 + nsec


def of_path(path: str) -> int | None:
    """The birth time of `path` itself (a link is not followed), for tests and tools."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
                     | getattr(os, "O_PATH", 0))
    except OSError:
        return None
    try:
        return of_fd(fd)
    finally:
        os.close(fd)
