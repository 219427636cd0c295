"""A directory as an object store: a sealed directory read for the fetch ahead (prefetch.py),
and a directory that holds generations (seal/generations/), which is written too.

For the fetch ahead (DirectoryObjects): on a network filesystem (NFS, Lustre, a FUSE mount)
each open and read of JAX's one-at-a-time loads waits a round trip, as a bucket's requests
do, so the entries the job hit last time are read and verified in parallel while it imports
JAX. Reads go through the directory's descriptor exactly as the sealed reader's own (tier_files
`read_whole`: no link followed, regular files only, at most `limit` bytes); nothing is written.
Whatever the fetch finds wrong (a link, a non-file, a bad signature) the reader's own load of
that entry finds again, and reports with the file's owner.

For generations (GenerationDirectory): names are `<folder>/<name>` (objects/, generations/,
pointers/), each folder reached from the store's descriptor without following a link and made
(0755) where missing; a file is written beside its name first and linked into place, so it is
created only if absent and never seen half written (link(2) fails on an existing name); a
replace or delete holds the folder's lock (flock(2)) while it compares the file's identity with
what the caller saw, so two publishers moving one pointer cannot both win (the lock is a file
of the folder's owner, mode 0600: a reader of the store cannot take it and stall them). Its
integrity rests on the signed manifest and the digests, not on who can write the directory: a
writer there can withhold a generation, never make a reader load what no trusted signer
published.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import threading
from collections.abc import Callable, Iterator

from jaxcache.seal.objects.object_store import ERROR, PERMISSION, ObjectInfo, StoreError
from jaxcache.seal.publishing import tier_names as names
from jaxcache.seal.publishing.locks import flock_within
from jaxcache.seal.publishing.tier_files import Rejected, open_dir, read_whole


class DirectoryObjects:
    """The files of one directory as read-only objects (names relative to it)."""

    def __init__(self, path: str) -> None:
        self.url = path  # the key under which an early fetch is kept for its enable
        self._fd = open_dir(path)  # held for the process's life, as the reader's own
        # its filesystem's, as the reader's and the publisher's: a long module name's
        # signature is `<key>.sig` there, never `<entry>.sig`
        self.name_max = names.name_max(self._fd)

    def prepare(self) -> None:
        pass  # nothing to import or make

    def get(self, name: str, limit: int | None = None) -> bytes | None:
        return read_whole(self._fd, name, limit)

    def stat(self, name: str) -> ObjectInfo | None:
        try:
            st = os.stat(name, dir_fd=self._fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        return ObjectInfo(name, st.st_size, f"{st.st_ino}:{st.st_mtime_ns}", st.st_mtime)

    def put_if_absent(self, name: str, data: bytes) -> bool:
        raise StoreError(ERROR, "the fetch ahead writes nothing")

    def replace_if(self, name: str, data: bytes, generation: str) -> bool:
        raise StoreError(ERROR, "the fetch ahead writes nothing")

    def delete_if(self, name: str, generation: str) -> bool:
        raise StoreError(ERROR, "the fetch ahead deletes nothing")

    def list(self, folder: str = "") -> Iterator[ObjectInfo]:
        raise StoreError(ERROR, "the fetch ahead lists nothing")


_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# the folders of a store of generations (seal/generations/manifest.py): no other is opened
FOLDERS = ("generations", "leases", "objects", "pointers")
LOCK = ".lock"
LOCK_WAIT_S = 30.0


class GenerationDirectory:
    """A directory that holds generations, as an object store that writes (names with one
    folder: objects/<digest>, generations/<name>.json, pointers/<pointer>)."""

    def __init__(self, path: str) -> None:
        self.url = path
        try:  # "store/" would follow a link at store: its trailing slashes go first
            self._fd = os.open(path.rstrip("/") or "/", _FOLDER)
        except OSError as exc:
            raise _failed(exc, f"cannot open {path}") from None
        self.name_max = names.name_max(self._fd)
        self._folders: dict[str, int] = {}
        self._opening = threading.Lock()  # one descriptor per folder, whichever thread asks

    def prepare(self) -> None:
        pass

    def close(self) -> None:
        for fd in (*self._folders.values(), self._fd):
            os.close(fd)
        self._folders.clear()

    def _place(self, name: str, *, make: bool = False) -> tuple[int, str] | None:
        """(the folder's descriptor, the file's name in it); None where the folder is not
        there (and `make` is not asked)."""
        folder, _, leaf = name.partition("/")
        if not leaf or "/" in leaf or leaf in (".", "..") or folder not in FOLDERS or \
                "\0" in name:
            raise StoreError(ERROR, f"{name!r} is no object name of a generation store")
        with self._opening:
            fd = self._folders.get(folder)
            if fd is None:
                try:
                    fd = os.open(folder, _FOLDER, dir_fd=self._fd)
                except FileNotFoundError:
                    if not make:
                        return None
                    fd = self._make(folder)
                except OSError as exc:  # a link (ELOOP), a file (ENOTDIR), no access
                    raise _failed(exc, f"cannot open {folder}/ in {self.url}") from None
                self._folders[folder] = fd
        return fd, leaf

    def _make(self, folder: str) -> int:
        try:
            try:
                os.mkdir(folder, 0o700, dir_fd=self._fd)
            except FileExistsError:
                return os.open(folder, _FOLDER, dir_fd=self._fd)
            fd = os.open(folder, _FOLDER, dir_fd=self._fd)
            os.fchmod(fd, 0o755)  # made here, for every reader (the umask would narrow it)
            return fd
        except OSError as exc:
            raise _failed(exc, f"cannot make {folder}/ in {self.url}") from None

    def get(self, name: str, limit: int | None = None) -> bytes | None:
        place = self._place(name)
        try:
            return None if place is None else read_whole(place[0], place[1], limit)
        except Rejected as exc:  # a link, a folder, a FIFO at the name: no object of ours
            raise StoreError(ERROR, f"{name}: {exc.reason}") from None
        except OSError as exc:  # a read that failed (EIO)
            raise _failed(exc, f"cannot read {name} in {self.url}") from None

    def stat(self, name: str) -> ObjectInfo | None:
        place = self._place(name)
        if place is None:
            return None
        try:
            return _info(name, place[0], place[1])
        except OSError as exc:
            raise _failed(exc, f"cannot stat {name} in {self.url}") from None

    def _written(self, fd: int, leaf: str, data: bytes) -> str:
        """A new file beside `leaf` holding `data`, synced, readable by all: its name."""
        temp = f".{leaf[:64]}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW |
                      os.O_CLOEXEC, 0o644, dir_fd=fd)
        try:
            os.fchmod(out, 0o644)  # made here: the umask would keep readers out
            view = memoryview(data)
            while view:
                view = view[os.write(out, view):]
            os.fsync(out)
        except BaseException:
            os.close(out)
            os.unlink(temp, dir_fd=fd)
            raise
        os.close(out)
        return temp

    def put_if_absent(self, name: str, data: bytes) -> bool:
        place = self._place(name, make=True)
        assert place is not None
        fd, leaf = place
        try:
            temp = self._written(fd, leaf, data)
            try:
                os.link(temp, leaf, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
            except FileExistsError:
                return False
            finally:
                os.unlink(temp, dir_fd=fd)
        except OSError as exc:  # no space, no access, no link(2) on this filesystem
            raise _failed(exc, f"cannot write {name} in {self.url}") from None
        return True

    def replace_if(self, name: str, data: bytes, generation: str) -> bool:
        place = self._place(name, make=True)
        assert place is not None
        fd, leaf = place
        return self._if_still(fd, leaf, name, generation, "replace", lambda: os.replace(
            self._written(fd, leaf, data), leaf, src_dir_fd=fd, dst_dir_fd=fd))

    def delete_if(self, name: str, generation: str) -> bool:
        place = self._place(name)
        if place is None:
            return False
        fd, leaf = place
        return self._if_still(fd, leaf, name, generation, "delete",
                              lambda: os.unlink(leaf, dir_fd=fd))

    def _if_still(self, fd: int, leaf: str, name: str, generation: str, verb: str,
                  act: Callable[[], None]) -> bool:
        """`act()` under the folder's lock, if the file is still at `generation` (a compare and
        swap); False if it changed or is gone."""
        with self._locked(fd):
            try:
                seen = _info(name, fd, leaf)
                if seen is None or seen.generation != generation:
                    return False
                act()
            except OSError as exc:
                raise _failed(exc, f"cannot {verb} {name} in {self.url}") from None
            return True

    @contextlib.contextmanager
    def _locked(self, fd: int) -> Iterator[None]:
        """The folder's lock: a file `.lock` (0600) in it, which only its owner (and root)
        can open, so a reader of the store cannot hold it; waited for at most LOCK_WAIT_S."""
        try:
            lock = os.open(LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                           dir_fd=fd)
        except OSError as exc:
            raise _failed(exc, f"cannot open the lock of {self.url}") from None
        try:
            if not flock_within(lock, LOCK_WAIT_S):
                raise StoreError(ERROR, f"a lock in {self.url} has been held for "
                                        f"{LOCK_WAIT_S:.0f} s")
            yield
        finally:
            os.close(lock)  # and with it the lock

    def list(self, folder: str = "") -> Iterator[ObjectInfo]:
        if folder and folder.rstrip("/") not in FOLDERS:
            raise StoreError(ERROR, f"{folder!r} is no folder of a generation store")
        for each in (folder.rstrip("/"),) if folder else FOLDERS:
            place = self._place(each + "/-")
            if place is None:
                continue
            try:
                leaves = sorted(os.listdir(place[0]))
            except OSError as exc:
                raise _failed(exc, f"cannot list {each}/ in {self.url}") from None
            for leaf in leaves:
                found = None if leaf.startswith(".") else _info(f"{each}/{leaf}", place[0],
                                                                 leaf)
                if found is not None:
                    yield found


def _failed(exc: OSError, what: str) -> StoreError:
    """An OSError of the directory as the store's error: one line, and no traceback."""
    kind = PERMISSION if exc.errno in (errno.EACCES, errno.EPERM) else ERROR
    return StoreError(kind, f"{what}: {exc.strerror or exc}")


def _info(name: str, fd: int, leaf: str) -> ObjectInfo | None:
    """A regular file's size and identity (inode and change time: a replaced file is a new
    inode); None if absent or not a regular file (a link is no object)."""
    try:
        st = os.stat(leaf, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return ObjectInfo(name, st.st_size, f"{st.st_ino}:{st.st_ctime_ns}", st.st_mtime)
