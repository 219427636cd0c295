"""Collect a cache directory: judge it, judge each unit, delete the plan's units, report.

What gc may delete (everything else is reported and left as it is):
- only units whose entry is a regular file with one link, and of those only the files that
  are regular, owned by you (or root, when you are root) and named as part of the unit; a
  symlink, a folder, a FIFO, a socket, another user's file or an unexpected name is never
  touched;
- in a directory only you and root can write or replace (the audit finds no other writer of
  it or of any folder above it): every such unit;
- in one others can write too (a shared or sticky directory): only the units your origin
  ledger says a job of yours wrote, byte for byte (trust/provenance/origin.py), so gc never judges
  another writer's entries.

Each file is deleted with unlinkat on the directory's descriptor, after checking that the name
still is the very file judged (device, inode, size and mtime): one replaced or rewritten
meanwhile stays, and is reported. The entry goes first, then its signatures, its marker and
JAX's atime file (two threads delete, each unit wholly by one: gc/evict.py), so a reader never
finds an entry without its signature; a killed gc leaves at
most sidecars without their entry, which a reader ignores and the next gc removes (in a
directory only you write, once older than a publish takes: a publisher writes a signature
before its entry). A reader
that opened an entry before it went reads it whole (an unlinked file lives while open); one
that comes after misses and recompiles.
"""

from __future__ import annotations

import contextlib
import gc as cycles
import os
import stat
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from jaxcache.documents import fsclock
from jaxcache.errors import JaxcacheError
from jaxcache.gc import plan as planmod
from jaxcache.gc.evict import DELETERS, evict
from jaxcache.gc.units import (
    SIDECAR_KINDS,
    Clock,
    Unit,
    clock_counts,
    group,
    keeps_read_times,
    listing,
)
from jaxcache.gc.usage import KeyUse
from jaxcache.seal.publishing import tier_names as names
from jaxcache.text import safe
from jaxcache.trust.kernel.entries import Entry
from jaxcache.trust.kernel.principals import Accounts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.gc.compaction import Compaction
    from jaxcache.trust.judgement.audit import AuditReport

ORPHAN_AGE_S = 60.0  # as seal/publishing/lru.py: a younger sidecar may be a publish in progress
TEMP_AGE_S = 3600.0  # a publisher's temporary file: written, fsynced and linked in far less
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class Left:
    """A file gc did not delete, and why."""

    name: str
    why: str


@dataclass(frozen=True, slots=True)
class GcResult:
    directory: str
    dry_run: bool
    max_size: int | None
    max_age_s: float | None
    shared: bool  # others can write the directory: only your own entries were candidates
    evicted: tuple[Unit, ...]  # deleted (or, with dry_run, would be)
    before_bytes: int
    after_bytes: int
    kept_units: int
    left: tuple[Left, ...]  # files gc may not judge, untouched
    changed: tuple[str, ...]  # judged, then replaced or rewritten before deletion: left alone
    orphans: tuple[str, ...] = ()  # sidecars of yours whose entry was gone: removed
    stopped: bool = False  # the deadline came first: the rest goes next time
    ledger: Compaction | None = None  # the origin ledger compacted after (gc/compaction.py)
    order: planmod.Order = planmod.Order.LRU
    # what the evicted entries cost to compile, by the run records (gc/usage.py): the next
    # start of the jobs that used them recompiles about this long
    recompile_s: float = 0.0
    unpriced: int = 0  # evicted entries no record shows compiled: their cost is not known
    # the entries `keep` named (the job that just ran used them) still there, never evicted:
    # how many and their bytes
    kept_for_job: int = 0
    kept_for_job_bytes: int = 0
    # what gave the candidates their last use (units.Clock), and whether the filesystem keeps
    # read times (else a cache plain JAX loads with no size limit shows only its write times)
    clocks: tuple[tuple[Clock, int], ...] = ()
    read_times: bool = False

    @property
    def freed_bytes(self) -> int:
        return self.before_bytes - self.after_bytes

    @property
    def over_by(self) -> int:
        """Still over max_size by this much: what gc may not delete."""
        return max(0, self.after_bytes - self.max_size) if self.max_size is not None else 0

    @property
    def job_over_limit(self) -> bool:
        """The limit cannot hold what the job used (`keep`): gc went as far as it could and
        stayed over, with entries of the job among what stays (not merely out of time)."""
        return bool(self.over_by and self.kept_for_job and not self.stopped)


def _why_not_file(e: Entry, me: frozenset[int]) -> str | None:
    if e.type == "symlink":
        return "a symbolic link"
    if e.type == "dir":
        return "a directory"
    if e.type != "file":
        return "not a regular file (a FIFO, a socket or a device)"
    if e.uid not in me:
        return f"owned by {e.owner}, not you"
    if e.nlink > 1:
        return "a hard link (another name holds the same file)"
    return None


def _orphan(e: Entry, me: frozenset[int], private: bool, now_ns: int) -> bool:
    """A sidecar of yours (signature, marker, atime file) whose entry is gone, old enough
    not to be a publish in progress (a publisher writes the signature before its entry), in
    a directory only you write: what a killed gc or JAX's own eviction left. Or a sealed
    publisher's temporary file of yours an hour old (a publisher killed before removing it:
    found by the fault campaign; where it was linked into place already, it is the entry's
    second name, which kept gc off that entry for good)."""
    if not private:
        return False
    if e.kind in SIDECAR_KINDS:
        return _why_not_file(e, me) is None and now_ns - e.identity[2] > ORPHAN_AGE_S * 1e9
    return e.name.startswith(names.TEMP_PREFIX) and e.name.endswith(names.TEMP_SUFFIX) and \
        e.type == "file" and e.uid in me and now_ns - e.identity[2] > TEMP_AGE_S * 1e9


def _judged(units: list[Unit], rest: list[Entry], me: frozenset[int],
            yours: frozenset[str] | None) -> tuple[list[Unit], list[Left]]:
    """The units gc may delete and the files it leaves (with why). `yours`: in a directory
    others can write, the entries your ledger says you wrote (None: a private directory)."""
    ok: list[Unit] = []
    left = [Left(e.name, "a lock file" if e.kind == "lockfile" else
                 "a signature, marker or atime file without its entry" if e.kind in
                 SIDECAR_KINDS else "not part of a cache entry gc can judge") for e in rest]
    for u in units:
        why = _why_not_file(u.entry, me)
        if why is None and yours is not None and u.name not in yours:
            why = "not written by a job of yours (origin ledger), in a directory others write"
        if why is not None:
            left.append(Left(u.name, why))
            continue
        side = []
        for s in u.sidecars:
            also = _why_not_file(s, me)
            if also is None:
                side.append(s)
            else:
                left.append(Left(s.name, also))
        ok.append(u if len(side) == len(u.sidecars) else
                  Unit(u.entry, tuple(side), u.last_used_ns, u.clock))
    return ok, left


def _open(directory: str) -> int:
    try:
        return os.open(directory, _DIR)
    except FileNotFoundError:
        raise JaxcacheError(f"{safe(directory)} does not exist") from None
    except OSError as exc:
        raise JaxcacheError(f"cannot open {safe(directory)}: {exc.strerror} (gc never "
                            "follows a symbolic link)") from None


def _judge_directory(directory: str, fd: int) -> tuple[AuditReport, bool]:
    """The audit of the directory, and whether others can write it (then only your own
    entries are candidates, judged by the origin ledger: the audit lists them); refuses what
    cannot be judged, or a directory swapped meanwhile. A directory only you write is
    audited without its entries: gc lists it itself (units.listing)."""
    from jaxcache.trust.findings import UNVERIFIABLE
    from jaxcache.trust.inputs import ledger
    from jaxcache.trust.judgement.audit import audit
    from jaxcache.trust.kernel.principals import Accounts

    accounts = Accounts()
    report = audit(directory, scan_processes=False, scan_handles=False, accounts=accounts,
                   entries=False)
    shared = any(w.trust not in ("root", "you") for w in report.writers)
    if shared:
        report = audit(directory, scan_processes=False, scan_handles=False,
                       accounts=accounts, ledger=ledger.load(accounts=accounts))
    blind = [f for f in report.findings if f.effect == UNVERIFIABLE
             and not f.code.startswith(("entry.", "entries."))]
    if blind:
        raise JaxcacheError(f"refusing to collect {safe(directory)}: {blind[0].message}")
    st, now = os.fstat(fd), os.stat(report.resolved or directory, follow_symlinks=False)
    if (st.st_dev, st.st_ino) != (now.st_dev, now.st_ino):
        raise JaxcacheError(f"refusing to collect {safe(directory)}: it changed while it was "
                            "being judged")
    return report, shared


def _still(fd: int, e: Entry) -> bool:
    """Is `e.name` still the very file judged (not replaced, not rewritten, as many links:
    one for what gc deletes, but a publisher's leftover temporary name may be the second)?"""
    try:
        st = os.stat(e.name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_nlink == e.nlink and \
        (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size) == \
        (e.identity[0], e.identity[1], e.identity[2], e.size)


def cost(evicted: tuple[Unit, ...], uses: Mapping[str, KeyUse] | None) -> tuple[float, int]:
    """The compile seconds the run records show for `evicted`, and how many they do not."""
    if not uses:
        return 0.0, len(evicted)
    secs = [uses[u.name].compile_s if u.name in uses else None for u in evicted]
    return sum(s for s in secs if s is not None), sum(s is None for s in secs)


@contextlib.contextmanager
def _cycles_paused() -> Iterator[None]:
    """Python's cycle collector off meanwhile: listing 100,000 files makes some 300,000
    objects, none of them in a cycle, and each collection pass walks them all (a tenth of
    gc's time, measured)."""
    was = cycles.isenabled()
    cycles.disable()
    try:
        yield
    finally:
        if was:
            cycles.enable()


def collect(directory: str, *, max_size: int | None = None, max_age_s: float | None = None,
            dry_run: bool = False, now_ns: int | None = None,
            until_ns: int | None = None, order: planmod.Order = planmod.Order.LRU,
            uses: Mapping[str, KeyUse] | None = None,
            keep: frozenset[str] = frozenset()) -> GcResult:
    """Collect `directory` down to `max_size` bytes and/or units used within `max_age_s`;
    deleting stops at `until_ns` (time.monotonic_ns()), the rest left for the next gc.
    `uses`: what the run records say of each key (gc/usage.py): their hits count as uses,
    and Order.VALUE ranks by them. `keep`: entry names never evicted (plan.py)."""
    if max_size is None and max_age_s is None:
        raise JaxcacheError("give --max-size, --max-age or both: gc deletes nothing unasked")
    now_ns = time.time_ns() if now_ns is None else now_ns  # for --max-age: yours
    directory = os.path.abspath(directory)
    with _cycles_paused():
        fd = _open(directory)
        try:
            report, shared = _judge_directory(directory, fd)
            if not report.exists:
                raise JaxcacheError(f"{safe(directory)} does not exist")
            inventory = report.inventory if shared else listing(fd, Accounts().user_name)
            if inventory is None:
                raise JaxcacheError(f"cannot list {safe(directory)}")
            if inventory.unreadable:
                raise JaxcacheError(f"{safe(directory)}: {inventory.unreadable}")
            me = frozenset({os.geteuid()})
            yours = None
            if shared:
                o = report.origins
                yours = frozenset(e.name for e in o.entries if e.origin == "yours") \
                    if o is not None and o.ledger_problem is None else frozenset()
            reads = not shared and keeps_read_times(directory, os.fstat(fd).st_dev)
            units, rest = group(inventory, reads)
            stamped = fsclock.now_ns(fd)  # orphans by the files' own clock, always
            orphans = [e for e in rest if _orphan(e, me, yours is None, stamped)]
            if orphans:
                gone_ids = {id(e) for e in orphans}
                rest = [e for e in rest if id(e) not in gone_ids]
            ok, left = _judged(units, rest, me, yours)
            if uses:
                ok = planmod.with_hits(ok, uses)
            total = inventory.total_bytes
            # the orphans go anyway: the plan fits what stays without them
            chosen = planmod.choose(ok, total - sum(e.size for e in orphans), max_size=max_size,
                                    max_age_s=max_age_s, now_ns=now_ns, order=order, uses=uses,
                                    keep=keep)
            changed: list[str] = []

            def gone(u: Unit) -> bool:
                if not _still(fd, u.entry):
                    changed.append(u.name)
                    return False
                return dry_run or _delete(fd, u, changed)

            evicted, stopped = evict(chosen.evict, until_ns, gone,
                                     1 if dry_run else DELETERS)
            # the plan's sizes summed already: only a unit left meanwhile is summed again
            after = total - (chosen.before_bytes - chosen.after_bytes
                             if len(evicted) == len(chosen.evict)
                             else sum(u.size for u in evicted))
            removed = []
            for e in orphans:
                if not _still(fd, e):
                    changed.append(e.name)
                    continue
                if not dry_run:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(e.name, dir_fd=fd)
                removed.append(e.name)
                after -= e.size
        finally:
            os.close(fd)
    recompile, unpriced = cost(tuple(evicted), uses)
    return GcResult(directory, dry_run, max_size, max_age_s, shared, tuple(evicted), total,
                    after, len(ok) - len(evicted), tuple(left), tuple(changed),
                    tuple(removed), stopped, order=order, recompile_s=recompile,
                    unpriced=unpriced, kept_for_job=sum(1 for u in ok if u.name in keep),
                    kept_for_job_bytes=chosen.kept_bytes,
                    clocks=clock_counts(ok),
                    read_times=reads)


def _delete(fd: int, u: Unit, changed: list[str]) -> bool:
    """The unit's files, entry first, each only if still the file judged."""
    try:
        os.unlink(u.entry.name, dir_fd=fd)  # unlinkat: never through a path
    except FileNotFoundError:
        changed.append(u.name)
        return False
    for s in u.files[1:]:
        if _still(fd, s):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(s.name, dir_fd=fd)
        else:
            changed.append(s.name)
    return True
