"""The backend JAX calls for a reader of a generation: a private local tier, then the one
generation a pointer named when the job enabled it.

The pointer is followed and the manifest's signature verified once, at construction
(reading.py, by the one rule); from then on an entry is the object its digest names, returned
only if its bytes have that size and digest, and only if the manifest says this build compiled
it (the fingerprint id: build, machine, CPU features; another's entry could crash the job, so
it is a miss, as is one of unknown build under require_build). Anything else is a miss, reported
once, and JAX compiles: a manifest the reader's keys refuse (an untrusted, revoked or expired
signer, too few signatures) loads nothing of that generation. A reader writes its misses to its
local tier only (BucketSealedCache's reader path, which this extends), never to the store.

Fetch ahead: the keys of a plan (`jaxcache run`'s, from the newest record of the same command
and store, or enable's `prefetch=`) that the manifest names are fetched and checked by digest
in parallel as soon as the manifest is verified, within a byte budget, so that JAX finds them
when it asks; one JAX never asks for is dropped at close. What a fetch found is judged again by
the same checks when JAX asks (the build first: another build's bytes are never handed over).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor

from jaxcache.seal.generations import manifest as m
from jaxcache.seal.generations import reading
from jaxcache.seal.objects.object_store import NOT_FOUND, ObjectStore, StoreError
from jaxcache.seal.signing.signature_rule import BUILD_UNKNOWN, OTHER_BUILD
from jaxcache.seal.stores.backend_reports import Host, Witness
from jaxcache.seal.stores.bucket_backend import BucketSealedCache
from jaxcache.trust.inputs.public_keys import PublicKey
from jaxcache.trust.rules.keyring import KeyRing

WRONG_DIGEST = "wrong-digest"  # an object whose bytes are not the ones the manifest names


class GenerationCache(BucketSealedCache):
    """A JAX CacheInterface (through jaxcompat) over one generation of a store, read-only."""

    def __init__(self, store: ObjectStore, *, pointer: str,
                 trusted: KeyRing | Iterable[PublicKey], local: str | None = None,
                 max_size: Callable[[], int] | None = None, host: Host | None = None,
                 require_build: bool = False, witness: Witness | None = None,
                 ahead: tuple[str, ...] = (), workers: int = 8,
                 budget_bytes: int = 1 << 30) -> None:
        super().__init__(store, trusted=trusted, local=local, max_size=max_size, host=host,
                         require_build=require_build, witness=witness)
        self.pointer = pointer
        self.generation: m.Manifest | None = None
        self.refusal: tuple[str, str] | None = None  # (status, why): nothing of it loads
        self._entries: dict[str, m.Entry] = {}
        self._ahead: dict[str, Future[bytes | None]] = {}
        self._pool: ThreadPoolExecutor | None = None
        self.ahead_planned = self.ahead_used = 0
        self._unreachable = False
        try:
            found = reading.load(store, reading.pointed(store, pointer), self.trusted, pointer)
        except reading.Refused as exc:
            self.refusal = (exc.status, str(exc))
        except StoreError as exc:  # not a judgement: the store could not answer (a miss)
            self.refusal = (exc.kind, f"{store.url}: {exc.message}")
            self._unreachable = True
        else:
            self.generation = found.manifest
            self._entries = {e.key: e for e in found.manifest.entries}
            self._fetch_ahead(ahead, max(1, workers), budget_bytes)

    def _fetch_ahead(self, keys: tuple[str, ...], workers: int, budget: int) -> None:
        """Start fetching the planned keys the manifest names, in the plan's order, while
        their sizes fit in `budget`."""
        chosen, room = [], budget
        for key in dict.fromkeys(keys):
            entry = self._entries.get(key)
            if entry is not None and entry.size <= room:
                chosen.append(entry)
                room -= entry.size
        if not chosen:
            return
        self._pool = ThreadPoolExecutor(min(workers, len(chosen)))
        self.ahead_planned = len(chosen)
        for entry in chosen:
            self._ahead[entry.key] = self._pool.submit(self._fetched, entry)

    def _fetched(self, entry: m.Entry) -> bytes | None:
        """The object's bytes if they are the entry's (size and digest), else None (the load
        of that key then asks the store itself, and judges and reports what it finds)."""
        try:
            data = self.store.get(entry.object_name, limit=entry.size + 1)
        except Exception:  # noqa: BLE001 - a fetch ahead never fails a load: JAX's own asks
            return None
        return data if data is not None and entry.holds(data) else None

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:  # the fetches in flight end before the store's descriptors go
            pool.shutdown(wait=True, cancel_futures=True)
        self._ahead.clear()
        super().close()
        close = getattr(self.store, "close", None)  # a directory store's descriptors
        if close is not None:
            close()

    def _taken(self, key: str) -> bytes | None:
        """What the fetch ahead found for `key` (waited for), once; None if none."""
        future = self._ahead.pop(key, None)
        if future is None:
            return None
        try:
            data = future.result()
        except Exception:  # noqa: BLE001 - cancelled at close, or a fetch's own failure
            return None
        if data is not None:
            with self._lock:
                self.ahead_used += 1
        return data

    def _from_bucket(self, key: str, name: str) -> bytes | None:
        if self.refusal is not None:
            status, why = self.refusal
            if self._unreachable:
                self._missed(key, status, why)
            else:
                self._rejected(key, status, why)
            return None
        entry = self._entries.get(key)
        if entry is None:
            assert self.generation is not None
            self._missed(key, NOT_FOUND, f"generation {self.generation.name} holds no entry "
                                         "for this key")
            return None
        host = self.host.id
        if entry.build is None and self.require_build:
            self._rejected(key, BUILD_UNKNOWN, "the manifest names no build for it, and the "
                                               "policy requires one (require_build)")
            return None
        if entry.build is not None and entry.build != host:
            self._rejected(key, OTHER_BUILD, f"compiled by build {entry.build}, not this "
                                             f"one ({host})")
            return None
        data = self._taken(key)  # checked by size and digest already, and again below
        if data is None:
            self._skip_if_down()
            data = self.store.get(entry.object_name, limit=entry.size + 1)
        if data is None:
            self._missed(key, NOT_FOUND, f"no object holds its digest {entry.digest[:16]}…")
            return None
        if not entry.holds(data):
            self._rejected(key, WRONG_DIGEST, "its object's bytes are not the ones the "
                                              "manifest names")
            return None
        if entry.build is None:
            with self._lock:
                fresh = key not in self._unknown_seen
                self._unknown_seen.add(key)
            if fresh:
                self.unknown_builds.append(key)
        return data
