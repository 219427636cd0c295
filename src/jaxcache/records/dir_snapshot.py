"""What a cache directory held, before or after a job (a sealed reader's bucket: listed on a
thread beside its job). Taken before the job from the audit's inventory, so `jaxcache run` reads
the run record's model (records/run_document.py) only while the job runs."""

from __future__ import annotations

import os
import stat
from typing import NamedTuple

from jaxcache.probe.launch import beside
from jaxcache.trust.rules.target import is_url

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading

    from jaxcache.records.run_document import Snapshot
    from jaxcache.trust.kernel.entries import Elided, Inventory


class DirSnapshot(NamedTuple):
    path: str
    entries: dict[str, int]  # name -> size (empty when unknown)
    unknown: str | None = None  # why the listing failed: its counts are unknown, never 0
    absent: str | None = None  # why it could not be listed, where that reads as empty (before
    # a job, the directory JAX has yet to make)
    # a directory the audit found unchanged since it judged every entry: `entries` holds the
    # entries it named, the rest are counted here and listed only when asked (listed())
    elided: Elided | None = None

    @classmethod
    def of(cls, path: str, inv: Inventory | None) -> DirSnapshot:
        if inv is None:
            return cls(path, {})
        return cls(path, {e.name: e.size for e in inv.entries if e.type == "file"},
                   elided=inv.elided)

    @classmethod
    def at(cls, path: str, *, missing_ok: bool = True) -> DirSnapshot:
        """The directory's files now, through the fd walk; empty if it cannot be listed and
        `missing_ok` (a job may be refused or fail before its cache exists)."""
        from jaxcache.errors import JaxcacheError
        from jaxcache.trust import listing

        if is_url(path):  # a sealed bucket prefix: its objects, or why they are unknown
            objects, why = _bucket_objects(path)
            return cls(path, objects, why)
        try:
            inv, resolved = listing.list_dir(path)
        except JaxcacheError as exc:
            if not missing_ok:
                raise
            return cls(path, {}, absent=str(exc))
        return cls.of(resolved, inv)

    def unchanged(self) -> bool:
        """Is the directory of a snapshot that counted entries without listing them still in
        that state (no name added, removed or renamed since: its mtime and ctime say)?"""
        if self.elided is None:
            return False
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except OSError:
            return False
        return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_nlink) == \
            self.elided.stamp

    def listed(self) -> DirSnapshot:
        """This snapshot with every entry named (the remembered names read now), or unknown
        where they are no longer known."""
        if self.elided is None:
            return self
        names = self.elided.names()
        if names is None:
            return DirSnapshot(self.path, {}, "the listing the audit remembered before the job "
                                              "could not be read again")
        return DirSnapshot(self.path, names)

    def holds(self, name: str) -> bool:
        """Is `name` a file of this snapshot? (Counted entries are looked up in the directory,
        which a snapshot only asks while it is unchanged.)"""
        return self.size(name) is not None

    def size(self, name: str) -> int | None:
        if name in self.entries or self.elided is None:
            return self.entries.get(name)
        try:
            st = os.stat(os.path.join(self.path, name), follow_symlinks=False)
        except (OSError, ValueError):
            return None
        return st.st_size if stat.S_ISREG(st.st_mode) else None

    def since(self, before: DirSnapshot) -> DirSnapshot:
        """This listing, taken after a job: a directory that was there before and cannot be
        listed now (removed, renamed or unreadable while the job ran) is unknown, not 0."""
        if self.absent is not None and before.absent is None and before.unknown is None:
            return DirSnapshot(self.path, {}, f"gone or unreadable after the job: "
                                              f"{self.absent}")
        return self

    def summary(self) -> Snapshot:
        from jaxcache.records.run_document import Snapshot  # after the job, when it is built

        if self.unknown is not None:
            return Snapshot(None, None, self.unknown)
        more = self.elided
        return Snapshot(sum(1 for n in self.entries if n.endswith("-cache")) + (
                            more.compiled if more else 0),
                        sum(self.entries.values()) + (more.bytes if more else 0), None,
                        len(self.entries) + (more.files if more else 0))


class ListingBeside:
    """A sealed reader's bucket, listed on a thread while its job runs: what its record counts
    as the cache before the job. Only for a reader, whose job writes nothing to the bucket, so
    the listing sees what one before the job would have (others' writes race either), and the
    job does not wait for its round trips (one per 1,000 objects) and the client's import."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._got: list[DirSnapshot] = []
        self._thread: threading.Thread | None = None

    def _list(self) -> None:
        try:
            self._got.append(DirSnapshot.at(self.url))
        except Exception as exc:  # noqa: BLE001 - never a thread's traceback: unknown
            self._got.append(DirSnapshot(self.url, {}, "the bucket could not be listed: "
                                         f"{type(exc).__name__}: {str(exc)[:300]}"))

    def start(self) -> None:
        """Started once the job is (probe/launch.py's `started`): on a thread that keeps the
        job's signals blocked (none that can start: listed in result(), after the job)."""
        self._thread = beside(self._list, "jaxcache-listing")

    def result(self) -> DirSnapshot:
        """The listing: waited for, or taken now where no thread took it."""
        if self._thread is not None:
            self._thread.join()
        elif not self._got:
            self._list()
        return self._got[0] if self._got else DirSnapshot(
            self.url, {}, "the bucket could not be listed (the listing failed)")


def _bucket_objects(url: str) -> tuple[dict[str, int], str | None]:
    from jaxcache.errors import JaxcacheError
    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.trust.rules import target

    try:
        return {o.name: o.size for o in objects.open_store(target.parse_bucket(url)).list()}, None
    except (JaxcacheError, objects.StoreError) as exc:
        return {}, f"the bucket could not be listed: {str(exc)[:300]}"  # shown escaped
