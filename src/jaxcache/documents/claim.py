"""An output file jaxcache owns: claimed before any work, written whole, never someone else's.

Every document jaxcache writes (bench --json/--report/--plot and those --out puts in its
directory, run --record, the demo's files) is claimed before the work that produces it: the
target is created empty and exclusively (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0666 less the user's
umask). Creating it is the only proof it can be written: root's access() says yes on a
read-only mount. So a target that cannot be created fails at once, before the first trial or the
job, with one line; and a file that exists is never overwritten, with one exception: a regular
file owned by you that is recognizably jaxcache's own document of that kind (its `recognize`
test, e.g. the JSON schema), or an empty one (a placeholder a killed run left). That one is
replaced atomically (a temporary file in the same directory, then rename) when the document is
ready, and untouched until then.

A command that fails or is interrupted before writing releases its claims: only the empty
placeholders the claim itself created are removed, and only while they are still that file.

The folder is reached from `/` one component at a time with O_NOFOLLOW (open_parent): a
symbolic link on the way is followed only when you or root own it (its text is then yours),
never one another user made, whatever folder it sits in; so what another user plants cannot
send an output elsewhere.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat

from jaxcache.documents.synced import write_synced
from jaxcache.errors import JaxcacheError
from jaxcache.text import safe

RECOGNIZE_LIMIT = 64 << 20  # a document larger than this is not one of ours to replace

TYPE_CHECKING = False  # for type checkers only: the record is claimed on `jaxcache run`'s path
if TYPE_CHECKING:  # before the job starts, where json, secrets and typing imports cost ~30 ms
    from collections.abc import Callable, Iterable

    Recognizer = Callable[[bytes], bool]


def json_schema(prefix: str) -> Recognizer:
    """A JSON object whose "schema" starts with `prefix` (e.g. "jaxcache.run/")."""

    def recognize(data: bytes) -> bool:
        from jaxcache import validate

        try:
            doc = validate.parse_json(data)
        except validate.Unreadable:
            return False
        return isinstance(doc, dict) and str(doc.get("schema", "")).startswith(prefix)

    return recognize


def starts_with(head: bytes) -> Recognizer:
    return lambda data: data.startswith(head)


PNG_MARK = b"jaxcache"  # the PNG's Software text chunk (see report/bench/plot.py)


def png_from_jaxcache(data: bytes) -> bool:
    return data.startswith(b"\x89PNG\r\n\x1a\n") and b"tEXtSoftware\x00" + PNG_MARK in data


class Output:
    """A claimed target: `write` it once, or `release` it (both idempotent after the first).
    It holds its directory open, so writing and releasing act in the directory that was
    checked, whatever its path names by then."""

    def __init__(self, path: str, what: str, dir_fd: int, name: str, ident: tuple[int, int],
                 placeholder: bool, lock_fd: int | None = None) -> None:
        self.path, self.what, self.name = path, what, name
        self.placeholder = placeholder  # an empty file this claim created
        self._dir_fd: int | None = dir_fd
        self._lock_fd = lock_fd  # the placeholder, flocked while the claim stands
        self._ident = ident  # (st_dev, st_ino) of the file claimed
        self.written = False

    def write(self, data: bytes | str) -> None:
        """The whole document, through a temporary file and rename in the same directory."""
        if self._dir_fd is None:
            raise JaxcacheError(f"{safe(self.path)} was already written or released")
        if isinstance(data, str):
            data = data.encode("utf-8")
        dfd = self._dir_fd
        try:
            if self._current() not in (self._ident, None):  # gone: the name is free again
                raise JaxcacheError(f"not writing the {self.what} {safe(self.path)}: it was "
                                    "replaced by someone else since jaxcache claimed it")
            tmp = f".{self.name}.{os.urandom(4).hex()}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666,
                         dir_fd=dfd)
            try:
                try:
                    write_synced(fd, data)  # durable before it has the name
                finally:
                    os.close(fd)
                os.replace(tmp, self.name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                try:  # noqa: SIM105 (contextlib's import costs every `jaxcache run` ~0.5 ms)
                    os.unlink(tmp, dir_fd=dfd)
                except OSError:
                    pass
                raise
            self.written = True
        except BaseException:  # a full or failing disk: no empty placeholder left behind
            self._drop_placeholder()
            raise
        finally:
            self._close()

    def release(self) -> None:
        """Give the claim up: remove the placeholder if it is still the empty file we made."""
        if self._dir_fd is None:
            return
        try:
            self._drop_placeholder()
        finally:
            self._close()

    def _drop_placeholder(self) -> None:
        try:
            if self.placeholder and self._dir_fd is not None:
                st = os.stat(self.name, dir_fd=self._dir_fd, follow_symlinks=False)
                if (st.st_dev, st.st_ino) == self._ident and st.st_size == 0:
                    os.unlink(self.name, dir_fd=self._dir_fd)
        except OSError:
            pass  # gone or changed: not ours to touch any more

    def _current(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.name, dir_fd=self._dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        return st.st_dev, st.st_ino

    def _close(self) -> None:
        # forgotten before closed: a Ctrl-C between the two can leak a descriptor, never close
        # one twice (the second close would hit EBADF, or a file opened since under its number)
        dir_fd, self._dir_fd = self._dir_fd, None
        lock_fd, self._lock_fd = self._lock_fd, None
        if dir_fd is not None:
            os.close(dir_fd)
        if lock_fd is not None:
            os.close(lock_fd)  # releases the flock


_MAX_LINKS = 40  # the kernel's own limit (ELOOP)
# O_PATH without O_DIRECTORY: one open per component, a link included, judged through that
# descriptor (fstat, readlink on it): nothing is looked up twice by name, so a link swapped
# between the look and the use is not followed. getattr: O_PATH is Linux's.
PATH_FLAGS = getattr(os, "O_PATH", 0) | os.O_NOFOLLOW | os.O_CLOEXEC


def open_parent(folder: str, what: str) -> int:
    """An O_PATH descriptor of the absolute `folder`, reached from / without letting the kernel
    follow a link: each link on the way must be yours or root's (then followed by hand), else
    JaxcacheError naming it. Missing or not-a-folder components say so as before."""
    me = os.geteuid()
    todo = [p for p in folder.split("/") if p][::-1]  # a stack: next component last
    cur, at, links = os.open("/", PATH_FLAGS | os.O_DIRECTORY), ["/"], 0
    try:
        while todo:
            name = todo.pop()
            if name in (".", ".."):  # only from a link's text: abspath removed the others
                if name == ".." and len(at) > 1:
                    nxt = os.open("..", PATH_FLAGS | os.O_DIRECTORY, dir_fd=cur)
                    os.close(cur)
                    cur = nxt
                    at.pop()
                continue
            here = os.path.join(*at, name)
            try:
                fd = os.open(name, PATH_FLAGS, dir_fd=cur)
            except FileNotFoundError:
                raise JaxcacheError(f"{safe(here)} does not exist") from None
            except OSError as exc:
                raise JaxcacheError(f"cannot reach {safe(here)}: {exc.strerror}") from None
            st = os.fstat(fd)
            if stat.S_ISLNK(st.st_mode):
                try:
                    links += 1
                    if st.st_uid not in (0, me) or links > _MAX_LINKS:
                        raise JaxcacheError(
                            f"{safe(here)} is a symbolic link " + (
                                f"owned by uid {st.st_uid}, not by you or root: jaxcache does "
                                f"not write a {what} where another user's link points; give "
                                "the real path" if st.st_uid not in (0, me) else
                                "loop (too many links)"))
                    target = os.readlink("", dir_fd=fd)  # this very link's text
                finally:
                    os.close(fd)
                if target.startswith("/"):
                    os.close(cur)
                    cur, at = os.open("/", PATH_FLAGS | os.O_DIRECTORY), ["/"]
                todo.extend(p for p in reversed(target.split("/")) if p)
                continue
            if not stat.S_ISDIR(st.st_mode):
                os.close(fd)
                raise JaxcacheError(f"{safe(here)} is not a directory")
            os.close(cur)
            cur = fd
            at.append(name)
        cur, out = -1, cur
        return out
    finally:
        if cur >= 0:
            os.close(cur)


class Unclaimed:
    """A target that could not be claimed, where losing it must not stop the work (the
    default run record, in a state folder that is read-only or full): writing it fails with
    the reason, releasing it does nothing."""

    placeholder = written = False

    def __init__(self, path: str, why: str) -> None:
        self.path, self.why = path, why

    def write(self, data: bytes | str) -> None:
        raise JaxcacheError(self.why)

    def release(self) -> None:
        pass


def claim(path: str, what: str, *, recognize: Recognizer | None = None) -> Output:
    """Claim `path` for a document named `what` in messages ("record", "bench result")."""
    if not path:
        raise JaxcacheError(f"the {what} path is empty")
    full = os.path.abspath(path)
    parent, name = os.path.split(full)
    if not name or path.endswith(os.sep):
        raise JaxcacheError(f"cannot write the {what} {safe(path)}: it names a directory")
    try:
        dfd = open_parent(parent, what)
    except JaxcacheError as exc:
        raise JaxcacheError(f"cannot write the {what} {safe(path)}: {exc}") from None
    try:
        return _claim_in(dfd, full, name, what, recognize)
    except BaseException:
        os.close(dfd)
        raise


def _claim_in(dfd: int, full: str, name: str, what: str, recognize: Recognizer | None
              ) -> Output:
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o666, dir_fd=dfd)
    except FileExistsError:
        ident = _replaceable(dfd, full, name, what, recognize)
        _prove_writable(dfd, full, what)
        return Output(full, what, dfd, name, ident, placeholder=False)
    except OSError as exc:
        raise JaxcacheError(f"cannot write the {what} {safe(full)}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # "being written": see _replaceable
    except BaseException:
        os.close(fd)
        raise
    return Output(full, what, dfd, name, (st.st_dev, st.st_ino), placeholder=True, lock_fd=fd)


def _replaceable(dfd: int, full: str, name: str, what: str,
                 recognize: Recognizer | None) -> tuple[int, int]:
    """The existing target's identity, if it is ours to replace; else a refusal."""

    def refuse(why: str) -> JaxcacheError:
        return JaxcacheError(f"refusing to overwrite {safe(full)}: it exists and {why} "
                             "(jaxcache never overwrites a file it did not create: give a new "
                             "path)")

    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dfd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise refuse("is a symbolic link") from None
        if exc.errno == errno.EACCES:
            raise refuse("you cannot read it") from None
        raise JaxcacheError(f"cannot write the {what} {safe(full)}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise refuse("is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise refuse("is not a regular file")
        if st.st_uid != os.geteuid():
            raise refuse("is not yours")
        if not st.st_size and not _unclaimed(fd):
            raise JaxcacheError(
                f"refusing to write the {what} {safe(full)}: another jaxcache process is "
                "writing it right now (several ranks given one path? put {rank} or {pid} in "
                "it)")
        if st.st_size and recognize is None:  # text carries no mark of who wrote it
            raise refuse(f"a {what} in text cannot be told from a file jaxcache did not write")
        if st.st_size and (recognize is None or st.st_size > RECOGNIZE_LIMIT
                           or not recognize(_read_all(fd, st.st_size))):
            raise refuse(f"is not a jaxcache {what} in the format asked for")
        return st.st_dev, st.st_ino
    finally:
        os.close(fd)


def _unclaimed(fd: int) -> bool:
    """An empty file nobody holds the claim lock on (a placeholder whose writer died)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    fcntl.flock(fd, fcntl.LOCK_UN)
    return True


def _read_all(fd: int, size: int) -> bytes:
    chunks, left = [], size
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _prove_writable(dfd: int, full: str, what: str) -> None:
    """An existing target is replaced by rename: the directory itself must take a new file."""
    probe = f".jaxcache-write-check-{os.getpid()}-{os.urandom(4).hex()}"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600,
                         dir_fd=dfd))
        os.unlink(probe, dir_fd=dfd)
    except OSError as exc:
        raise JaxcacheError(f"cannot write the {what} {safe(full)}: {exc.strerror}") from None


def release_all(outputs: Iterable[Output | None]) -> None:
    for out in outputs:
        if out is not None:
            out.release()


def new_dir(parent: str, stem: str) -> str:
    """A new directory PARENT/STEM-N (mode 0700, N from 1): made by mkdir, so never one that
    existed; PARENT is made (0700) if missing, its own parent must exist."""
    parent = os.path.abspath(parent)
    try:
        os.mkdir(parent, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise JaxcacheError(f"cannot create {safe(parent)}: {exc.strerror}") from None
    if not os.path.isdir(parent):
        raise JaxcacheError(f"cannot create a folder in {safe(parent)}: not a directory")
    for n in range(1, 10_000):
        path = os.path.join(parent, f"{stem}-{n}")
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        except OSError as exc:
            raise JaxcacheError(f"cannot create a folder in {safe(parent)}: "
                                f"{exc.strerror}") from None
        return path
    raise JaxcacheError(f"{safe(parent)} already holds {stem}-1 to {stem}-9999")
