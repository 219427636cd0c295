"""What a passed audit remembers about a cache directory, and the file that holds it.

The memo is an input: whoever could write it could make the next audit call a swapped entry
unchanged. So it lives in the user's state folder and is read as a trusted input (trust/inputs/
audit_memo.py), and this parser is strict and bounded: fixed fields in a fixed order, every
number plain ASCII digits, every count checked against what follows, every string escaped one
way. Anything else is a MemoError, and the audit judges every entry (fail closed).

One file: a header line, then one line per entry, the notable ones first (those the audit
must show by name even when nothing changed: of unknown origin, a name JAX does not write, a
sidecar), so that a directory found unchanged reads the header and those lines alone.
Fields are separated by tabs. A string that is empty, starts with `=` or `-`, or holds a byte
outside printable ASCII (tab, backslash and DEL included) is written as `=` and the hex of its
bytes; `-` is None.
"""

from __future__ import annotations

import math
import os
import re
from typing import NamedTuple

MAGIC = "jaxcache-audit-memo"
VERSION = "1"
MAX_ROWS = 1_000_000  # a directory with more entries is audited in full every time
MAX_HEADER = 64 << 10  # bytes, its newline included
# the kinds of entry a memo may hold (trust/kernel/entries.py's KINDS, directories excepted)
ROW_KINDS = frozenset({"cache", "signature", "used", "atime", "lockfile", "unexpected"})
# an entry's origin as the audit judged it; NOT_JUDGED: not compiled code, or not judged
ORIGINS = frozenset({"yours", "unknown", "changed"})
NOT_JUDGED = ""
_PLAIN = frozenset(range(0x21, 0x7F)) - {0x5C}  # printable ASCII but backslash (and space)


class MemoError(ValueError):
    """A memo that is not one this version wrote: the audit then judges every entry."""


class LedgerSeen(NamedTuple):
    """The origin ledger as the remembered judgement read it: the file (device, inode and
    size, stat'ed before it was read; None: there was none), and what the audit said of it."""

    path: str
    dev: int | None
    ino: int | None
    size: int | None  # lines are only ever appended (compaction replaces the file)
    problem: str | None
    skipped: int
    other_boot: int


class Header(NamedTuple):
    """What was verified, and under what: the directory's identity and its state (a name
    added, removed or renamed changes its mtime and ctime; no user can set a ctime), the
    mount it is on, this boot, the judging context (a digest of the user, the build and the
    origin rules), the ledger read, and the counts of what follows."""

    path: str  # the resolved directory
    uid: int  # whose judgement (the memo lives in that user's state folder)
    boot: str
    written_ns: int  # when the directory was stat'ed for it (time.time_ns())
    # dev, ino, mtime_ns, ctime_ns, nlink, mode, uid, gid
    directory: tuple[int, int, int, int, int, int, int, int]
    settled: bool  # the directory's ctime was well before written_ns (a later change moves it)
    mount: str  # the mount it is on (shortcut.mount_identity())
    context: str  # the judging context (shortcut.context())
    ledger: LedgerSeen | None  # None: origins were not judged (no entries)
    inspected_all: bool  # no process went uninspected, since every remembered entry was judged
    rows: int
    notable: int  # of the rows, the first `notable` ones
    notable_bytes: int
    rest_bytes: int
    elided: tuple[int, int, int]  # plain rows by kind: compiled entries, atime, lock files
    elided_bytes: int

    @property
    def stamp(self) -> tuple[int, int, int, int, int]:
        """What shows the directory's names unchanged: dev, ino, mtime, ctime (ns), nlink."""
        d = self.directory
        return d[0], d[1], d[2], d[3], d[4]


class Row(NamedTuple):
    """One entry as judged: what shows it unchanged (its inode and change time: any write,
    chmod, chown, ACL or link count change moves the ctime), and what the judgement said."""

    name: str
    kind: str
    ino: int
    size: int
    mode: int
    mtime_ns: int
    ctime_ns: int | None  # None: changed too close to the judgement to show it unchanged later
    origin: str  # ORIGINS, or NOT_JUDGED
    written_at: float | None  # when a watched job wrote it (yours, changed)
    writer: str | None  # the fingerprint id its ledger line names; None: build not judged


def encode(header: Header, notable: tuple[Row, ...], rest: tuple[Row, ...],
           carried: Carried | None = None) -> bytes:
    """The memo file's bytes; the header's counts are made to fit the rows given (`carried`:
    rows of an earlier memo kept as they were read, after `rest`)."""
    first = "".join(_row(r) for r in notable).encode("ascii")
    second = "".join(_row(r) for r in rest).encode("ascii") + (
        carried.lines if carried is not None else b"")
    count = len(notable) + len(rest) + (carried.rows if carried is not None else 0)
    h = header
    d = h.directory
    led = h.ledger
    fields = [MAGIC, VERSION, _s(h.path), str(h.uid), _s(h.boot), str(h.written_ns),
              *(str(x) for x in d), "1" if h.settled else "0", _s(h.mount), _s(h.context),
              *((_s(led.path), _n(led.dev), _n(led.ino), _n(led.size), _s(led.problem),
                 str(led.skipped), str(led.other_boot)) if led is not None else ("-",) * 7),
              "1" if h.inspected_all else "0", str(count), str(len(notable)),
              str(len(first)), str(len(second)), *(str(x) for x in h.elided),
              str(h.elided_bytes)]
    line = "\t".join(fields).encode("ascii") + b"\n"
    if len(line) > MAX_HEADER:
        raise MemoError("header too long")
    return line + first + second


# MAGIC VERSION path uid boot written_ns, the directory's 8, settled mount context, the
# ledger's 7, inspected_all rows notable notable_bytes rest_bytes, elided's 3, elided_bytes
_HEADER_FIELDS = 33


def header(line: bytes) -> Header:
    """The header from the file's first line (without its newline)."""
    f = line.split(b"\t")
    if len(f) != _HEADER_FIELDS or f[0] != MAGIC.encode() or f[1] != VERSION.encode():
        raise MemoError("not a memo of this version")
    d = [_int(x) for x in f[6:14]]
    if f[17] == b"-":
        if f[18:24] != [b"-"] * 6:
            raise MemoError("ledger fields")
        led = None
    else:
        found = (_maybe(f[18]), _maybe(f[19]), _maybe(f[20]))
        if None in found and found != (None, None, None):
            raise MemoError("ledger fields")
        led = LedgerSeen(_need(f[17]), *found, _str(f[21]), _nat(f[22]), _nat(f[23]))
    h = Header(_need(f[2]), _nat(f[3]), _need(f[4]), _nat(f[5]),
               (d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]), _flag(f[14]), _need(f[15]),
               _need(f[16]), led, _flag(f[24]), _nat(f[25]), _nat(f[26]), _nat(f[27]),
               _nat(f[28]), (_nat(f[29]), _nat(f[30]), _nat(f[31])), _nat(f[32]))
    if h.rows > MAX_ROWS or h.notable > h.rows or sum(h.elided) > h.rows:
        raise MemoError("counts")
    return h


def rows(data: bytes, count: int) -> tuple[Row, ...]:
    """`count` rows from `data`, which holds exactly them: checked whole by one pattern, then
    read (a cache of 100,000 entries has as many rows to read when its directory changed)."""
    row, table = _patterns()
    if table.fullmatch(data) is None:
        raise MemoError("rows")
    found = row.findall(data)
    if len(found) != count:
        raise MemoError("row count")
    return tuple(_parsed(f) for f in found)


class Carried(NamedTuple):
    """Rows of a memo carried into the next as the very bytes read (lines() checked them):
    unchanged entries, so unchanged rows."""

    lines: bytes
    rows: int
    kinds: tuple[int, int, int]  # compiled entries, atime, lock files
    bytes: int


def lines(data: bytes, count: int) -> dict[str, bytes]:
    """`count` rows from `data`, which holds exactly them, checked whole by one pattern, each
    kept as its line (its newline included) by its entry's name: what a changed directory
    compares its entries with (fields()), without reading every row into a Row."""
    if _patterns()[1].fullmatch(data) is None:
        raise MemoError("rows")
    out = {}
    for line in data.splitlines(keepends=True):
        out[_name(line[:line.index(b"\t")])] = line
    if len(out) != count:
        raise MemoError("row count")
    return out


def fields(line: bytes) -> tuple[str, int, int, int | None]:
    """A checked line's kind, inode, size and ctime (None: `-`)."""
    f = line.split(b"\t", 7)
    return _WORDS[f[1]], int(f[2]), int(f[3]), None if f[6] == b"-" else int(f[6])


def _name(raw: bytes) -> str:
    """A row's name field (checked by _FIELDS: plain, or `=` and hex), as the name."""
    if raw[:1] == b"=":
        name = os.fsdecode(bytes.fromhex(raw[1:].decode("ascii")))
        if "/" in name or "\0" in name or len(os.fsencode(name)) > 255:
            raise MemoError("row name")
    else:
        name = raw.decode("ascii")
        if len(raw) > 255:
            raise MemoError("row name")
    if name in (".", ".."):
        raise MemoError("row name")
    return name


def _row(r: Row) -> str:
    ctime = "-" if r.ctime_ns is None else r.ctime_ns
    at = "-" if r.written_at is None else repr(r.written_at)
    return (f"{_s(r.name)}\t{r.kind}\t{r.ino}\t{r.size}\t{r.mode}\t{r.mtime_ns}\t{ctime}\t"
            f"{r.origin or '-'}\t{at}\t{_s(r.writer)}\n")


# one row: a plain name (no `/`, `\\`, leading `=` or `-`) or `=` and hex, a kind, four
# naturals, an mtime, a ctime or `-`, an origin or `-`, a time or `-`, a writer
_FIELDS = (
    rb"([\x21-\x2c\x2e\x30-\x3c\x3e-\x5b\x5d-\x7e][\x21-\x2e\x30-\x5b\x5d-\x7e]*"
    rb"|=(?:[0-9a-f]{2})+)"
    rb"\t(cache|signature|used|atime|lockfile|unexpected)"
    rb"\t([0-9]{1,20})\t([0-9]{1,20})\t([0-9]{1,20})\t(-?[0-9]{1,20})\t(-|-?[0-9]{1,20})"
    rb"\t(-|yours|unknown|changed)\t(-|[0-9][0-9.e+-]{0,31})"
    rb"\t(-|=(?:[0-9a-f]{2})*|[\x21-\x2c\x2e-\x3c\x3e-\x5b\x5d-\x7e][\x21-\x5b\x5d-\x7e]*)\n")
_PATTERNS: list[re.Pattern[bytes]] = []  # compiled when first read (not on every audit's import)


def _patterns() -> tuple[re.Pattern[bytes], re.Pattern[bytes]]:
    """_FIELDS as one row (its fields captured), and as a whole table (possessive: linear)."""
    if not _PATTERNS:
        _PATTERNS.append(re.compile(_FIELDS))
        _PATTERNS.append(re.compile(rb"(?:" + re.sub(rb"\((?!\?)", b"(?:", _FIELDS) + rb")*+"))
    return _PATTERNS[0], _PATTERNS[1]


_WORDS = {w.encode(): w for w in (*ROW_KINDS, *ORIGINS)} | {b"-": NOT_JUDGED}


def _parsed(f: tuple[bytes, ...]) -> Row:
    """A row from the fields _patterns()[0] matched (what it cannot say is checked here)."""
    raw, kind, ino, size, mode, mtime, ctime, origin, at, writer = f
    return Row(_name(raw), _WORDS[kind], int(ino), int(size), int(mode), int(mtime),
               None if ctime == b"-" else int(ctime), _WORDS[origin],
               None if at == b"-" else _time(at), None if writer == b"-" else _str(writer))


def _time(field: bytes) -> float:
    try:
        value = float(field)
    except ValueError:
        raise MemoError("time field") from None
    if not math.isfinite(value):
        raise MemoError("time field")
    return value


def _s(value: str | None) -> str:
    """A string as a field: itself where plainly printable, else `=` and its bytes in hex."""
    if value is None:
        return "-"
    if value and value.isascii() and value.isprintable() and " " not in value and \
            "\\" not in value and value[0] not in "=-":
        return value
    return "=" + os.fsencode(value).hex()


def _str(field: bytes) -> str | None:
    if field == b"-":
        return None
    if field.startswith(b"="):
        try:
            return os.fsdecode(bytes.fromhex(field[1:].decode("ascii")))
        except ValueError:
            raise MemoError("hex field") from None
    if not field or field[:1] == b"-" or not _PLAIN.issuperset(field):
        raise MemoError("string field")
    return field.decode("ascii")


def _need(field: bytes) -> str:
    value = _str(field)
    if value is None:
        raise MemoError("missing field")
    return value


def _nat(field: bytes) -> int:
    """A natural number as written: ASCII digits only (int() would take signs, spaces, `_`)."""
    if not field or len(field) > 20 or not field.isdigit():
        raise MemoError("number field")
    return int(field)


def _n(value: int | None) -> str:
    return "-" if value is None else str(value)


def _maybe(field: bytes) -> int | None:
    return None if field == b"-" else _nat(field)


def _int(field: bytes) -> int:
    """A number that may be negative (a time before 1970)."""
    return -_nat(field[1:]) if field[:1] == b"-" else _nat(field)


def _flag(field: bytes) -> bool:
    if field not in (b"0", b"1"):
        raise MemoError("flag field")
    return field == b"1"

