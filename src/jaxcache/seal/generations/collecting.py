"""Collect a store of generations: keep the generations a pointer names, the newest N and those
younger than an age; delete the others (manifest, then signature) and every object no kept
generation names.

Safe beside a publisher (publishing.py's lease protocol): gc takes its lease
(`leases/gc`) before it lists, and deletes no object while a publisher's lease is fresh, nor
any object or manifest younger than manifest.LEASE_S. Every delete names the version of the
object gc judged (GCS ifGenerationMatch, S3 If-Match, a directory's lock), so one written again
meanwhile stays. Manifests are read unverified, only to learn what they name: a manifest
planted in the store can keep objects, never delete one; one that cannot be read stops every
object delete (what it names is unknown). A lease left by a killed process goes stale and is
deleted.
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxcache.seal.generations import manifest as m
from jaxcache.seal.generations import reading
from jaxcache.seal.objects.object_store import ObjectInfo, ObjectStore, StoreError
from jaxcache.trust.rules.keyring import when


@dataclass(frozen=True, slots=True)
class Collected:
    """What a gc of a store of generations kept and deleted (or would, on a dry run)."""

    store: str
    dry_run: bool
    kept: tuple[str, ...]  # generations, newest first
    deleted: tuple[str, ...]  # generations
    objects_deleted: int
    bytes_freed: int
    objects_kept: int
    # why objects were left that no kept generation names (a publisher at work, a manifest
    # that could not be read), None when every such object went
    objects_left: str | None
    pointers: dict[str, str | None]


def collect(store: ObjectStore, *, keep: int | None, max_age_s: float | None,
            dry_run: bool = False) -> Collected:
    """Collect `store` (module docstring). StoreError: another gc holds its lease (nothing
    was deleted), or the store failed (what was deleted by then stays deleted: each delete
    was judged on its own)."""
    lease = None if dry_run else _take_lease(store)
    try:
        return _collect(store, keep, max_age_s, dry_run)
    finally:
        if lease is not None:
            try:  # a failure here leaves the lease to go stale: never hides the first one
                info = store.stat(m.GC_LEASE)
                if info is not None and info.generation == lease:
                    store.delete_if(m.GC_LEASE, lease)
            except StoreError:
                pass


def _take_lease(store: ObjectStore) -> str:
    """gc's lease, taken (or taken over from a gc killed more than LEASE_S ago): its version."""
    import time

    stamp = f"{when(time.time())}\n".encode()
    if not store.put_if_absent(m.GC_LEASE, stamp):
        info = store.stat(m.GC_LEASE)
        age = info.age_s() if info is not None else None
        if info is not None and (age is None or age < m.LEASE_S):
            raise StoreError("error", f"another gc holds {m.GC_LEASE} in {store.url}: run "
                                      "gc again when it has ended")
        if info is None or not store.replace_if(m.GC_LEASE, stamp, info.generation):
            raise StoreError("error", f"another gc took {m.GC_LEASE} in {store.url} meanwhile")
    info = store.stat(m.GC_LEASE)
    if info is None:
        raise StoreError("error", f"{m.GC_LEASE} in {store.url} went away as it was taken")
    return info.generation


def _young(info: ObjectInfo) -> bool:
    age = info.age_s()
    return age is None or age < m.LEASE_S  # no time given: taken as young (never deleted)


def _collect(store: ObjectStore, keep: int | None, max_age_s: float | None, dry_run: bool
             ) -> Collected:
    gens: dict[str, ObjectInfo] = {}
    sigs: dict[str, ObjectInfo] = {}
    objects: dict[str, ObjectInfo] = {}
    # the leases first: a publisher that started before gc's lease either still holds its own
    # now, or wrote its manifest and pointer before the listings below see them
    leases = [x for x in store.list(m.LEASES) if x.name.startswith(m.PUBLISH_LEASE)]
    pointers = reading.pointers(store)
    for info in (*store.list(m.GENERATIONS), *store.list(m.OBJECTS)):
        if info.name.startswith(m.OBJECTS):
            objects[info.name] = info
        elif info.name.startswith(m.GENERATIONS):
            stem = info.name[len(m.GENERATIONS):]
            if stem.endswith(".json") and m.is_name(stem[:-5]):
                gens[stem[:-5]] = info
            elif stem.endswith(".json.sig") and m.is_name(stem[:-9]):
                sigs[stem[:-9]] = info
    # the newest N of the signed ones: a crashed publish's unsigned manifest does not count
    newest = sorted((g for g in gens if g in sigs), reverse=True)
    unlisted = sorted(g for g in pointers.values() if g is not None and g not in gens)
    kept = {g for g in pointers.values() if g is not None and g in gens}
    kept |= set(newest[:keep] if keep is not None else ())
    kept |= {g for g, info in gens.items() if _young(info) or (
        max_age_s is not None and (info.age_s() or 0.0) < max_age_s)}
    named: set[str] = set()
    unreadable = []
    for g in kept:
        try:
            data = store.get(m.manifest_object(g), m.MAX_BYTES + 1)
            found = m.Manifest.parse(data, g) if data is not None else None
        except m.ManifestError:
            found = None
        if found is None:
            unreadable.append(g)
        else:
            named |= {e.object_name for e in found.entries}
    deleted = []
    freed = gone = 0
    for g in sorted(gens, reverse=True):
        if g in kept:
            continue
        if dry_run or store.delete_if(m.manifest_object(g), gens[g].generation):
            deleted.append(g)
            if not dry_run and g in sigs:
                store.delete_if(m.signature_object(g), sigs[g].generation)
    publishing = [x for x in leases if _young(x)]
    if not dry_run:  # what killed processes left: stale leases, signatures of no manifest
        for stale in (x for x in leases if not _young(x)):
            store.delete_if(stale.name, stale.generation)
        for g, info in sigs.items():
            if g not in gens and not _young(info):
                store.delete_if(info.name, info.generation)
    left = (f"a publisher is at work ({publishing[0].name})" if publishing else
            f"a pointer names {unlisted[0]}, which the listing did not show" if unlisted else
            f"the manifest of {unreadable[0]} could not be read" if unreadable else None)
    if left is None:
        for name, info in objects.items():
            if name in named or _young(info):
                continue
            if dry_run or store.delete_if(name, info.generation):
                gone += 1
                freed += info.size
    return Collected(store.url, dry_run, tuple(sorted(kept, reverse=True)), tuple(deleted),
                     gone, freed, len(objects) - gone, left, pointers)
