"""Writers that already hold a handle: other users' processes that can write into the cache
whatever its permissions say now.

Permissions are checked when a file is opened or mapped, never again: a process that opened an
entry for writing (or mapped it shared and writable) while the directory was shared keeps that
power after the owner tightened the bits. So the audit looks at every process of an untrusted
user (not you, not root, not trusted by the policy) for
- a descriptor open for writing (`/proc/PID/task/TID/fdinfo/N` flags O_WRONLY or O_RDWR; O_PATH
  descriptors cannot write, and reopening one checks the permissions again), and
- a shared mapping that can write (`/proc/PID/maps` `rw?s`, or `r??s` whose VmFlags in smaps
  say `mw`: mprotect can make it writable again),
on the cache directory's own inodes, matched by (device, inode) so a hard link or bind-mount
alias is the same file, with the path as a fallback for files made after the listing.
Each task's descriptor table is read: a thread can have its own.

What it cannot see: processes of other users when we are not root (counted per user, never
guessed), processes in other PID namespaces, descriptors in flight in a Unix socket message, and
anything root or the kernel does.
"""

from __future__ import annotations

import os
import stat
import sys
from typing import NamedTuple

from jaxcache.trust.kernel import process_table as proctable
from jaxcache.trust.kernel.principals import Trust

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

O_ACCMODE = 0o3
O_PATH = 0o10000000
DELETED = " (deleted)"  # the kernel's mark on a file no longer in any directory
_KCMP = {"x86_64": 312, "aarch64": 272}  # kcmp(2) syscall numbers; elsewhere: walk every task
KCMP_FILES = 2
_MAX_DEPTH = 8  # subdirectories of a cache (XLA's sub-cache) are one level deep


class Identities:
    """The inodes a writer could change what JAX loads through: the directory, its
    subdirectories and every entry in them. (Internal, so a plain class: a dataclass costs
    `jaxcache run` start-up.) `more`: inodes known but not yet read (a remembered
    judgement's entries: trust/judgement/shortcut.py), read at the first descriptor or
    mapping that could be one of them; None from it: they cannot be read, so any file on the
    directory's device counts as one (fail closed)."""

    __slots__ = ("path", "inodes", "numbers", "also", "more", "devices", "unknown")

    def __init__(self, path: str, inodes: frozenset[tuple[int, int]],
                 also: tuple[str, ...] = (),
                 more: Callable[[], frozenset[tuple[int, int]] | None] | None = None) -> None:
        self.path, self.inodes, self.also = path, inodes, also
        self.numbers = frozenset(ino for _, ino in inodes)  # what fdinfo's `ino:` can match
        self.more = more
        self.devices = frozenset(dev for dev, _ in inodes)
        self.unknown = False  # `more` said None: any file on one of `devices` counts

    def _read_more(self) -> None:
        more, self.more = self.more, None
        found = more() if more is not None else frozenset()
        if found is None:
            self.unknown = True
            return
        self.inodes = self.inodes | found
        self.numbers = self.numbers | frozenset(ino for _, ino in found)

    def number(self, ino: int) -> bool:
        """Could a file with this inode number be one of ours (its device still to check)?"""
        if self.more is not None and ino not in self.numbers:
            self._read_more()
        return self.unknown or ino in self.numbers

    def holds(self, dev: int, ino: int) -> bool:
        if (dev, ino) in self.inodes:
            return True
        if self.more is not None and dev in self.devices:
            self._read_more()
        return (dev, ino) in self.inodes or (self.unknown and dev in self.devices)

    def under(self, target: str) -> bool:
        return any(target == p or target.startswith(p.rstrip("/") + "/")
                   for p in (self.path, *self.also))

    def plus(self, inodes: frozenset[tuple[int, int]], paths: tuple[str, ...]) -> Identities:
        """These identities and what stores them (overlay layer directories, loop images,
        device nodes: trust/judgement/storage.py)."""
        return Identities(self.path, self.inodes | inodes, self.also + paths, self.more)


class Handle(NamedTuple):
    pid: int
    uid: int
    user: str
    command: str
    trust: Trust  # POLICY or UNTRUSTED (you and root are not looked at)
    kind: str  # write (a descriptor) | shared-map (a writable shared mapping)
    path: str  # the file, as the kernel names it
    detail: str  # "fd 3" | "mapping 7f..-7f.. rw-s"


class HandleScan(NamedTuple):
    handles: tuple[Handle, ...]
    uninspected: tuple[tuple[str, int], ...]  # (user, processes) we were not allowed to read
    # with scan(readers=True): descriptors of any other kind (read-only, O_PATH) on a file of
    # the cache, which write nothing today, but reopened through /proc/PID/fd after its bits
    # were loosened would (what trust/judgement/shortcut.py's memo must rule out)
    readers: tuple[Handle, ...] = ()

    @property
    def uninspected_count(self) -> int:
        return sum(n for _, n in self.uninspected)


def identities(dir_fd: int, path: str) -> Identities:
    """The inodes under the directory behind `dir_fd` (an O_PATH descriptor is fine)."""
    inodes: set[tuple[int, int]] = set()
    try:
        rd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        st = os.fstat(dir_fd)
        return Identities(path, frozenset({(st.st_dev, st.st_ino)}))
    try:
        _collect(rd, inodes, 0)
    finally:
        os.close(rd)
    return Identities(path, frozenset(inodes))


def _collect(fd: int, inodes: set[tuple[int, int]], depth: int) -> None:
    st = os.fstat(fd)
    inodes.add((st.st_dev, st.st_ino))
    try:
        entries = list(os.scandir(fd))
    except OSError:
        return
    for e in entries:
        if e.is_dir(follow_symlinks=False) and depth < _MAX_DEPTH:
            try:
                sub = os.open(e.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                              dir_fd=fd)
            except OSError:
                continue
            try:
                _collect(sub, inodes, depth + 1)  # fstat: a mount point's real root
            finally:
                os.close(sub)
        else:
            inodes.add((st.st_dev, e.inode()))  # from getdents: no stat per entry


def scan(ids: Identities, trust: Callable[[int], Trust], user_name: Callable[[int], str],
         *, you: int, skip_pid: int | None = None, readers: bool = False) -> HandleScan:
    """Every process not all of whose uids are you or root holding a write handle on one of
    `ids`. trust(uid): whom that account is (principals.Trust). `readers`: also every other
    descriptor such a process holds on a file of `ids` (HandleScan.readers)."""
    found: list[Handle] = []
    reading: list[Handle] = []
    denied: dict[int, int] = {}
    classes: dict[int, Trust] = {}
    for proc in proctable.processes(skip_pid=skip_pid, skip_uids=frozenset({0, you})):
        kinds = [_cached(classes, u, trust) for u in proc.uids]
        if all(k in (Trust.YOU, Trust.ROOT) for k in kinds):
            continue  # trusted whatever it holds: no descriptor walk needed
        cls = Trust.UNTRUSTED if Trust.UNTRUSTED in kinds else Trust.POLICY
        uid = proc.uids[kinds.index(cls)]
        others: list[tuple[str, str, str]] | None = [] if readers else None
        try:
            hits = _descriptors(proc.base, ids, others) + _mappings(proc.base, ids)
        except (FileNotFoundError, ProcessLookupError):
            continue  # it ended while we looked
        except OSError:  # not allowed (not root), or unreadable: counted, never guessed
            if cls is Trust.UNTRUSTED:
                denied[uid] = denied.get(uid, 0) + 1
            continue
        found.extend(Handle(proc.pid, uid, user_name(uid), proc.command, cls, kind, path, detail)
                     for kind, path, detail in hits)
        reading.extend(Handle(proc.pid, uid, user_name(uid), proc.command, cls, kind, path,
                              detail) for kind, path, detail in others or ())
    return HandleScan(tuple(found),
                      tuple(sorted((user_name(u), n) for u, n in denied.items())),
                      tuple(reading))


def _cached(classes: dict[int, Trust], uid: int, trust: Callable[[int], Trust]) -> Trust:
    if uid not in classes:
        classes[uid] = trust(uid) if uid >= 0 else Trust.UNTRUSTED
    return classes[uid]


def _descriptors(base: str, ids: Identities, others: list[tuple[str, str, str]] | None = None
                 ) -> list[tuple[str, str, str]]:
    """Write-capable descriptors on the cache; with `others`, every other descriptor on one of
    its files (by inode) is added there. fdinfo first (flags and inode number, read from
    memory): stat() follows the descriptor to its file, which on a dead network mount can
    hang, so only a descriptor whose inode number matches is stat'ed to confirm the device."""
    out: dict[tuple[str, str], tuple[str, str, str]] = {}
    pid = int(base.rsplit("/", 1)[1])
    for tid in os.listdir(f"{base}/task"):
        if int(tid) != pid and _same_table(pid, int(tid)):
            continue  # a thread sharing the leader's table: walked once, as the leader
        task = f"{base}/task/{tid}"
        try:
            fds = os.listdir(f"{task}/fd")
        except FileNotFoundError:
            continue  # the thread ended
        for n in fds:
            try:
                flags, ino = _fdinfo(f"{task}/fdinfo/{n}")
            except FileNotFoundError:
                continue  # closed meanwhile
            if flags & O_PATH or flags & O_ACCMODE not in (os.O_WRONLY, os.O_RDWR):
                if others is not None and (ino is None or ids.number(ino)):
                    _other(f"{task}/fd/{n}", n, ids, others)
                continue
            link = f"{task}/fd/{n}"
            try:
                if ino is None or ids.number(ino):
                    st = os.stat(link)
                    if stat.S_ISDIR(st.st_mode):
                        continue
                    found = ids.holds(st.st_dev, st.st_ino)
                    target = os.readlink(link)
                else:
                    found, target = False, os.readlink(link)
            except FileNotFoundError:
                continue
            if not found and (not ids.under(target) or target.endswith(DELETED)):
                continue  # elsewhere; inside the cache but made after the listing still counts
            out.setdefault((n, target), ("write", target, f"fd {n}"))
    return list(out.values())


def _other(link: str, n: str, ids: Identities, others: list[tuple[str, str, str]]) -> None:
    """A descriptor that cannot write, on a file (not a directory) of `ids`: into `others`."""
    try:
        st = os.stat(link)
        if stat.S_ISDIR(st.st_mode) or not ids.holds(st.st_dev, st.st_ino):
            return
        others.append(("read", os.readlink(link), f"fd {n}"))
    except OSError:
        return


_kcmp: Callable[[int, int], int] | bool | None = None  # kcmp(2), False where none


def _same_table(pid: int, tid: int) -> bool:
    """Does thread `tid` share process `pid`'s descriptor table? (kcmp(2); when it cannot
    say, no: the thread's own table is walked.) Saves walking every thread of a big job."""
    global _kcmp
    if _kcmp is None:
        number = _KCMP.get(os.uname().machine) if sys.platform == "linux" else None
        if number is None:
            _kcmp = False
        else:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            _kcmp = lambda a, b: libc.syscall(number, a, b, KCMP_FILES, 0, 0)  # noqa: E731
    kcmp = _kcmp
    return callable(kcmp) and kcmp(pid, tid) == 0


def _fdinfo(path: str) -> tuple[int, int | None]:
    """flags and inode number (None on kernels whose fdinfo has no `ino:`); flags that cannot
    be read count as read-write."""
    flags, ino = O_ACCMODE & os.O_RDWR, None
    for line in proctable.read(path, 4096).split(b"\n"):
        try:
            if line.startswith(b"flags:"):
                flags = int(line[6:].strip(), 8)
            elif line.startswith(b"ino:"):
                ino = int(line[4:].strip())
        except ValueError:
            continue
    return flags, ino


def _mappings(base: str, ids: Identities) -> list[tuple[str, str, str]]:
    out = []
    maybe = []  # shared mappings of cache files that are not writable right now
    for fields in _shared_lines(proctable.read(f"{base}/maps")):
        path = os.fsdecode(fields[5].strip())
        try:
            major, minor = (int(x, 16) for x in fields[3].split(b":"))
            dev, ino = os.makedev(major, minor), int(fields[4])
        except ValueError:
            continue
        if not (ids.holds(dev, ino) or (ids.under(path) and not path.endswith(DELETED))):
            continue
        where = f"mapping {fields[0].decode()} {fields[1].decode()}"
        if fields[1][1:2] == b"w":
            out.append(("shared-map", path, where))
        else:
            maybe.append((fields[0], path, where))
    if maybe:
        may_write = _may_write(base)
        out += [("shared-map", path, where + " (may write)") for span, path, where in maybe
                if may_write.get(span, True)]
    return out


def _shared_lines(text: bytes) -> Iterator[list[bytes]]:
    """The fields of each shared, file-backed line of a maps file. Shared mappings are rare:
    find the perms' `s ` in C rather than splitting every line of a big process's maps."""
    at = text.find(b"s ")
    while at != -1:
        start = text.rfind(b"\n", 0, at) + 1
        end = text.find(b"\n", at)
        end = len(text) if end == -1 else end
        fields = text[start:end].split(None, 5)
        if len(fields) == 6 and len(fields[1]) == 4 and fields[1][3:4] == b"s":
            yield fields
        at = text.find(b"s ", end)


def _may_write(base: str) -> dict[bytes, bool]:
    """Per mapping, whether mprotect could make it writable (VmFlags `mw`)."""
    out: dict[bytes, bool] = {}
    span = None
    for line in proctable.read(f"{base}/smaps").split(b"\n"):
        head = line.split(None, 1)
        if head and b"-" in head[0] and not head[0].endswith(b":"):
            span = head[0]
        elif line.startswith(b"VmFlags:") and span is not None:
            out[span] = b"mw" in line[8:].split()
    return out
