"""Where a plain cache's entries came from: written by a job jaxcache watched, or not.

Who can write a directory now says nothing about who wrote what is in it: a cache restored by
CI (actions/cache, GitLab's `cache:`), copied (`cp -r`, `rsync -a`), extracted from a tarball or
baked into an image belongs to the runner's user, 0700, PRIVATE, while its entries are as
trustworthy as whoever could write the source. So each time a job jaxcache watches (`run`,
`enable()`) makes JAX write an entry, the job appends one line to the origin ledger in the
user's state directory (lifecycle/witness.py): the entry's name, the SHA-256 of the bytes JAX
wrote and the file's identity right after (device, inode, size, mtime and ctime in ns). The
ledger is a trusted input (trust/inputs.py: yours, writable by no one else, all the way up) and
holds no secret; nothing is kept inside the cache directory. Its first line binds it to the
file itself: the file's device, inode and birth time to the nanosecond (trust/birth.py). Device
and inode are predictable (a fresh tmpfs numbers them alike every time, ext4 hands a freed inode
back), the birth time is not: the kernel sets it when the inode is made and nothing changes it,
so a ledger that travels with a cache (a restored $HOME, a `cp -a`, an image built FROM another)
is a new file with a new birth time, and vouches for nothing. A filesystem that records no birth
time cannot tell a restored ledger from the original: there it vouches for nothing either
(fail closed). (Reading it as a trusted input is trust/ledger.py's: that loader audits the
ledger's folders, and this module is part of the audit.)

Judging an entry, fastest first: same identity as a ledger line -> yours (no byte read: ctime
cannot be set by a user, so an unchanged identity is an unchanged file); else a ledger line
for that name with the same size -> the file is read (bounded by that size) and hashed:
the digest of a line -> yours (the very bytes, e.g. copied back), else changed; a name the
ledger knows with another size -> changed; a name it does not know -> origin unknown. Files of
XLA's own sub-caches (GPU autotune results, the kernel cache) are written by XLA, which no
witness sees: always unknown; where origin is required the job runs with them off. What
this cannot know: an entry written by JAX without jaxcache has no line (unknown is the honest
answer), and a ledger is one machine's: on a fresh CI runner every restored entry is unknown.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from jaxcache.text import safe
from jaxcache.trust.findings import NOTE, UNSAFE, WARNING, Finding

TYPE_CHECKING = False  # typing itself costs `jaxcache run` ~2 ms: names for the type checker only
if TYPE_CHECKING:
    from typing import Any

    from jaxcache.trust.entries import Inventory

VERSION = "1"
LEDGER_NAME = "origin.ledger"
MAX_LINE = 8192
MAX_BYTES = 64 << 20  # trust/inputs.py's limit; the witness stops appending before it
HEADER = "0\tledger"  # the first line: "0 ledger 2 DEV INO BIRTH" (tabs), the file's own identity
BINDING = "2"  # the header's version: "1" named only DEV and INO, which a restore can reproduce
YOURS, UNKNOWN, CHANGED = "yours", "unknown", "changed"
ORDER = (YOURS, UNKNOWN, CHANGED)  # as reports list them
_HASH_CHUNK = 1 << 20
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


def ledger_path() -> str:
    """The user's origin ledger (beside the run records, in the state directory)."""
    from jaxcache.userdirs import user_dir

    return os.path.join(user_dir("state"), LEDGER_NAME)


@dataclass(frozen=True)
class Written:
    """One ledger line: an entry a watched job made JAX write."""

    name: str
    sha256: str
    size: int
    identity: tuple[int, int, int, int]  # dev, ino, mtime_ns, ctime_ns right after the write
    at: float  # unix seconds
    directory: str


def line(w: Written) -> bytes:
    """The ledger line for `w` (tab-separated; the directory last, as a JSON string)."""
    dev, ino, mtime, ctime = w.identity
    fields = (VERSION, w.name, w.sha256, str(w.size), str(dev), str(ino), str(mtime),
              str(ctime), f"{w.at:.3f}", json.dumps(w.directory))
    return ("\t".join(fields) + "\n").encode()


_NOT_IN_NAME = "\t\n\r\0/"  # what a ledger line's name field cannot hold


def recordable(name: str) -> bool:
    """A name a ledger line can hold (what JAX names entries always is)."""
    return 0 < len(name) <= 255 and not any(c in name for c in _NOT_IN_NAME)


# One ledger line, checked whole by one regular expression over its bytes (the name as
# recordable() allows, the digest, five decimal numbers, the time, the directory as the ASCII
# JSON string line() writes), so that loading checks every line (the skipped count is exact)
# while only looked-up lines are converted: every `run` loads the ledger before its job
# starts, and it grows by a line per entry written.
_LINE = re.compile(
    re.escape(VERSION.encode()) + rb"\t([^" + re.escape(_NOT_IN_NAME.encode())
    + rb"]{1,1020})\t([0-9a-f]{64})"
    rb"\t([0-9]+)\t([0-9]+)\t([0-9]+)\t([0-9]+)\t([0-9]+)\t([0-9]+(?:\.[0-9]+)?)"
    # the JSON string as an unrolled loop (plain run, then escape + plain run, ...): no two ways
    # to match the same text, so a torn line without its closing quote fails in linear time
    rb'\t("[^"\\\x00-\x1f\x80-\xff]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})'
    rb'[^"\\\x00-\x1f\x80-\xff]*)*")')


def _written(raw: bytes) -> Written:
    m = _LINE.fullmatch(raw)
    assert m is not None  # parse() kept only lines that match
    nums = [int(m.group(i)) for i in range(3, 8)]
    return Written(m.group(1).decode(), m.group(2).decode(), nums[0],
                   (nums[1], nums[2], nums[3], nums[4]), float(m.group(8)),
                   json.loads(m.group(9)))


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


@dataclass(frozen=True)
class Ledger:
    """What the ledger says, by entry name; `problem` when it could not be read (then nothing
    counts as yours: fail closed)."""

    path: str
    by_name: Mapping[str, tuple[Written, ...]]
    lines: int = 0
    skipped: int = 0  # lines that are not ledger lines (a torn write, an edit): named, skipped
    problem: str | None = None
    identity: tuple[int, int, int] | None = None  # dev, ino, birth of the file read, if bound


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
          identity: tuple[int, int, int | None] | None = None) -> Ledger:
    """The ledger in `data` (parse_chunks() of one chunk)."""
    return parse_chunks((data,), path, identity)


def parse_chunks(chunks: Iterable[bytes], path: str,
                 identity: tuple[int, int, int | None] | None = None) -> Ledger:
    """The ledger read as `chunks`, a line at a time (a ledger grows to tens of megabytes: only
    each line's bytes are kept, by name). With `identity` (the device, inode and birth time of
    the file it is read from), the header must name that very file (unbound()): a ledger
    copied, restored or baked into an image together with a cache is another file, and counts
    for nothing."""
    by_name: dict[str, list[bytes]] = {}
    lines = skipped = 0
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
                    return Ledger(path, {}, problem=problem)
            if not first.startswith(HEADER.encode() + b"\t"):
                parts.insert(0, first)
        for raw in parts:
            if not raw:
                continue
            lines += 1
            m = _LINE.fullmatch(raw) if len(raw) <= MAX_LINE else None
            if m is None:
                skipped += 1
                continue
            key = m.group(1)
            name = names.get(key, "")
            if name == "":
                name = names[key] = _name(key)
            if name is None:
                skipped += 1
                continue
            by_name.setdefault(name, []).append(raw)
    if first is None:  # no newline at all: one line (a header, a torn line) or nothing
        if identity is not None:
            problem = unbound(carry, *identity)
            if problem:
                return Ledger(path, {}, problem=problem)
        if carry.startswith(HEADER.encode() + b"\t"):
            carry = b""
    if carry:
        lines, skipped = lines + 1, skipped + 1  # a torn last line
    bound = None
    if identity is not None and identity[2] is not None:
        bound = (identity[0], identity[1], identity[2])
    return Ledger(path, _ByName(by_name), lines, skipped, identity=bound)


def _name(raw: bytes) -> str | None:
    """The name a line's bytes hold, if recordable() (the expression left out the characters
    a name cannot hold: only its encoding and length are left to check)."""
    try:
        name = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return name if len(name) <= 255 else None


@dataclass(frozen=True)
class EntryOrigin:
    name: str
    origin: str  # yours | unknown | changed
    written_at: float | None = None  # when a watched job wrote it (yours, changed)


@dataclass(frozen=True)
class Origins:
    """The origin of every entry JAX would load from one directory."""

    entries: tuple[EntryOrigin, ...]
    ledger: str
    ledger_problem: str | None = None
    ledger_skipped: int = 0
    # entries found yours by their bytes under a new identity (a copy of your own cache): the
    # lines that let the next audit know them without reading them (trust/ledger.py appends)
    relearned: tuple[Written, ...] = ()

    def count(self, origin: str) -> int:
        return sum(1 for e in self.entries if e.origin == origin)

    def counts(self) -> dict[str, int]:
        return {o: self.count(o) for o in ORDER}

    def by_name(self) -> dict[str, str]:
        return {e.name: e.origin for e in self.entries}


def digest_at(dir_fd: int, name: str, size: int) -> tuple[str, os.stat_result] | None:
    """SHA-256 of the regular file `name` and its status, read through the directory's
    descriptor without following a link, at most `size` + 1 bytes; None if it is not exactly
    `size` bytes, or was written while being read. The audit judges an entry with it, the
    witness checks with it that the file holds what JAX put."""
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    import hashlib  # only when an entry must be read: OpenSSL costs `run` ~2 ms to load

    h, total = hashlib.sha256(), 0
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != size:
            return None
        while total <= size:
            chunk = os.read(fd, min(_HASH_CHUNK, size + 1 - total))
            if not chunk:
                break
            h.update(chunk)
            total += len(chunk)
        after = os.fstat(fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    if total != size or (after.st_mtime_ns, after.st_ctime_ns) != (st.st_mtime_ns,
                                                                    st.st_ctime_ns):
        return None
    return h.hexdigest(), st


def judge(inventory: Inventory, dir_fd: int, ledger: Ledger, directory: str = "") -> Origins:
    """The origin of each compiled-code entry of `inventory` (trust/entries.py), the directory
    (`directory`, for the lines relearned) open as `dir_fd`."""
    out = []
    relearned = []
    for e in inventory.entries:
        if e.type == "file" and (e.kind == "xla-subcache" or e.name.startswith("xla_gpu_")):
            out.append(EntryOrigin(e.name, UNKNOWN))  # XLA writes these itself, unwitnessed
            continue
        if e.kind != "cache" or e.type != "file":
            continue
        known = ledger.by_name.get(e.name, ())
        if not known:
            out.append(EntryOrigin(e.name, UNKNOWN))
            continue
        same = [w for w in known if w.identity == e.identity and w.size == e.size]
        if same:
            out.append(EntryOrigin(e.name, YOURS, same[-1].at))
            continue
        sized = [w for w in known if w.size == e.size]
        read = digest_at(dir_fd, e.name, e.size) if sized else None
        match = [w for w in sized if read is not None and w.sha256 == read[0]]
        if match and read is not None:
            out.append(EntryOrigin(e.name, YOURS, match[-1].at))
            st = read[1]
            relearned.append(Written(e.name, read[0], e.size, (st.st_dev, st.st_ino,
                                     st.st_mtime_ns, st.st_ctime_ns), match[-1].at, directory))
        else:
            out.append(EntryOrigin(e.name, CHANGED, known[-1].at))
    return Origins(tuple(out), ledger.path, ledger.problem, ledger.skipped, tuple(relearned))


UNKNOWN_WHY = ("not written by any job jaxcache watched: if this directory was restored from a "
               "CI cache, copied or baked into an image, its entries are as trustworthy as "
               "whoever could write that source")
CHANGED_WHY = ("changed since a job jaxcache watched wrote it: whoever rewrote it chose the "
               "code it holds")
REMEDY = ("seal the cache where it is produced and read it with `jaxcache run --sealed` "
          "(docs/ci.md), or, if you trust that source, name it in the policy: [[cache]] "
          "path = {path} restored_from = \"<the source, and who can write it>\"")


def refusal(ci: str | None, required: bool, restored_from: tuple[str, ...]) -> str | None:
    """Why entries of unknown origin are refused here, or None (a warning, or accepted): under
    CI (`ci`: its name) or when `required` (--require-origin), unless the policy names their
    source (`restored_from`). The audit, `run` and `enable()` (which then also judge each
    load: jaxcompat.gate_gets) decide by this one rule."""
    if restored_from:
        return None
    if ci:
        return "running under " + ci
    return "as --require-origin asks" if required else None


def findings(origins: Origins, path: str, *, ci: str | None, required: bool,
             restored_from: tuple[str, ...]) -> list[Finding]:
    """What the origins mean for a plain reader (refusal() decides UNSAFE or a warning); the
    reason is said in words, with the remedy."""
    unknown, changed = origins.count(UNKNOWN), origins.count(CHANGED)
    out = []
    if origins.ledger_problem:
        out.append(Finding("origin.ledger", WARNING,
                           f"the origin ledger cannot be trusted, so no entry counts as "
                           f"written by your jobs: {origins.ledger_problem}", origins.ledger,
                           "fix what this says (e.g. make the state directory yours alone), "
                           "or move the ledger away: jobs you run with jaxcache start a new "
                           "one"))
    if origins.ledger_skipped:
        out.append(Finding("origin.ledger-lines", NOTE,
                           f"{origins.ledger_skipped} line(s) of the origin ledger are not "
                           "ledger lines (a torn write or an edit) and were skipped",
                           origins.ledger))
    if not unknown and not changed:
        return out
    if restored_from:
        named = "; ".join(safe(s) for s in restored_from)
        out.append(Finding("origin.declared", NOTE,
                           f"{_counted(unknown, changed)}: accepted because the policy names "
                           f"their source trusted ({named})", path))
        return out
    why = refusal(ci, required, restored_from)
    effect = UNSAFE if why else WARNING
    remedy = REMEDY.format(path=json.dumps(safe(path)))
    for origin, code, count, text in ((UNKNOWN, "origin.unknown", unknown, UNKNOWN_WHY),
                                      (CHANGED, "origin.changed", changed, CHANGED_WHY)):
        if not count:
            continue
        names = [e.name for e in origins.entries if e.origin == origin]
        shown = ", ".join(safe(n) for n in names[:3]) + (
            f" and {len(names) - 3} more" if len(names) > 3 else "")
        out.append(Finding(code, effect,
                           f"{count} entr{'y' if count == 1 else 'ies'} {text} ({shown})"
                           + (f"; refused {why}" if why else ""), path, remedy))
    return out


def _counted(unknown: int, changed: int) -> str:
    parts = []
    if unknown:
        parts.append(f"{unknown} entr{'y' if unknown == 1 else 'ies'} of unknown origin")
    if changed:
        parts.append(f"{changed} changed since written")
    return " and ".join(parts)
