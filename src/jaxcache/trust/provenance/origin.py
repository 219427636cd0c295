"""Where a plain cache's entries came from: written by a job jaxcache watched, or not.

Who can write a directory now says nothing about who wrote what is in it: a cache restored by
CI (actions/cache, GitLab's `cache:`), copied (`cp -r`, `rsync -a`), extracted from a tarball or
baked into an image belongs to the runner's user, 0700, PRIVATE, while its entries are as
trustworthy as whoever could write the source. So each time a job jaxcache watches (`run`,
`enable()`) makes JAX write an entry, the job appends one line to the origin ledger in the
user's state directory (lifecycle/witness.py): the entry's name, the SHA-256 of the bytes JAX
wrote and the file's identity right after (device, inode, size, mtime and ctime in ns). The
ledger is a trusted input (trust/inputs/trusted_file.py: yours, writable by no one else, all the way
up) and holds no secret; nothing is kept inside the cache directory. Its first line binds it to the
file itself, by the file's birth time: a ledger that travels with a cache vouches for nothing (its
format and binding: trust/provenance/ledger_file.py; reading it as a trusted input is
trust/inputs/ledger.py's: that loader audits the ledger's folders, and this module is part of
the audit).

Judging an entry, fastest first: same identity as a ledger line, for a file only you can write
-> yours (no byte read: ctime cannot be set by a user, so an unchanged identity is an unchanged
file, unless someone holds it mapped writable: see _sole()); else a ledger line
for that name with the same size -> the file is read (bounded by that size) and hashed:
the digest of a line -> yours (the very bytes, e.g. copied back), else changed if a line was
written for this directory (rewritten in place), else unknown (the same key compiled in another
cache may hold other bytes); a name it does not know -> origin unknown. Files of
XLA's own sub-caches (GPU autotune results, the kernel cache) are written by XLA, which no
witness sees: always unknown; where origin is required the job runs with them off. What
this cannot know: an entry written by JAX without jaxcache has no line (unknown is the honest
answer), and a ledger is one machine's: on a fresh CI runner every restored entry is unknown.

Which build wrote an entry: each line of version 3 names the writer's fingerprint id
(fingerprint/: the digest of jaxlib's and the plugins' shared objects, the machine, the CPU
features) and a `fingerprint` line says what that id stands for. JAX's key holds jaxlib's
version string, not its bytes (JAX issue 18750): after an upgrade in place or a rebuild with the
same version, entries of the old build hit and can crash or mislead. built() judges a line for
the fingerprint judging now, by fingerprint.rule (the same id: the same build and host; else
the writer's fingerprint line against this one's); entries of unknown origin have no line, so
nothing is known of their build, and the reports say so. Every `run` judges its entries before
the job: the ids are compared as strings, and fingerprint.rule (~2 ms to import) is imported
only where they differ, or for a report.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from jaxcache.trust.provenance.ledger_file import Ledger, Written
from jaxcache.trust.provenance.ledger_writes import relearn

TYPE_CHECKING = False  # typing itself costs `jaxcache run` ~2 ms: names for the type checker only
if TYPE_CHECKING:
    from jaxcache.fingerprint.model import Fingerprint
    from jaxcache.fingerprint.rule import Judgement
    from jaxcache.trust.kernel.entries import Inventory

YOURS, UNKNOWN, CHANGED = "yours", "unknown", "changed"
# written by a watched job of a writer the policy trusts, by that writer's own ledger (the
# policy's trusted_ledgers, trust/inputs/ledger.py's load_trusted)
VOUCHED = "vouched"
ORDER = (YOURS, VOUCHED, UNKNOWN, CHANGED)  # as reports list them
_HASH_CHUNK = 1 << 20
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


class EntryOrigin(NamedTuple):
    name: str
    origin: str  # yours | vouched | unknown | changed
    written_at: float | None = None  # when a watched job wrote it (yours, vouched, changed)
    # the writer's fingerprint id as the ledger line names it ("": the line names none, an
    # older jaxcache's); None: not judged (no fingerprint given, or not yours: nothing is known
    # of the build that wrote an entry of unknown origin)
    writer: str | None = None
    # where the writer's id is not the judging one's: fingerprint.rule's judgement of the
    # writer's fingerprint line (built()), and whether it names another build or host
    build: Judgement | None = None
    other_build: bool = False
    # vouched: whose ledger vouches for it (the trusted writer that owns that ledger)
    vouched_by: str = ""
    owner: int | None = None  # the file's owner (uid), as the inventory found it


class Origins(NamedTuple):
    """The origin of every entry JAX would load from one directory."""

    entries: tuple[EntryOrigin, ...]
    ledger: str
    ledger_problem: str | None = None
    ledger_skipped: int = 0
    ledger_other_boot: int = 0  # lines left out under CI: written before this machine started
    # entries found yours by their bytes under a new identity (a copy of your own cache): the
    # lines judge() appended so that the next audit knows them without reading them
    relearned: tuple[Written, ...] = ()
    # the fingerprint the builds were judged for (None: not judged), and the ledger's
    # fingerprint lines (what each writer's id stands for)
    reader: Fingerprint | None = None
    described: Mapping[str, Fingerprint | None] = MappingProxyType({})
    # the ledgers of trusted writers consulted (the policy's trusted_ledgers), each with its
    # owner's name, or its problem (then it vouched for nothing)
    trusted: tuple[Ledger, ...] = ()
    # entries of yours by this very build (or not judged for a build), judged so earlier and
    # found unchanged since (trust/judgement/shortcut.py): counted, not listed
    elided_yours: int = 0

    def count(self, origin: object, /) -> int:  # tuple's count, as the origins' counter
        return sum(1 for e in self.entries if e.origin == origin) + (
            self.elided_yours if origin == YOURS else 0)

    def counts(self) -> dict[str, int]:
        return {o: self.count(o) for o in ORDER}

    def by_name(self) -> dict[str, str]:
        return {e.name: e.origin for e in self.entries}

    def vouched(self) -> dict[str, list[str]]:
        """The entries trusted writers' ledgers vouch for, by the ledger's owner."""
        out: dict[str, list[str]] = {}
        for e in self.entries:
            if e.origin == VOUCHED:
                out.setdefault(e.vouched_by, []).append(e.name)
        return out

    def whose(self, names: list[str]) -> dict[str, list[str]]:
        """`names` (entries of yours or vouched) by whose they are: "yours", or the trusted
        writer's possessive ("teamb's") where that writer's ledger vouched for them."""
        by = {e.name: e.vouched_by for e in self.entries}
        out: dict[str, list[str]] = {}
        for n in names:
            who = by.get(n, "")
            out.setdefault(f"{who}'s" if who else "yours", []).append(n)
        return out

    def whose_said(self, names: list[str]) -> str:
        """'2 of yours and 1 of teamb's' (whose()), or "" where all are yours: the words
        reports put beside entries of yours or vouched for."""
        by = self.whose(names)
        if list(by) in ([], ["yours"]):
            return ""
        return said_whose({w: len(n) for w, n in by.items()})

    def other_build(self) -> tuple[EntryOrigin, ...]:
        return tuple(e for e in self.entries if e.other_build)

    def judgement(self, e: EntryOrigin) -> Judgement | None:
        """The build that wrote `e`, judged for the reader (fingerprint.rule: for reports,
        which may import it); None where not judged."""
        if e.build is not None:
            return e.build
        if e.writer is None or self.reader is None:
            return None
        return built(e.writer, self.described, self.reader, _id(self.reader))[0]

    def build_counts(self) -> dict[str, int]:
        """How many entries of yours each judgement of their build has (rule.Outcome's
        values), as reports list them."""
        from jaxcache.fingerprint.rule import Outcome

        out = {o.value: 0 for o in Outcome}
        for e in self.entries:
            j = self.judgement(e)
            if j is not None:
                out[j.outcome.value] += 1
        if self.reader is not None:  # elided entries were judged by this very build
            out[Outcome.SAME.value] += self.elided_yours
        return out

    def unknown_builds(self) -> dict[str, list[str]]:
        """Entries of yours whose build could not be compared, by why (without importing
        fingerprint.rule where nothing differs: every `run` asks)."""
        out: dict[str, list[str]] = {}
        no_jaxlib = self.reader is not None and self.reader.build is None
        for e in self.entries:
            if e.writer is None:
                continue
            why = NOT_RECORDED_WHY if not e.writer else NO_JAXLIB_WHY if no_jaxlib else (
                e.build.why_unknown if e.build is not None and e.build.why_unknown
                and not e.other_build else "")
            if why:
                out.setdefault(why, []).append(e.name)
        return out


def said_whose(counts: Mapping[str, int]) -> str:
    """'2 of yours and 1 of teamb's', from counts by whose (Origins.whose()'s keys)."""
    return " and ".join(f"{n} of {w}" for w, n in counts.items())


NOT_RECORDED_WHY = "the ledger line does not name the build: an older jaxcache wrote it"
NO_JAXLIB_WHY = "no jaxlib in this Python to compare"


def _id(reader: Fingerprint) -> str:
    return reader.id if reader.build is not None else ""


def _differs(writer_id: str, reader: Fingerprint, reader_id: str) -> bool:
    """Does a line naming `writer_id` need fingerprint.rule to judge it for `reader`? Only
    where both name a build and the ids differ (the same id: the same build and host)."""
    return bool(writer_id) and reader.build is not None and writer_id != reader_id


def built(writer_id: str, described: Mapping[str, Fingerprint | None], reader: Fingerprint,
          reader_id: str) -> tuple[Judgement, bool]:
    """The build a ledger line naming `writer_id` stands for (by `described`, the ledger's
    fingerprint lines), judged for `reader` (whose id is `reader_id`) by fingerprint.rule;
    and whether that is another build or host. An id the ledger does not describe is another
    (fail closed)."""
    from jaxcache.fingerprint.rule import Judgement, Outcome, judge

    if not writer_id:
        return Judgement(Outcome.UNKNOWN, why_unknown=NOT_RECORDED_WHY), False
    if reader.build is None:
        return Judgement(Outcome.UNKNOWN, why_unknown=NO_JAXLIB_WHY), False
    if writer_id == reader_id:
        return Judgement(Outcome.SAME), False
    writer = described.get(writer_id)
    j = judge(writer, reader) if writer is not None else Judgement(Outcome.DIFFERENT)
    return j, j.outcome is Outcome.DIFFERENT


def open_unread(name: str, dir_fd: int) -> int:
    """Open an entry to read it without moving its read time (O_NOATIME, which the file's
    owner and root may ask; others read it plainly): gc counts an entry's read time as a
    use, and jaxcache judging an entry is none."""
    try:
        return os.open(name, READ_FLAGS | os.O_NOATIME, dir_fd=dir_fd)
    except PermissionError:
        return os.open(name, READ_FLAGS, dir_fd=dir_fd)


def digest_at(dir_fd: int, name: str, size: int) -> tuple[str, os.stat_result] | None:
    """SHA-256 of the regular file `name` and its status, read through the directory's
    descriptor without following a link, at most `size` + 1 bytes; None if it is not exactly
    `size` bytes, or was written while being read. The audit judges an entry with it, the
    witness checks with it that the file holds what JAX put."""
    try:
        fd = open_unread(name, dir_fd)
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


def _sole(uid: int, mode: int) -> bool:
    """Is a file with this owner and mode one only you (and root) can have opened for writing?
    Only then may its identity stand for its bytes: a writable shared mapping rewrites a file
    without moving its ctime (tmpfs; ext4 until writeback), so a file another account can
    write, or could have mapped, is read and hashed at every judgement, and never relearned."""
    return uid == os.geteuid() and not mode & 0o022


def may_load(w: Written, ledger: Ledger, reader: Fingerprint | None, reader_id: str) -> bool:
    """May the entry the line `w` vouches for load under `reader` where origin is required
    (the in-job gate)? Not when the line names another build or host; a line that names none
    (an older jaxcache's) or a reader that cannot compare is judged by its bytes alone."""
    if reader is None or not _differs(w.build, reader, reader_id):
        return True
    return not built(w.build, ledger.fingerprints, reader, reader_id)[1]


def judge(inventory: Inventory, dir_fd: int, ledger: Ledger, directory: str = "",
          reader: Fingerprint | None = None, trusted: tuple[Ledger, ...] = ()) -> Origins:
    """The origin of each compiled-code entry of `inventory` (trust/kernel/entries.py), the
    directory (`directory`, for the lines relearned) open as `dir_fd`. An entry found yours by its
    bytes under a new identity (a copy of your own cache) is added to the ledger with it
    (ledger_writes.relearn()), so the next audit does not read it again. With `reader` (the
    fingerprint judging now: the caller's, computed once), each entry of yours says whether the
    build that wrote it is this one (built()). `trusted`: the ledgers of writers the policy
    trusts here (its trusted_ledgers, each read by trust/inputs/ledger.py's load_trusted): an
    entry yours does not vouch for whose bytes one of their lines names is theirs (vouched,
    judged by its bytes: never by identity alone, never relearned); a name any ledger knows
    for this directory with other bytes is changed (_same_dir), one known only elsewhere
    unknown. A trusted ledger with a problem vouches for nothing."""
    out = []
    relearned = []
    reader_id = _id(reader) if reader is not None else ""

    def yours(name: str, w: Written, by: Ledger = ledger) -> EntryOrigin:
        origin, whose = (YOURS, "") if by is ledger else (VOUCHED, by.owner)
        if reader is None:
            return EntryOrigin(name, origin, w.at, vouched_by=whose)
        if not _differs(w.build, reader, reader_id):  # a string comparison per entry
            return EntryOrigin(name, origin, w.at, w.build, vouched_by=whose)
        j, other = built(w.build, by.fingerprints, reader, reader_id)
        return EntryOrigin(name, origin, w.at, w.build, j, other, whose)

    vouching = tuple(t for t in trusted if not t.problem)
    for e in inventory.entries:
        if e.type == "file" and (e.kind == "xla-subcache" or e.name.startswith("xla_gpu_")):
            out.append(EntryOrigin(e.name, UNKNOWN, owner=e.uid))  # XLA writes these itself
            continue
        if e.kind != "cache" or e.type != "file":
            continue
        known = ledger.by_name.get(e.name, ())
        theirs = [(t, w) for t in vouching for w in t.by_name.get(e.name, ())]
        if not known and not theirs:
            out.append(EntryOrigin(e.name, UNKNOWN, owner=e.uid))
            continue
        same = [w for w in known if w.identity == e.identity and w.size == e.size]
        if same and _sole(e.uid, e.mode) and not e.has_acl:
            out.append(yours(e.name, same[-1]))
            continue
        sized = [w for w in known if w.size == e.size]
        read = digest_at(dir_fd, e.name, e.size) if sized or any(
            w.size == e.size for _, w in theirs) else None
        match = [w for w in sized if read is not None and w.sha256 == read[0]]
        vouched = [(t, w) for t, w in theirs if read is not None and w.size == e.size
                   and w.sha256 == read[0]]
        if match and read is not None:
            out.append(yours(e.name, match[-1]))
            st = read[1]
            if _sole(st.st_uid, st.st_mode) and not e.has_acl:
                relearned.append(Written(e.name, read[0], e.size, (
                    st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns), match[-1].at,
                    directory, match[-1].boot, match[-1].build))  # the matched line's provenance
        elif vouched:
            out.append(yours(e.name, vouched[-1][1], vouched[-1][0]))
        else:
            here = [w for w in [*known, *(w for _, w in theirs)] if _same_dir(w, directory)]
            if here:  # a line written for this very file's place: rewritten since
                out.append(EntryOrigin(e.name, CHANGED, max(w.at for w in here), owner=e.uid))
            else:  # known only in other directories, whose bytes it does not hold
                out.append(EntryOrigin(e.name, UNKNOWN, owner=e.uid))
    if relearned:
        relearn(ledger, tuple(relearned))
    return Origins(tuple(out), ledger.path, ledger.problem, ledger.skipped,
                   ledger.other_boot, tuple(relearned), reader, ledger.fingerprints, trusted)


def _same_dir(w: Written, directory: str) -> bool:
    """Was this line written for an entry in `directory` (the judged one; "": not known, so
    every line counts)? JAX compiles the same key in another cache to other bytes (XLA's
    sub-caches on or off, another build), so only a line of this directory says the file was
    rewritten; elsewhere, bytes no line holds are of unknown origin."""
    if not directory or not w.directory:
        return True
    if os.path.normpath(w.directory) == os.path.normpath(directory):
        return True
    return os.path.realpath(w.directory) == os.path.realpath(directory)


def build_reason(e: EntryOrigin, origins: Origins) -> str:
    """Why the build that wrote `e` is or is not this one, in words (fingerprint.rule's, or
    the ids where the ledger does not describe the writer's)."""
    j = origins.judgement(e)
    if j is None:
        return ""
    if e.other_build and not j.differences:
        here = origins.reader.id if origins.reader is not None else "?"
        return (f"another fingerprint: {e.writer} (writer) vs {here} (here), which the ledger "
                "does not describe")
    return j.reason
