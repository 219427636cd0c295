"""Find the run records in a directory: by name AND by content, through one directory fd.

A file counts as a record only if its name is one `jaxcache run` gives (new_name() below, with
`.rank<N>` for a rank) and it parses as a run record of a schema this jaxcache understands; a
file with such a name that is not one is left alone, and listed as skipped with why; files
with other names are not read at all.
Nothing follows a symlink: the directory is opened O_NOFOLLOW|O_DIRECTORY, each file
openat(O_NOFOLLOW|O_NONBLOCK) relative to it, checked with fstat (a regular file owned by you or
root) and read through that descriptor; prune.py unlinks relative to the same descriptor.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from typing import NamedTuple

from jaxcache.errors import JaxcacheError
from jaxcache.text import safe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.documents.fields import JsonObject

# 20261201T155636.123456789Z-4242.json, or ...-4242.rank1.json for one rank of a job
NAME = re.compile(r"^(\d{8}T\d{6})\.(\d{9})Z-\d+(?:\.rank\d+)?\.json$")
MAX_BYTES = 256 << 20  # the trusted-input limit for a record (trust/inputs/trusted_file.py)


def new_name() -> str:
    """A fresh file name of the NAME form (unique per call): run's records, bench's results."""
    now = time.time_ns()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now / 1e9))
    return f"{stamp}.{now % 1_000_000_000:09d}Z-{os.getpid()}.json"


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


def runs_dir() -> str:
    """Where `jaxcache run` writes records by default (the project file's [records] dir, else
    the state folder's jaxcache/runs: jaxcache/project/)."""
    from jaxcache.project import effective

    return effective.records_dir()


class Found(NamedTuple):
    """One record file: its name in the directory, identity (for prune's re-check) and doc."""

    name: str
    path: str
    when_ns: int  # from the name: when `jaxcache run` made it (UTC)
    size: int
    dev: int
    ino: int
    doc: JsonObject


class Skipped(NamedTuple):
    name: str
    why: str


class Scan(NamedTuple):
    directory: str
    exists: bool
    records: tuple[Found, ...]  # newest first
    skipped: tuple[Skipped, ...]  # files with a record's name that are not records


def when_ns(name: str) -> int | None:
    """The creation time a record's name carries, in ns since the epoch (UTC); None if the
    name is not a record's."""
    m = NAME.match(name)
    if m is None:
        return None
    try:
        t = time.strptime(m.group(1), "%Y%m%dT%H%M%S")
    except ValueError:
        return None
    import calendar

    return calendar.timegm(t) * 1_000_000_000 + int(m.group(2))


def open_dir(directory: str) -> int | None:
    """The records directory, opened without following a symlink; None if it does not exist.
    A symlink, a file, or a directory someone else can write is bad input (exit 2)."""
    if not directory:
        raise JaxcacheError("give a directory of run records (--dir)")
    try:
        fd = os.open(directory, _DIR_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ENOTDIR and os.path.islink(directory):
            exc.errno = errno.ELOOP  # O_DIRECTORY|O_NOFOLLOW on a link says ENOTDIR
        if exc.errno == errno.ELOOP:
            raise JaxcacheError(f"{safe(directory)} is a symbolic link: give the directory it "
                                "points to (records are never read through a link)") from None
        if exc.errno == errno.ENOTDIR:
            raise JaxcacheError(f"{safe(directory)} is not a directory") from None
        raise JaxcacheError(f"cannot open {safe(directory)}: {exc.strerror}") from None
    st = os.fstat(fd)
    if st.st_uid not in (os.geteuid(), 0) or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        os.close(fd)
        raise JaxcacheError(f"{safe(directory)} is not a private directory of yours (owner uid "
                            f"{st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o}): others could "
                            "put files there, so jaxcache neither trusts nor deletes them")
    return fd


def _read(dir_fd: int, name: str, limit: int = MAX_BYTES
          ) -> tuple[os.stat_result, bytes] | str:
    """The file's stat and bytes through one descriptor, or why it is not a record file
    (larger than `limit` among the reasons)."""
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        return "a symbolic link" if exc.errno == errno.ELOOP else f"cannot open: {exc.strerror}"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "not a regular file"
        if st.st_uid not in (os.geteuid(), 0):
            return f"owned by uid {st.st_uid}, not by you"
        if st.st_size > limit:
            return f"larger than {limit >> 20} MB"
        chunks, total = [], 0
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                return f"larger than {limit >> 20} MB"
        return st, b"".join(chunks)
    finally:
        os.close(fd)


def parse(data: bytes) -> dict[str, object] | str:
    """The record, or why these bytes are not a run record of a schema this jaxcache reads."""
    from jaxcache import validate as v
    from jaxcache.documents import read as documents

    try:
        doc = v.parse_json(data)
    except v.Unreadable as exc:
        return str(exc)
    if not isinstance(doc, dict):
        return "not a JSON object"
    problem = documents.record_problem(doc)
    return doc if problem is None else problem


def read_limited(dir_fd: int, name: str, limit: int) -> dict[str, object] | None:
    """One record of the open directory, read as scan_fd reads each (no larger than `limit`);
    None when it is not a record this jaxcache reads."""
    got = _read(dir_fd, name, limit)
    if isinstance(got, str):
        return None
    doc = parse(got[1])
    return None if isinstance(doc, str) else doc


def scan_fd(dir_fd: int, directory: str) -> Scan:
    """Every record in the open directory, newest first, and the look-alikes skipped."""
    found, skipped = [], []
    for name in os.listdir(dir_fd):
        when = when_ns(name)
        if when is None:
            continue  # not a record's name: not ours to read, list or delete
        got = _read(dir_fd, name)
        if isinstance(got, str):
            skipped.append(Skipped(name, got))
            continue
        st, data = got
        doc = parse(data)
        if isinstance(doc, str):
            skipped.append(Skipped(name, doc))
            continue
        found.append(Found(name, os.path.join(directory, name), when, st.st_size, st.st_dev,
                           st.st_ino, doc))
    found.sort(key=lambda f: (f.when_ns, f.name), reverse=True)
    skipped.sort(key=lambda s: s.name)
    return Scan(directory, True, tuple(found), tuple(skipped))


def scan(directory: str) -> Scan:
    """The records in `directory`; none (exists=False) when it does not exist yet."""
    fd = open_dir(directory)
    if fd is None:
        return Scan(directory, False, (), ())
    try:
        return scan_fd(fd, directory)
    finally:
        os.close(fd)


def when_created(created: str | None) -> int | None:
    """A record's `created` (UTC, ISO 8601, whole seconds) in ns since the epoch; None if
    absent or not that form."""
    import calendar

    try:
        return calendar.timegm(time.strptime(created or "", "%Y-%m-%dT%H:%M:%SZ")) * 10**9
    except ValueError:
        return None


def read_file(path: str) -> Found:
    """One record named on the command line (written by `run --record FILE`, under any name):
    read as every trusted input is (not through a link, owned by you or root, no one else can
    change it or a folder above it), and refused with one line unless it is a run record of a
    schema this jaxcache reads. Its time: the name's where it is a record's name, else the
    record's own `created`."""
    from jaxcache.documents import read as documents
    from jaxcache.records.run_document import RunRecord
    from jaxcache.trust.inputs import trusted_file as inputs

    found = inputs.read(path, inputs.RECORD)
    assert found is not None
    doc = documents.record_from(documents.object_from(found.data, path, "record"), path)
    name = os.path.basename(path)
    when = when_ns(name) or when_created(RunRecord.from_json(doc).created)
    if when is None:
        raise JaxcacheError(f"{safe(path)}: a run record without its time (`created`)")
    return Found(name, path, when, len(found.data), found.dev, found.ino, doc)
