"""One unit of eviction: a compiled entry with everything that belongs to it, and its last use.

JAX names an entry `<module>-<64 hex>-cache`; beside it may be JAX's own `<module>-<hex>-atime`
(its LRU's record of the last use), jaxcache's `.sig` and co-signatures (`<entry>.<key id>.sig`,
a sealed cache) and `.used` marker (the sealed tiers' LRU). They go together: a signature left
without its entry, or an entry without its signature, is a half-deleted unit.

Last use, the one rule (docs/reference/gc.md): the latest of the entry's mtime, its `-atime` file's
mtime and its `.used` marker's mtime. Never the filesystem's atime (relatime and noatime mounts do
not keep it): JAX's and jaxcache's own markers are what a load updates.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass

from jaxcache.trust.kernel.entries import Entry, Inventory, classify

SIDECAR_KINDS = ("signature", "used", "atime")
_ORDER = {k: i for i, k in enumerate(SIDECAR_KINDS)}


@dataclass(frozen=True, slots=True)
class Unit:
    """An entry (kind "cache", a regular file or not) and the files that belong to it."""

    entry: Entry
    sidecars: tuple[Entry, ...]
    last_used_ns: int

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


def group(inventory: Inventory) -> tuple[list[Unit], list[Entry]]:
    """The units of a directory listing, and what belongs to none (lock files, a sidecar
    whose entry is gone, unexpected names, folders): never deleted by gc, only reported."""
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
        mine = sidecars.get(ident)
        if mine is None:
            units.append(Unit(entry, (), entry.identity[2]))
            continue
        used = max([entry.identity[2]] + [s.identity[2] for s in mine
                                          if s.kind in ("atime", "used") and s.type == "file"])
        units.append(Unit(entry, tuple(mine), used))
    return units, rest


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
                     False, (), (), (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)))
    return Inventory(tuple(out))
