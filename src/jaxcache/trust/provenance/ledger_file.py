"""The origin ledger's file: its lines, the header that binds it to the file itself, reading
it a line at a time (adding lines to that very file, under its lock, is
trust/provenance/ledger_writes.py's).

A line says what a watched job made JAX write (trust/provenance/origin.py judges entries with them);
the witness (lifecycle/witness.py) creates the file and appends as JAX writes, and an audit appends
the new identity of an entry it found yours by its bytes (relearn()). The first line names the
file's device, inode and birth time to the nanosecond (trust/provenance/birth.py): device and inode
are predictable (a fresh tmpfs numbers them alike every time, ext4 hands a freed inode back), the
birth time is not: the kernel sets it when the inode is made and nothing changes it, so a ledger
that travels with a cache (a restored $HOME, a `cp -a`, an image built FROM another) is a new file
with a new birth time, and vouches for nothing. A filesystem that records no birth time cannot tell
a restored ledger from the original: there it vouches for nothing either (fail closed). A
block-level copy (a disk image or volume snapshot restored as a CI cache) reproduces the file to the
byte, birth time included: so each line names the boot it was written in, and under CI only this
boot's lines are kept (fingerprint/boot.py, parse_chunks(only_boot=)). Reading it as a trusted input
(its folders audited) is trust/inputs/ledger.py's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import NamedTuple

from jaxcache.fingerprint.model import SHORT, Fingerprint

TYPE_CHECKING = False  # typing itself costs `jaxcache run` ~2 ms: names for the type checker only
if TYPE_CHECKING:
    from typing import Any

VERSION = "3"  # a line's: "3" adds the writer's fingerprint id, "2" the boot it was written in
OLDER = ("2",)  # versions still read (a "2" line: the build that wrote it is not recorded)
FINGERPRINT = "fingerprint"  # a line "fingerprint ID JSON": what a writer's id stands for
MAX_LINE = 8192
HEADER = "0\tledger"  # the first line: "0 ledger 2 DEV INO BIRTH" (tabs), the file's own identity
BINDING = "2"  # the header's version: "1" named only DEV and INO, which a restore can reproduce


class Written(NamedTuple):
    """One ledger line: an entry a watched job made JAX write."""

    name: str
    sha256: str
    size: int
    identity: tuple[int, int, int, int]  # dev, ino, mtime_ns, ctime_ns right after the write
    at: float  # unix seconds
    directory: str
    boot: str = ""  # the boot id when written (fingerprint/boot.py); "": not known
    # the id (fingerprint.SHORT hex digits) of the writer's fingerprint: which build of jaxlib
    # on which CPU compiled the entry ("": not recorded, a line of version "2");
    # a `fingerprint` line of the same ledger says what it stands for (fingerprint_line())
    build: str = ""


def line(w: Written) -> bytes:
    """The ledger line for `w` (tab-separated; the directory last, as a JSON string)."""
    dev, ino, mtime, ctime = w.identity
    fields = (VERSION, w.name, w.sha256, str(w.size), str(dev), str(ino), str(mtime),
              str(ctime), f"{w.at:.3f}", w.boot or "-", w.build or "-", json.dumps(w.directory))
    return ("\t".join(fields) + "\n").encode()


def fingerprint_line(found: Fingerprint) -> bytes:
    """The line that says what `found.id` stands for: the build's digest and versions, the
    machine and the CPU (not the list of shared objects, nor the accelerator, which the id
    does not cover); b"" when it would not fit in MAX_LINE (the writer's entries are then
    judged by the id alone: another id is another build or host, fail closed)."""
    doc = found.to_json()
    if found.build is not None:
        doc["build"] = {"digest": found.build.digest, "versions": dict(found.build.versions)}
    doc.pop("accelerator", None)
    doc.pop("id", None)
    text = f"{FINGERPRINT}\t{found.id}\t{json.dumps(doc, separators=(',', ':'))}\n"
    data = text.encode()
    return data if len(data) <= MAX_LINE and _FINGERPRINT.fullmatch(data[:-1]) else b""


_NOT_IN_NAME = "\t\n\r\0/"  # what a ledger line's name field cannot hold


def recordable(name: str) -> bool:
    """A name a ledger line can hold (what JAX names entries always is)."""
    return 0 < len(name) <= 255 and not any(c in name for c in _NOT_IN_NAME)


# One ledger line, checked whole by one regular expression over its bytes (the version, the
# name as recordable() allows, the digest, five decimal numbers, the time, the boot, from
# version 3 the writer's fingerprint id, the directory as the ASCII JSON string line() writes),
# so that loading checks every line (the skipped count is exact) while only looked-up lines
# are converted: every `run` loads the ledger before its job starts, and it grows by a line
# per entry written.
_LINE = re.compile(
    rb"(?:(" + re.escape(VERSION.encode()) + rb")|"
    + b"|".join(re.escape(v.encode()) for v in OLDER) + rb")"
    rb"\t([^" + re.escape(_NOT_IN_NAME.encode()) + rb"]{1,1020})\t([0-9a-f]{64})"
    rb"\t([0-9]+)\t([0-9]+)\t([0-9]+)\t([0-9]+)\t([0-9]+)\t([0-9]+(?:\.[0-9]+)?)"
    rb"\t([0-9a-f]{32}|-)"
    # the writer's fingerprint id: in a line of VERSION (group 1 matched), in no older one
    rb"(?(1)\t([0-9a-f]{" + str(SHORT).encode() + rb"}|-))"
    # the JSON string as an unrolled loop (plain run, then escape + plain run, ...): no two ways
    # to match the same text, so a torn line without its closing quote fails in linear time
    rb'\t("[^"\\\x00-\x1f\x80-\xff]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})'
    rb'[^"\\\x00-\x1f\x80-\xff]*)*")')
# what a fingerprint id stands for: the id, then one JSON object of printable ASCII (json.dumps
# escapes the rest); parsed, validated and bounded (fingerprint.model) only when looked up
_FINGERPRINT = re.compile(re.escape(FINGERPRINT.encode()) + rb"\t([0-9a-f]{"
                          + str(SHORT).encode() + rb"})\t(\{[\x20-\x7e]*\})")


def match_line(raw: bytes) -> re.Match[bytes] | None:
    """`raw` (one line, no newline) as a ledger line: groups 2 name, 3 digest, 4 size, 5-8
    device, inode, mtime and ctime, 9 time, 10 boot, 11 writer id (None before version 3),
    12 the directory as JSON; None when it is not one."""
    return _LINE.fullmatch(raw) if len(raw) <= MAX_LINE else None


def match_fingerprint(raw: bytes) -> re.Match[bytes] | None:
    """`raw` as a `fingerprint` line: group 1 the id, 2 its JSON; None when it is not one."""
    return _FINGERPRINT.fullmatch(raw) if len(raw) <= MAX_LINE else None


def _written(raw: bytes) -> Written:
    m = _LINE.fullmatch(raw)
    assert m is not None  # parse() kept only lines that match
    nums = [int(m.group(i)) for i in range(4, 9)]
    boot = m.group(10).decode()
    build = (m.group(11) or b"-").decode()
    return Written(m.group(2).decode(), m.group(3).decode(), nums[0],
                   (nums[1], nums[2], nums[3], nums[4]), float(m.group(9)),
                   json.loads(m.group(12)), "" if boot == "-" else boot,
                   "" if build == "-" else build)


class _ByName(Mapping[str, tuple[Written, ...]]):
    """Ledger lines by entry name, each converted to a Written the first time it is asked for."""

    def __init__(self, lines: dict[str, list[bytes]]) -> None:
        self._lines = lines
        self._done: dict[str, tuple[Written, ...]] = {}

    def __getitem__(self, name: str) -> tuple[Written, ...]:
        got = self._done.get(name)
        if got is None:
            got = self._done[name] = tuple(_written(raw) for raw in self._lines[name])
        return got

    def get(self, name: str, default: Any = None) -> Any:  # Mapping.get, ~10x faster
        return self[name] if name in self._lines else default

    def __iter__(self) -> Iterator[str]:
        return iter(self._lines)

    def __len__(self) -> int:
        return len(self._lines)


class _Fingerprints(Mapping[str, "Fingerprint | None"]):
    """What each writer's fingerprint id stands for (its `fingerprint` line), parsed and
    validated the first time it is asked for; None where that line is not a fingerprint."""

    def __init__(self, lines: dict[str, bytes]) -> None:
        self._lines = lines
        self._done: dict[str, Fingerprint | None] = {}

    def __getitem__(self, fid: str) -> Fingerprint | None:
        if fid not in self._done:
            found = _fingerprint(self._lines[fid])
            # a line that stands for another id than the one it is filed under says nothing
            self._done[fid] = found if found is not None and found.id == fid else None
        return self._done[fid]

    def __iter__(self) -> Iterator[str]:
        return iter(self._lines)

    def __len__(self) -> int:
        return len(self._lines)


def _fingerprint(raw: bytes) -> Fingerprint | None:
    from jaxcache import validate

    try:
        return Fingerprint.from_json(json.loads(raw), "a fingerprint line of the origin ledger")
    except (ValueError, TypeError, KeyError, RecursionError, validate.Invalid):
        return None


class Ledger(NamedTuple):
    """What the ledger says, by entry name; `problem` when it could not be read (then nothing
    counts as yours: fail closed)."""

    path: str
    by_name: Mapping[str, tuple[Written, ...]]
    lines: int = 0
    skipped: int = 0  # lines that are not ledger lines (a torn write, an edit): named, skipped
    problem: str | None = None
    identity: tuple[int, int, int] | None = None  # dev, ino, birth of the file read, if bound
    other_boot: int = 0  # lines left out because written in another boot (only_boot)
    # writer fingerprint id -> what it stands for (None: its line is not a fingerprint)
    fingerprints: Mapping[str, Fingerprint | None] = _Fingerprints({})
    # whose ledger this is, where it is another writer's (a policy's trusted_ledgers): the
    # name of the trusted writer that owns the file; "": yours
    owner: str = ""
    # how to read another writer's ledger, as a trusted input that writer may own
    # (trust/inputs/ledger.py's load_trusted, set by its load(): that loader audits the folders
    # above, so it sits above the audit, which asks it for the ledgers a policy names):
    # (path, the users the policy trusts there) -> Ledger
    others: Callable[[str, frozenset[int]], Ledger] | None = None


def header(dev: int, ino: int, born: int | None) -> bytes:
    """The first line of a ledger file with this device, inode and birth time."""
    return f"{HEADER}\t{BINDING}\t{dev}\t{ino}\t{'-' if born is None else born}\n".encode()


COPIED = ("its first line does not name this very file (its device, inode and birth time): it "
          "was copied, restored or baked into an image with the cache (or made by another "
          "tool), so its lines vouch for nothing here")
OLD_BINDING = ("it names only its file's device and inode (an older jaxcache made it so), "
               "which a restore can reproduce, so its lines vouch for nothing; the next job "
               "jaxcache watches sets it aside and starts a new one")
NO_BIRTH = ("its filesystem does not record when a file was made, so a restored or copied "
            "ledger cannot be told from the original and its lines vouch for nothing; keep the "
            "state directory on a local filesystem (XDG_STATE_HOME)")
_OLD_HEADER = re.compile(re.escape(HEADER.encode()) + rb"\t[0-9]+\t[0-9]+")


def unbound(first: bytes, dev: int, ino: int, born: int | None) -> str | None:
    """Why a ledger whose first line is `first`, read from the file with this device, inode and
    birth time, vouches for nothing here; None when the line names that very file."""
    if born is None:
        return NO_BIRTH
    if first == header(dev, ino, born).rstrip(b"\n"):
        return None
    return OLD_BINDING if _OLD_HEADER.fullmatch(first) else COPIED


def parse(data: bytes, path: str,
          identity: tuple[int, int, int | None] | None = None,
          only_boot: str | None = None) -> Ledger:
    """The ledger in `data` (parse_chunks() of one chunk)."""
    return parse_chunks((data,), path, identity, only_boot)


def parse_chunks(chunks: Iterable[bytes], path: str,
                 identity: tuple[int, int, int | None] | None = None,
                 only_boot: str | None = None, owner: str = "",
                 others: Callable[[str, frozenset[int]], Ledger] | None = None) -> Ledger:
    """The ledger read as `chunks`, a line at a time (a ledger grows to tens of megabytes: only
    each line's bytes are kept, by name). With `identity` (the device, inode and birth time of
    the file it is read from), the header must name that very file (unbound()): a ledger
    copied, restored or baked into an image together with a cache is another file, and counts
    for nothing. With `only_boot` (under CI: this boot's id), lines written in another boot
    (or in none known) are left out and counted as `other_boot`. `owner` and
    `others`: as Ledger holds them (whose ledger, how to read another writer's)."""
    by_name: dict[str, list[bytes]] = {}
    described: dict[str, bytes] = {}
    lines = skipped = other = 0
    # an unknown boot under CI: no line can be told to be of this boot, none is kept
    boot = (only_boot.encode() or b"unknown") if only_boot is not None else None
    carry = b""
    first: bytes | None = None
    names: dict[bytes, str | None] = {}  # each name decoded once (a name has many lines)
    for chunk in chunks:
        parts = (carry + chunk).split(b"\n")
        carry = parts.pop()
        if first is None and parts:
            first = parts.pop(0)
            if identity is not None:
                problem = unbound(first, *identity)
                if problem:
                    return Ledger(path, {}, problem=problem, owner=owner, others=others)
            if not first.startswith(HEADER.encode() + b"\t"):
                parts.insert(0, first)
        for raw in parts:
            if not raw:
                continue
            lines += 1
            m = _LINE.fullmatch(raw) if len(raw) <= MAX_LINE else None
            if m is None:
                f = _FINGERPRINT.fullmatch(raw) if len(raw) <= MAX_LINE else None
                if f is None:
                    skipped += 1
                else:  # vouches for nothing by itself: kept whatever boot wrote it
                    described[f.group(1).decode()] = f.group(2)
                continue
            key = m.group(2)
            name = names.get(key, "")
            if name == "":
                name = names[key] = _name(key)
            if name is None:
                skipped += 1
                continue
            if boot is not None and m.group(10) != boot:
                other += 1
                continue
            by_name.setdefault(name, []).append(raw)
    if first is None:  # no newline at all: one line (a header, a torn line) or nothing
        if identity is not None:
            problem = unbound(carry, *identity)
            if problem:
                return Ledger(path, {}, problem=problem, owner=owner, others=others)
        if carry.startswith(HEADER.encode() + b"\t"):
            carry = b""
    if carry:
        lines, skipped = lines + 1, skipped + 1  # a torn last line
    bound = None
    if identity is not None and identity[2] is not None:
        bound = (identity[0], identity[1], identity[2])
    return Ledger(path, _ByName(by_name), lines, skipped, identity=bound, other_boot=other,
                  fingerprints=_Fingerprints(described), owner=owner,
                  others=others)


def _name(raw: bytes) -> str | None:
    """The name a line's bytes hold, if recordable() (the expression left out the characters
    a name cannot hold: only its encoding and length are left to check)."""
    try:
        name = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return name if len(name) <= 255 else None
