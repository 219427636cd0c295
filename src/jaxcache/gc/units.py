"""One unit of eviction: a compiled entry with everything that belongs to it, and its last use.

JAX names an entry `<module>-<64 hex>-cache`; beside it may be JAX's own `<module>-<hex>-atime`
(its LRU's record of the last use), jaxcache's `.sig` and co-signatures (`<entry>.<key id>.sig`,
a sealed cache) and `.used` marker (the sealed tiers' LRU). They go together: a signature left
without its entry, or an entry without its signature, is a half-deleted unit.

Last use, the one rule (docs/reference/gc.md): the latest of the entry's write time (mtime), its
`-atime` file's mtime (JAX writes those only with a size limit set), its `.used` marker's mtime
(sealed tiers), a run record's hit (plan.with_hits) and, where the filesystem keeps read times
(not mounted noatime), the entry's own atime: plain JAX with no size limit leaves no other trace
of a load, and Linux's default relatime still moves atime on a read once a day. Each unit says
which of those gave its last use (Clock), so gc never presents a write time as a use.
"""

from __future__ import annotations

import enum
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass

from jaxcache.trust.kernel.entries import Entry, Inventory, classify


class Clock(enum.Enum):
    """What gave a unit its last use."""

    WRITTEN = "written"  # the entry's write time: no load known since
    READ = "read"  # the entry's own atime (relatime: within a day of the last read)
    ATIME_FILE = "atime-file"  # JAX's `-atime` file (its LRU, with a size limit)
    MARKER = "marker"  # jaxcache's `.used` marker (a sealed tier's load)
    RECORD = "record"  # a hit in a run record of this machine

    @property
    def words(self) -> str:
        return _CLOCK_WORDS[self]


_CLOCK_WORDS = {
    Clock.WRITTEN: "written, no load known since",
    Clock.READ: "read (the filesystem's read time, within a day)",
    Clock.ATIME_FILE: "loaded (JAX's atime file)",
    Clock.MARKER: "loaded (jaxcache's marker)",
    Clock.RECORD: "loaded (a run record's hit)"}

SIDECAR_KINDS = ("signature", "used", "atime")
_ORDER = {k: i for i, k in enumerate(SIDECAR_KINDS)}


@dataclass(frozen=True, slots=True)
class Unit:
    """An entry (kind "cache", a regular file or not) and the files that belong to it."""

    entry: Entry
    sidecars: tuple[Entry, ...]
    last_used_ns: int
    clock: Clock = Clock.WRITTEN  # what gave last_used_ns

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def size(self) -> int:
        if not self.sidecars:  # most units of a plain cache: gc asks this of every one
            return self.entry.size
        return self.entry.size + sum(s.size for s in self.sidecars if s.type == "file")

    @property
    def files(self) -> tuple[Entry, ...]:
        """The entry first, then its signatures, its marker and JAX's atime file: the order
        they are deleted in, so that no reader finds an entry without its signature."""
        if not self.sidecars:
            return (self.entry,)
        return (self.entry, *sorted(self.sidecars, key=lambda s: (_ORDER[s.kind], s.name)))


def group(inventory: Inventory, reads: bool = False) -> tuple[list[Unit], list[Entry]]:
    """The units of a directory listing, and what belongs to none (lock files, a sidecar
    whose entry is gone, unexpected names, folders): never deleted by gc, only reported.
    `reads`: the filesystem keeps read times, so an entry's atime counts as a use."""
    entries: dict[tuple[str | None, str | None], Entry] = {}
    side: list[Entry] = []
    rest: list[Entry] = []
    for e in inventory.entries:  # one pass: nearly every name of a big cache is an entry
        if e.kind == "cache" and e.key is not None and "/" not in e.name:
            ident: tuple[str | None, str | None] = (e.module, e.key)
            if ident in entries:
                rest.append(e)
            else:
                entries[ident] = e
        elif e.kind in SIDECAR_KINDS and "/" not in e.name:
            side.append(e)
        else:
            rest.append(e)
    sidecars: dict[tuple[str | None, str | None], list[Entry]] = {}
    for e in side:
        ident = (e.module, e.key)
        if ident in entries:
            sidecars.setdefault(ident, []).append(e)
        else:
            rest.append(e)
    units = []
    for ident, entry in entries.items():
        written = entry.identity[2]
        used, clock = written, Clock.WRITTEN
        if reads and entry.atime_ns > used:
            used, clock = entry.atime_ns, Clock.READ
        mine = sidecars.get(ident)
        if mine is None:
            units.append(Unit(entry, (), used, clock))
            continue
        for s in mine:
            if s.type == "file" and s.kind in ("atime", "used") and s.identity[2] > used:
                used = s.identity[2]
                clock = Clock.ATIME_FILE if s.kind == "atime" else Clock.MARKER
        units.append(Unit(entry, tuple(mine), used, clock))
    return units, rest


def clock_counts(units: list[Unit]) -> tuple[tuple[Clock, int], ...]:
    """How many of `units` each clock gave their last use, in Clock's order (none: left out)."""
    return tuple((c, n) for c in Clock if (n := sum(1 for u in units if u.clock is c)))


def keeps_read_times(directory: str, dev: int) -> bool:
    """Does the filesystem holding `directory` (device `dev`) move a file's atime when it is
    read: not mounted noatime (relatime, the default, does once a day)? False where the mount
    cannot be found (say nothing of reads rather than guess)."""
    from jaxcache.mounts import mount_of, read_mounts

    try:
        mount = mount_of(directory, dev, read_mounts())
    except OSError:
        return False
    return mount is not None and "noatime" not in mount.options


_TYPES = {stat.S_IFREG: "file", stat.S_IFDIR: "dir", stat.S_IFLNK: "symlink"}


def listing(dir_fd: int, owner_of: Callable[[int], str]) -> Inventory:
    """What gc needs of each name in a directory only you write: one lstat, no ACL and no
    writers (the audit judged the directory; gc deletes only regular files of yours, and an
    entry's own ACL says who may rewrite it, not who may unlink it). `owner_of`: a uid's name
    (asked once per uid)."""
    names: dict[int, str] = {}
    now = time.time()
    out: list[Entry] = []
    append = out.append
    for item in os.scandir(dir_fd):
        try:
            st = item.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue  # removed since the listing
        name = item.name
        kind, module, key = classify(name)
        mode, uid = st.st_mode, st.st_uid
        owner = names.get(uid)
        if owner is None:
            owner = names[uid] = owner_of(uid)
        age = now - st.st_mtime
        append(Entry(name, kind, module, key, _TYPES.get(stat.S_IFMT(mode), "other"),
                     st.st_size, uid, owner, mode, age if age > 0.0 else 0.0, st.st_nlink,
                     False, (), (), (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns),
                     st.st_atime_ns))
    return Inventory(tuple(out))
