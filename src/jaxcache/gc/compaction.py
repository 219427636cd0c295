"""Compacting the origin ledger: the lines of entries that are gone or changed are dropped.

The ledger (trust/provenance/ledger_file.py) grows by a line per entry a watched job writes and is
read whole before every job; past its size limit the witness stops adding lines (every new entry
then reads as unknown: fail closed). Compaction keeps a line only while the file it names is still
there with the identity the line recorded (device, inode, mtime and ctime, size): an entry gc or JAX
evicted, or one rewritten since, has nothing left to vouch for. A line whose folder cannot be looked
into is kept (not judged), as is every line of a ledger that could not be read whole. Compaction
only ever removes lines, so it can make no entry count as yours that did not before.

Atomic and under a lock, so a witness appending meanwhile loses no line, and held only briefly,
so a job's witness (which waits for it) is not held up by the judging: the lines are read and
judged without the lock, then, only if one is to go, the file is locked exclusively (appenders
take it shared: ledger_writes.hold()), checked to still begin with what was judged, and the kept
lines plus what was appended since are written to a new file in the same folder, with a header
that names that new file (its device, inode and birth time: the binding still holds), given
the old file's mode and group (a ledger another team reads stays readable to it), synced
and renamed over the ledger; an appender that waited on the old file finds the name now holds
another and opens the new one. A folder that no longer exists counts as its entries gone (a
cache moved or unmounted loses its lines at the next compaction: its entries read as unknown
until written again, failing closed). A crash leaves
either the old ledger or the new one, and at most a temporary file beside them (named
`.origin.ledger.compact.*`), which the next compaction removes.
"""

from __future__ import annotations

import contextlib
import enum
import os
import re
import stat
import time
from dataclasses import dataclass, replace

from jaxcache.documents.synced import write_synced
from jaxcache.errors import JaxcacheError
from jaxcache.trust.provenance import birth, ledger_file, ledger_place, ledger_writes

_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_TEMP = ".{name}.compact."
ABANDONED_S = 3600.0  # a temporary file older than this is a crashed compaction's
_OPEN_MAX = 32  # folder descriptors held at once (lines name few folders; a job has its own)


@dataclass(frozen=True, slots=True)
class Compaction:
    """What compacting the ledger did (or, with dry_run, would do)."""

    path: str
    dry_run: bool
    lines: int = 0  # ledger lines read (the header and fingerprint lines not counted)
    kept: int = 0
    gone: int = 0  # the entry file is not there any more
    changed: int = 0  # a file is there, not the one the line recorded
    repeated: int = 0  # the very same line twice
    torn: int = 0  # not a ledger line (a torn write, an edit)
    unjudged: int = 0  # its folder could not be looked into: kept
    # `fingerprint` lines (what a build id stands for) dropped: one no kept line names, or a
    # repeat (each watched job describes its build once)
    descriptions: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    problem: str | None = None  # why the ledger was not compacted (then nothing changed)

    @property
    def dropped(self) -> int:
        return self.gone + self.changed + self.repeated + self.torn


class Fate(enum.Enum):
    """What compaction does with one line."""

    KEPT = "kept"
    GONE = "gone"
    CHANGED = "changed"
    UNJUDGED = "unjudged"  # kept
    REPEATED = "repeated"
    TORN = "torn"


class _Folders:
    """The folders the lines name, each opened once by the fd walk (never through a link of
    anyone's but yours or root's, as the audit walks), for looking up entries in."""

    def __init__(self) -> None:
        self._fds: dict[bytes, int | None] = {}  # None: missing; -1: cannot be looked into

    def fd(self, directory: bytes) -> int | None:
        if directory not in self._fds:
            if len(self._fds) >= _OPEN_MAX:  # never more than a few descriptors at once
                self.close()
            self._fds[directory] = self._open(directory)
        return self._fds[directory]

    @staticmethod
    def _open(directory: bytes) -> int | None:
        import json

        from jaxcache.trust.kernel.walk import walk_open

        try:
            path = json.loads(directory)
            if not isinstance(path, str) or not path.startswith("/"):
                return -1
            w, fd = walk_open(path)
        except (OSError, ValueError, JaxcacheError):
            return -1
        if w.missing:
            os.close(fd)
            return None
        if w.blocked:
            os.close(fd)
            return -1
        return fd

    def close(self) -> None:
        for fd in self._fds.values():
            if fd is not None and fd >= 0:
                os.close(fd)
        self._fds.clear()


def _fate(m: re.Match[bytes], folders: _Folders) -> Fate:
    """What becomes of one ledger line: kept while its file is the one it recorded."""
    fd = folders.fd(m.group(12))
    if fd is None:
        return Fate.GONE
    if fd < 0:
        return Fate.UNJUDGED
    try:
        name = m.group(2).decode()
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except (FileNotFoundError, UnicodeDecodeError):
        return Fate.GONE
    except OSError:
        return Fate.UNJUDGED
    size, dev, ino, mtime, ctime = (int(m.group(i)) for i in range(4, 9))
    if not stat.S_ISREG(st.st_mode) or \
            (st.st_size, st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns) != \
            (size, dev, ino, mtime, ctime):
        return Fate.CHANGED
    return Fate.KEPT


def _read(fd: int, start: int, end: int, too_large: str) -> bytes:
    """Bytes [start, end) of the ledger; `too_large` says why more than a witness ever
    writes is refused."""
    limit = ledger_place.MAX_BYTES + ledger_file.MAX_LINE
    if end - start > limit:
        raise JaxcacheError(f"{too_large} {limit} bytes, which no witness writes")
    out = []
    while start < end:
        got = os.pread(fd, min(1 << 20, end - start), start)
        if not got:
            break
        out.append(got)
        start += len(got)
    return b"".join(out)


def _sweep(dfd: int, name: str, now: float) -> None:
    """Remove temporary files a crashed compaction left (yours, regular, old)."""
    prefix = _TEMP.format(name=name)
    with os.scandir(dfd) as it:
        for e in it:
            if not e.name.startswith(prefix):
                continue
            with contextlib.suppress(OSError):
                st = e.stat(follow_symlinks=False)
                if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and \
                        now - st.st_mtime > ABANDONED_S:
                    os.unlink(e.name, dir_fd=dfd)


def compact(path: str | None = None, *, dry_run: bool = False,
            until_ns: int | None = None) -> Compaction:
    """Compact the ledger at `path` (default: the user's); stops without a change at `until_ns`
    (time.monotonic_ns()). Never raises for the ledger's own state: a Compaction with its
    problem says why nothing changed."""
    path = os.path.abspath(path or ledger_place.ledger_path())
    parent, name = os.path.split(path)
    if not os.path.isdir(parent):
        return Compaction(path, dry_run)  # no ledger yet: nothing to compact
    from jaxcache import folders

    try:
        _, dfd = folders.private_folders(parent, "origin ledger")
    except JaxcacheError as exc:
        return Compaction(path, dry_run, problem=str(exc))
    try:
        # an O_PATH descriptor lists nothing: the folder itself, for the sweep and the sync
        real = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dfd)
    except OSError as exc:
        os.close(dfd)
        return Compaction(path, dry_run, problem=f"cannot open its folder: {exc.strerror}")
    try:
        try:
            fd = os.open(name, _READ, dir_fd=real)
        except FileNotFoundError:
            return Compaction(path, dry_run)
        except OSError as exc:
            return Compaction(path, dry_run, problem=f"cannot open it: {exc.strerror}")
        try:
            return _compact(path, real, name, fd, dry_run, until_ns)
        except JaxcacheError as exc:
            return Compaction(path, dry_run, problem=str(exc))
        except OSError as exc:
            return Compaction(path, dry_run, problem=f"{exc.strerror or exc}")
        finally:
            os.close(fd)
    finally:
        os.close(real)
        os.close(dfd)


def _compact(path: str, dfd: int, name: str, fd: int, dry_run: bool,
             until_ns: int | None) -> Compaction:
    """Judge the lines without the lock (appenders go on meanwhile), then, only if a line is
    to go, lock for as long as it takes to re-read what was appended since and write the
    new file: a job's witness waits for that, never for the judging."""
    st = os.fstat(fd)
    if not ledger_writes.appendable(st):
        raise JaxcacheError("it is not a regular file of yours with one link that only you "
                            "can write; left as it is")
    data = _read(fd, 0, st.st_size, "it is larger than")
    first, _, rest = data.partition(b"\n")
    why = ledger_file.unbound(first, st.st_dev, st.st_ino, birth.of_fd(fd))
    if why is not None:
        raise JaxcacheError(f"left as it is: {why}")
    if not data.endswith(b"\n"):  # an append in flight (or a torn last line): judged later
        rest = rest[:rest.rfind(b"\n") + 1] if b"\n" in rest else b""
        data = first + b"\n" + rest
    if not dry_run:
        _sweep(dfd, name, time.time())
    counts = dict.fromkeys(Fate, 0)
    kept: list[bytes] = []
    seen: set[bytes] = set()
    described: dict[bytes, bytes] = {}  # fingerprint id -> its line
    descriptions = 0  # fingerprint lines read, repeats included
    builds: set[bytes] = set()
    folders = _Folders()
    try:
        for n, raw in enumerate(rest.split(b"\n")):
            if not raw:
                continue
            if until_ns is not None and n % 64 == 0 and time.monotonic_ns() > until_ns:
                raise JaxcacheError("the time allowed ran out first; nothing was changed")
            m = ledger_file.match_line(raw)
            if m is None:
                f = ledger_file.match_fingerprint(raw)
                if f is None:
                    counts[Fate.TORN] += 1
                else:
                    described[f.group(1)] = raw
                    descriptions += 1
                continue
            if raw in seen:
                counts[Fate.REPEATED] += 1
                continue
            seen.add(raw)
            fate = _fate(m, folders)
            counts[fate] += 1
            if fate in (Fate.KEPT, Fate.UNJUDGED):
                kept.append(raw)
                if m.group(11):
                    builds.add(m.group(11))
    finally:
        folders.close()
    needed = [b for b in sorted(builds) if b in described]
    body = b"".join(described[b] + b"\n" for b in needed) + b"".join(raw + b"\n" for raw in kept)
    result = Compaction(path, dry_run, lines=sum(counts.values()),
                        kept=counts[Fate.KEPT] + counts[Fate.UNJUDGED], gone=counts[Fate.GONE],
                        changed=counts[Fate.CHANGED], repeated=counts[Fate.REPEATED],
                        torn=counts[Fate.TORN], unjudged=counts[Fate.UNJUDGED],
                        descriptions=descriptions - len(needed), bytes_before=len(data),
                        bytes_after=len(data))
    if dry_run:
        return replace(result, bytes_after=len(first) + 1 + len(body))
    if result.dropped or result.descriptions:
        return replace(result, bytes_after=_locked_replace(dfd, name, fd, data, body, until_ns))
    return result  # nothing to drop: the file stays as it is

def _locked_replace(dfd: int, name: str, fd: int, judged: bytes, body: bytes,
                    until_ns: int | None) -> int:
    """Under the exclusive lock: the file must still begin with what was judged (appenders
    only add lines); what they added since goes after the kept lines as it is."""
    wait = ledger_writes.LOCK_WAIT_S
    if until_ns is not None:
        wait = max(0.0, min(wait, (until_ns - time.monotonic_ns()) / 1e9))
    held = ledger_writes.hold(fd, dfd, name, exclusive=True, wait_s=wait)
    if held is None:
        raise JaxcacheError("it was replaced meanwhile (compacted by another process?); "
                            "nothing was changed")
    if not held:
        raise JaxcacheError(f"another process held it for {wait:.0f} s; nothing was changed")
    size = os.fstat(fd).st_size
    if size < len(judged) or os.pread(fd, len(judged), 0) != judged:
        raise JaxcacheError("it was rewritten meanwhile (not only appended to); nothing was "
                            "changed")
    tail = _read(fd, len(judged), size, "it grew meanwhile by more than")
    now = os.fstat(fd)
    if not ledger_writes.appendable(now):
        raise JaxcacheError("its mode or owner changed meanwhile; nothing was changed")
    return _replace(dfd, name, body + tail, now)


def _replace(dfd: int, name: str, body: bytes, old: os.stat_result) -> int:
    """Write the header and `body` to a new file beside the ledger, with the old file's mode and
    group (a team that made its ledger readable to another team, as docs/reference/audit.md
    says, keeps it so), sync it and rename it over the ledger (the caller holds the old file's
    lock); the new file's size. A group this user cannot give it: nothing is changed."""
    temp = f"{_TEMP.format(name=name)}{os.getpid()}.{time.time_ns()}"
    out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                  0o600, dir_fd=dfd)
    try:
        try:
            if os.fstat(out).st_gid != old.st_gid:
                try:
                    os.fchown(out, -1, old.st_gid)
                except OSError as exc:
                    raise JaxcacheError(f"its group (gid {old.st_gid}) cannot be kept on the "
                                        f"compacted file ({exc.strerror}); nothing was "
                                        "changed") from exc
            os.fchmod(out, stat.S_IMODE(old.st_mode) & 0o755)  # no one else writes it
            st = os.fstat(out)
            born = birth.of_fd(out)
            if born is None:
                raise JaxcacheError(ledger_file.NO_BIRTH)
            data = ledger_file.header(st.st_dev, st.st_ino, born) + body
            write_synced(out, data)
        finally:
            os.close(out)
        os.rename(temp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dfd)
        raise
    os.fsync(dfd)
    return len(data)

