"""The probe's private folder for one run: where the job's Python finds the probe (first on
PYTHONPATH), the run's lease, and the documents the probes write back.

Whoever could put another folder at its path would choose the code every process of the job
runs and the cache it gets, and could point the clean-up at files of yours. So it is made
(0700, by a mkdir that fails if the name exists) only under a directory nobody else can
rename it out of: that directory and every one above it, by its real path, ours or root's and
not writable by others unless sticky (like /tmp); in a sticky one, inside a folder of the
user's own (private_parent()), where no one else can make it again once it is removed.
Everything after that goes through the
descriptor opened as it was made (the files written, the lease, the documents read back, the
folder emptied) and its name is removed only while it still names that very folder.
Standard library only (os, stat, sys): every job's start-up waits for this.
"""

from __future__ import annotations

import itertools
import os
import stat
import sys

from jaxcache.errors import JaxcacheError
from jaxcache.text import safe

LEASE_FILE = "lease"  # a FIFO whose read end only the run holds (JAXCACHE_LEASE, launch.py)
_PREFIX = "jaxcache-probe-"
_CACHED = "__pycache__"


class ProbeFolder:
    """The folder's real path (what the job is told) and the descriptor everything else goes
    through. A plain slotted class: this module stays light."""

    __slots__ = ("fd", "path")

    def __init__(self, path: str, fd: int) -> None:
        self.path, self.fd = path, fd


def safe_root(path: str) -> str | None:
    """`path`'s real path, if a folder made in it cannot be renamed away by anyone but you or
    root: it and every directory above it are real directories owned by you or root, none
    writable by group or others unless sticky (an ACL granting another writer shows in the
    group bits), and you may create in it. None otherwise."""
    real = os.path.realpath(path)
    me = os.geteuid()
    parts = [p for p in real.split("/") if p]
    for depth in range(len(parts) + 1):
        where = "/" + "/".join(parts[:depth])
        try:
            st = os.lstat(where)  # a link here now (replaced since realpath): refused
        except OSError:
            return None
        if not stat.S_ISDIR(st.st_mode) or st.st_uid not in (0, me):
            return None
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            return None  # others could rename what it holds, the next folder down included
    return real if os.access(real, os.W_OK | os.X_OK) else None


def tmp_root() -> str:
    """The first safe one of XDG_RUNTIME_DIR, TMPDIR, /tmp and /var/tmp, by its real path."""
    for candidate in (os.environ.get("XDG_RUNTIME_DIR"), os.environ.get("TMPDIR"), "/tmp",
                      "/var/tmp"):
        real = safe_root(candidate) if candidate else None
        if real is not None:
            return real
    raise JaxcacheError("no safe temporary directory: TMPDIR and /tmp, and every directory "
                        "above them, must be yours or root's and either private or sticky "
                        "(others could swap the probe directory)")


def private_parent(root: str) -> str:
    """Where the run's folders are made in `root` (a real path safe_root() accepted): `root`
    itself if no one else may create in it, else a folder of yours in it, jaxcache-UID (0700),
    made once and kept. A run's folder removed from a shared root (a sticky /tmp) could be
    made again by anyone under the same name, which a process its job left behind still has
    on its PYTHONPATH: its next Python would load their sitecustomize."""
    if not os.lstat(root).st_mode & 0o022:
        return root
    me = os.geteuid()
    usual = f"jaxcache-{me}"
    # the usual name, else one of its own made by an earlier run (the usual one taken by
    # someone else, or not private), else a new one: one folder kept, not one a run
    names = [usual, *sorted(n for n in os.listdir(root) if n.startswith(usual + "-"))[:64]] \
        if not _ours(os.path.join(root, usual), me) else [usual]  # 64: others may make more
    for name in itertools.chain(names, (f"{usual}-{os.urandom(4).hex()}" for _ in range(100))):
        path = os.path.join(root, name)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            raise JaxcacheError(f"cannot create a private folder in {safe(root)}: "
                                f"{exc.strerror}") from None
        else:
            _owner_only(path)  # made now: whatever the umask took from 0700
        if _ours(path, me):
            return path
    raise JaxcacheError(f"cannot create a private folder in {safe(root)}: every name is taken")


def _ours(path: str, me: int) -> bool:
    """A real directory of `me`'s, 0700 exactly."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == me and stat.S_IMODE(st.st_mode) == 0o700


def _owner_only(path: str) -> None:
    """0700 on a folder this process has just made (through a descriptor: never a link)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fchmod(fd, 0o700)
    finally:
        os.close(fd)


def make(files: list[tuple[str, str]]) -> ProbeFolder:
    """A new private folder holding `files` ((source, name) pairs, probe_files()), each with
    its installed bytecode beside it in __pycache__."""
    root = private_parent(tmp_root())
    for _ in range(100):
        path = os.path.join(root, _PREFIX + os.urandom(6).hex())
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        break
    else:
        raise JaxcacheError(f"cannot create a private temporary directory in {safe(root)}")
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    folder = ProbeFolder(path, fd)
    try:
        os.fchmod(fd, 0o700)  # made just now: whatever the umask took from it
        os.mkdir(_CACHED, 0o700, dir_fd=fd)
        cached = os.open(_CACHED, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                         dir_fd=fd)
        try:
            os.fchmod(cached, 0o700)
        finally:
            os.close(cached)
        _add(folder, files)
    except BaseException:
        remove(folder)
        raise
    return folder


def _add(folder: ProbeFolder, files: list[tuple[str, str]]) -> None:
    cached = os.open(_CACHED, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                     dir_fd=folder.fd)
    try:
        for source, name in files:
            with open(source, "rb") as f:
                data, mtime = f.read(), os.fstat(f.fileno()).st_mtime_ns
            _write_new(folder.fd, name, data, mtime)
            _copy_compiled(source, cached, name[:-3])
    finally:
        os.close(cached)


def _write_new(dir_fd: int, name: str, data: bytes, mtime_ns: int | None = None) -> None:
    """A new file of ours in the folder (never an existing name, never through a link)."""
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600, dir_fd=dir_fd)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        if mtime_ns is not None:
            os.utime(f.fileno(), ns=(mtime_ns, mtime_ns))


def _copy_compiled(source: str, cached_fd: int, stem: str) -> None:
    """The installed bytecode of `source`, if any, beside its copy: every process of the job
    loads sitecustomize, and compiling it costs each ~3 ms. The copy keeps the source's mtime,
    so the job's Python checks this bytecode against its source as it checks any (a stale or
    another version's is compiled afresh, never trusted blindly); it is jaxcache's own file,
    as trusted as the source beside it."""
    tag = sys.implementation.cache_tag
    if tag is None:
        return
    head, tail = os.path.split(source)
    try:
        with open(os.path.join(head, _CACHED, f"{tail[:-3]}.{tag}.pyc"), "rb") as f:
            data = f.read()
    except OSError:
        return
    _write_new(cached_fd, f"{stem}.{tag}.pyc", data)


def hold_lease(folder: ProbeFolder) -> int:
    """The run's lease, made in the folder: a FIFO whose read end (returned, never blocking)
    only this process holds. The job's probes open it to write (site.py's _lease), which
    succeeds only while a reader holds it: once this process has ended, however it ended, the
    kernel has closed it. OSError where FIFOs cannot be made."""
    os.mkfifo(LEASE_FILE, 0o600, dir_fd=folder.fd)
    reader = os.open(LEASE_FILE, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC,
                     dir_fd=folder.fd)
    try:
        os.fchmod(reader, 0o600)  # the job's processes open it, whatever the umask
    except BaseException:
        os.close(reader)
        raise
    return reader


def intact(folder: ProbeFolder) -> bool:
    """Does the folder's path still name the folder made (not removed, not replaced)?"""
    try:
        st, mine = os.lstat(folder.path), os.fstat(folder.fd)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def remove(folder: ProbeFolder) -> None:
    """Empty the folder through its descriptor (links removed, never followed), then remove
    its name only if it still names this folder: a folder or link put in its place is left."""
    try:
        _empty(folder.fd)
        if intact(folder):
            os.rmdir(folder.path)  # only an empty directory goes, whatever raced in
    except OSError:
        pass  # a leftover in a temporary directory, never someone else's file removed
    finally:
        os.close(folder.fd)


def _empty(dir_fd: int) -> None:
    with os.scandir(dir_fd) as entries:
        names = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
    for name, is_dir in names:
        if not is_dir:
            try:  # noqa: SIM105 (contextlib's import costs every `jaxcache run` ~0.5 ms)
                os.unlink(name, dir_fd=dir_fd)
            except FileNotFoundError:
                pass
            continue
        try:
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                          dir_fd=dir_fd)
        except OSError:
            continue
        try:
            _empty(sub)
        finally:
            os.close(sub)
        os.rmdir(name, dir_fd=dir_fd)
