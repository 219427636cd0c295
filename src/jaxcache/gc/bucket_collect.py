"""Collect a sealed cache in a bucket (`gs://` or `s3://` prefix): the same plan as a directory,
every delete conditional on the server.

A bucket keeps no owner per object and no `-atime` file, and a reader writes nothing to it, so
what gc may judge there is the sealed layout itself:
- a unit is an entry object with its signature object (`<entry>.sig`, or `<key>.sig` where
  that name would pass the store's limit: seal/publishing/tier_names.py) and co-signatures; only
  entries that have their signature are candidates. An entry without one was never published
  by jaxcache (JAX's own unsigned cache in the same prefix, a hand upload): reported, left;
- its last use: the latest of the entry's upload time and its hits in this machine's run
  records (gc/usage.py); jobs elsewhere are not in them;
- a signature object whose entry is gone, older than a publish takes (ORPHAN_AGE_S, an hour),
  goes (what a killed gc left);
- an object the listing gives no generation (ETag) for is left: its delete could not be
  conditional;
- anything else under the prefix is reported and left.

Every delete names the generation judged (GCS ifGenerationMatch, S3 If-Match): an object
re-published meanwhile has another and stays, with the rest of its unit. The entry goes first,
then its signatures, so no reader finds an entry without its signature; a publisher that
re-publishes the very entry between the two (its signature was still there, so it put the entry
alone) would leave it unsigned: gc looks again once the signatures are gone and takes such an
entry too (conditionally; a miss, never a load), or names it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from jaxcache.errors import JaxcacheError
from jaxcache.gc import plan as planmod
from jaxcache.gc.collect import GcResult, Left, cost
from jaxcache.gc.evict import evict
from jaxcache.gc.units import Unit, clock_counts, group
from jaxcache.gc.usage import KeyUse
from jaxcache.seal.objects.object_store import OBJECT_NAME_MAX
from jaxcache.seal.objects.store_for_url import ObjectInfo, ObjectStore, StoreError
from jaxcache.seal.publishing import tier_names as names
from jaxcache.text import safe
from jaxcache.trust.kernel.entries import Entry, Inventory, classify

_BUCKET_OWNER = "a bucket object"
# a signature without its entry younger than this may be a publish whose entry upload is still
# under way (an upload may take minutes: seal/objects/gcs_store.py TIMEOUT)
ORPHAN_AGE_S = 3600.0


def _signature(entry: str) -> str:
    """The entry's signature object, named as the publisher names it
    (seal/stores/bucket_backend.py)."""
    return names.sidecar(entry, names.SIGNATURE, OBJECT_NAME_MAX)


def _as_entry(o: ObjectInfo) -> Entry:
    """An object as the directory code sees a file (its upload time as its mtime, its age by
    the store's clock: a gc whose clock is a day ahead must not take a publish in progress's
    signature for an orphan)."""
    kind, module, key = classify(o.name)
    updated = o.updated if o.updated is not None else 0.0
    age = o.age_s()
    return Entry(o.name, kind, module, key, "file", o.size, -1, _BUCKET_OWNER, 0o644,
                 0.0 if age is None else age, 1, False, (), (), (0, 0, int(updated * 1e9), 0))


def collect_bucket(store: ObjectStore, *, max_size: int | None = None,
                   max_age_s: float | None = None, dry_run: bool = False,
                   now_ns: int | None = None,
                   order: planmod.Order = planmod.Order.LRU,
                   uses: Mapping[str, KeyUse] | None = None,
                   listed: tuple[ObjectInfo, ...] | None = None) -> GcResult:
    """Collect the sealed prefix of `store`. `listed`: the listing to judge (default: listed
    now), so a caller can judge first and delete later (the deletes still name the
    generations judged)."""
    if max_size is None and max_age_s is None:
        raise JaxcacheError("give --max-size, --max-age or both: gc deletes nothing unasked")
    if listed is None:
        try:
            listed = tuple(store.list())
        except StoreError as exc:
            raise JaxcacheError(f"cannot list {safe(store.url)}: {exc.message}") from None
    now_ns = time.time_ns() if now_ns is None else now_ns  # for --max-age: yours
    by_name = {o.name: o for o in listed}
    units, rest = group(Inventory(tuple(_as_entry(o) for o in listed)))
    ok: list[Unit] = []
    left: list[Left] = []
    for u in units:
        if any(not by_name[f.name].generation for f in (u.entry, *u.sidecars)):
            left.append(Left(u.name, "the store gave no generation (ETag) for it or a "
                                     "signature: a delete could not be conditional"))
            continue
        if not any(s.name == _signature(u.name) for s in u.sidecars):
            left.append(Left(u.name, "an entry without its signature: not published by "
                                     "jaxcache (JAX's own cache, a hand upload), not gc's "
                                     "to judge"))
            continue
        keep = tuple(s for s in u.sidecars if s.kind == "signature")
        left.extend(Left(s.name, "not a signature: buckets hold none beside an entry")
                    for s in u.sidecars if s.kind != "signature")
        ok.append(Unit(u.entry, keep, u.last_used_ns))
    orphans = [e for e in rest if e.kind == "signature" and e.age_s > ORPHAN_AGE_S
               and by_name[e.name].updated is not None and by_name[e.name].generation]
    left.extend(Left(e.name, "a signature whose entry is gone, younger than a publish takes"
                     if e.kind == "signature" else "not part of a cache entry gc can judge")
                for e in rest if e not in orphans)
    if uses:
        ok = planmod.with_hits(ok, uses)
    total = sum(o.size for o in listed)
    chosen = planmod.choose(ok, total - sum(e.size for e in orphans), max_size=max_size,
                            max_age_s=max_age_s, now_ns=now_ns, order=order, uses=uses)
    changed: list[str] = []
    try:
        evicted, stopped = evict(chosen.evict, None, lambda u: dry_run or _delete(
            store, u, by_name, changed))
        after = total - sum(u.size for u in evicted)
        removed = []
        for e in orphans:
            if dry_run or store.delete_if(e.name, by_name[e.name].generation):
                removed.append(e.name)
                after -= e.size
            else:
                changed.append(e.name)
    except StoreError as exc:
        raise JaxcacheError(f"gc of {safe(store.url)} stopped: {exc.message} (what was "
                            f"deleted before is gone; run it again)") from None
    recompile, unpriced = cost(tuple(evicted), uses)
    return GcResult(store.url, dry_run, max_size, max_age_s, True, tuple(evicted), total,
                    after, len(ok) - len(evicted), tuple(left), tuple(changed),
                    tuple(removed), stopped, order=order, recompile_s=recompile,
                    unpriced=unpriced,
                    clocks=clock_counts(ok))


def _delete(store: ObjectStore, u: Unit, by_name: Mapping[str, ObjectInfo],
            changed: list[str]) -> bool:
    """The entry at the generation judged, then its signatures; False (and the whole unit
    left) when the entry was re-published or removed meanwhile."""
    if not store.delete_if(u.name, by_name[u.name].generation):
        changed.append(u.name)
        return False
    for s in u.sidecars:
        if not store.delete_if(s.name, by_name[s.name].generation):
            changed.append(s.name)
    # re-put alone while its old signature still stood, then left without one?
    again = store.stat(u.name)
    if again is not None and again.generation and store.stat(_signature(u.name)) is None and \
            not store.delete_if(u.name, again.generation):
        changed.append(u.name)
    return True
