"""Prefetch for a sealed bucket reader: the entries the job hit last time, fetched and verified
in parallel before JAX asks for them (issue 45).

JAX asks for each entry only when it reaches that compile, one request at a time; a job with
40 cached modules pays 40 round trips in a row. jaxcache knows which keys the same job hit last
time (its run record), so a bounded pool of daemon threads fetches them meanwhile, each exactly
as the backend's own load does (bucket_backend.py): the signature object first (bounded), the
size that trusted keys vouch for, a download of at most that size, the digest confirmed. The
bytes and the verification are held in memory under a byte budget; nothing is handed to JAX
and nothing is reported from here. The backend's `get` takes a result (waiting for a fetch in
flight: never a second download of the same entry), judges the build binding then (it needs
JAX's backend, which a worker must never ask for) and reports the load, the rejection or the
miss exactly as its own fetch would have, on JAX's thread. A key still queued when JAX asks for
it is fetched by `get` itself and dropped from the queue. Results never asked for are dropped
at close and counted as wasted.

A network failure stops the pool: the keys not yet fetched are left to `get`, which then skips
the bucket for a while as it does after its own failure. Every request has resilient.py's
deadline, and the threads are daemons: a dead bucket never holds the job at exit.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from jaxcache.seal.objects.object_store import NETWORK, ObjectStore, StoreError
from jaxcache.seal.publishing import tier_names as names
from jaxcache.seal.signing import signature_file as sigfile
from jaxcache.seal.signing import signature_rule as signature
from jaxcache.seal.stores.prefetch_plan import MAX_KEYS, plan_keys
from jaxcache.trust.inputs.public_keys import SignerKind
from jaxcache.trust.rules.keyring import KeyRing

WORKERS = 8  # requests in flight at once
BUDGET_BYTES = 1 << 30  # bytes held at once (entries fetched and not yet asked for)


class Outcome(Enum):
    """What one prefetch found, for `get` to report as its own fetch would have."""

    LOADED = "loaded"  # verified bytes (the build binding is judged at get time)
    REJECTED = "rejected"  # the signatures or the bytes did not pass
    NOT_FOUND = "not-found"  # no entry (with or without a signature)
    MISSED = "missed"  # the store failed (kind in `kind`)
    OVER_BUDGET = "over-budget"  # not downloaded: `get` fetches it itself


@dataclass(frozen=True, slots=True)
class Fetched:
    key: str
    outcome: Outcome
    seconds: float  # the fetch's own time, signature to digest
    data: bytes | None = None
    found: signature.Vouch | None = None
    status: str = ""  # REJECTED: the check's status; MISSED: the store error's kind
    reason: str = ""
    signer: str | None = None  # REJECTED: the id of the key whose signature was judged


@dataclass(frozen=True, slots=True)
class Taken:
    """A result handed to `get`, with how long `get` waited for it."""

    fetched: Fetched
    waited_s: float


@dataclass(frozen=True, slots=True)
class PrefetchCounts:
    """For the run record and summary: entries planned from the record, prefetched (verified
    and held), used (handed to JAX's get), wasted (fetched, never asked for), not fetched
    (asked for first, over budget, or still queued or in flight when counted: at the job's
    end, a fetch it never waited for), not found (the bucket holds no such entry: a record
    naming keys another cache held, or entries deleted since; no failure), failed (the store
    failed), rejected (reported at get time), and the seconds the job did not wait: for each
    entry used, its fetch's time less what get waited for it. Every planned key is counted
    once: planned = used + wasted + not_fetched + not_found + failed + rejected."""

    planned: int = 0
    prefetched: int = 0
    used: int = 0
    wasted: int = 0
    not_fetched: int = 0
    not_found: int = 0
    failed: int = 0
    rejected: int = 0
    saved_s: float = 0.0
    source: str | None = None  # the record the keys came from
    # why the fetch did not start as the job began to import JAX (then nothing was fetched)
    early_error: str | None = None


def cosignatures(store: ObjectStore, name: str) -> signature.Fetch:
    """The co-signature object of `name` by a key id (bounded as a signature is)."""
    def fetch(key_id: str) -> bytes | None:
        where = names.cosignature(name, key_id, store.name_max)
        return None if where is None else store.get(where, limit=sigfile.MAX_BYTES + 1)
    return fetch


class Prefetcher:
    """A bounded pool fetching `keys` from `store` for a reader trusting `trusted`."""

    def __init__(self, store: ObjectStore, trusted: KeyRing, keys: Iterable[object], *,
                 workers: int = WORKERS, budget_bytes: int = BUDGET_BYTES,
                 limit: int = MAX_KEYS, source: str | None = None,
                 early_error: str | None = None) -> None:
        self.store, self.trusted = store, trusted
        self.keys = plan_keys(keys, limit)
        self._planned = frozenset(self.keys)
        self.workers = max(1, min(workers, len(self.keys) or 1))
        self.budget_bytes = max(0, budget_bytes)
        self.source = source
        self._lock = threading.Lock()
        self._queue: deque[str] = deque(self.keys)
        self._flight: dict[str, threading.Event] = {}
        self._done: dict[str, Fetched] = {}
        self._claimed: set[str] = set()  # asked for before a worker took them
        self._held = 0
        self._stopped = False  # no new fetch starts (closed, or the network failed)
        self._closed = False
        self.network_error: str | None = None
        self._counts = PrefetchCounts(planned=len(self.keys), source=source,
                                      early_error=early_error)
        self._threads: list[threading.Thread] = []
        self._pid = os.getpid()  # a forked child has none of the pool's threads
        _LIVE.add(self)

    # --- the pool -------------------------------------------------------------------------
    def start(self) -> Prefetcher:
        """Start the pool, once everything a fetch imports is imported, here, on the caller's
        thread: the pool's threads then only wait on the network (and hash), never import
        beside the job's `import jax` (lifecycle/prefetching.py says why)."""
        if self.keys:
            _import_all(self.store, self.trusted)
        for i in range(self.workers if self.keys else 0):
            t = threading.Thread(target=self._work, name=f"jaxcache-prefetch-{i}", daemon=True)
            self._threads.append(t)
            t.start()
        return self

    def _next(self) -> tuple[str, threading.Event] | None:
        with self._lock:
            while self._queue and not self._stopped:
                key = self._queue.popleft()
                if key in self._claimed:
                    continue
                event = self._flight[key] = threading.Event()
                return key, event
            return None

    def _work(self) -> None:
        while (job := self._next()) is not None:
            key, event = job
            started = time.monotonic()
            try:
                result = self._fetch(key, started)
            except StoreError as exc:
                result = Fetched(key, Outcome.MISSED, time.monotonic() - started,
                                 status=exc.kind, reason=exc.message)
                if exc.kind == NETWORK:
                    with self._lock:
                        self._stopped = True
                        self.network_error = self.network_error or exc.message
            except Exception as exc:  # noqa: BLE001 - a worker never dies with a key in flight
                result = Fetched(key, Outcome.MISSED, time.monotonic() - started,
                                 status="error", reason=f"{type(exc).__name__}: {exc}")
            with self._lock:
                if self._closed and result.data is not None:  # nobody will ask: drop it
                    self._release(result)
                    result = Fetched(key, result.outcome, result.seconds)
                self._done[key] = result
                del self._flight[key]
            event.set()

    def _reserve(self, size: int) -> bool:
        with self._lock:
            if self._closed or self._held + size > self.budget_bytes:
                return False
            self._held += size
            return True

    def _release(self, result: Fetched) -> None:
        """(under the lock) The bytes of `result` no longer count against the budget."""
        if result.data is not None and result.found is not None and \
                result.found.size is not None:
            self._held -= result.found.size

    def _fetch(self, key: str, started: float) -> Fetched:
        """Exactly the backend's verified fetch (bucket_backend._from_bucket), less the build
        binding and the reporting."""
        name = names.entry(key)

        def done(outcome: Outcome, status: str = "", reason: str = "",
                 data: bytes | None = None, found: signature.Vouch | None = None,
                 signer: str | None = None) -> Fetched:
            return Fetched(key, outcome, time.monotonic() - started, data, found, status,
                           reason, signer)

        sig = self.store.get(names.sidecar(name, names.SIGNATURE, self.store.name_max),
                             limit=sigfile.MAX_BYTES + 1)
        if sig is None:
            if self.store.stat(name) is None:
                return done(Outcome.NOT_FOUND, reason="no entry and no signature in the bucket")
            return done(Outcome.REJECTED, status=signature.UNSIGNED,
                        reason="no signature object")
        found = signature.vouch(key, sig, self.trusted, cosignatures(self.store, name))
        size = found.size
        if size is None:
            if self.store.stat(name) is None:
                return done(Outcome.NOT_FOUND, reason="a signature without its entry (a "
                            "publisher still uploading, or the entry was deleted)")
            return done(Outcome.REJECTED, status=found.check.status, reason=found.check.reason,
                        signer=found.check.key_id)
        if not self._reserve(size):
            return done(Outcome.OVER_BUDGET)
        try:
            data = self.store.get(name, limit=size + 1)
        except BaseException:
            with self._lock:
                self._held -= size
            raise
        if data is None:
            with self._lock:
                self._held -= size
            return done(Outcome.NOT_FOUND, reason="a signature without its entry (a "
                        "publisher still uploading, or the entry was deleted)")
        check = signature.confirm(key, data, found, self.trusted)
        if not check.ok:
            with self._lock:
                self._held -= size
            return done(Outcome.REJECTED, status=check.status, reason=check.reason,
                        signer=check.key_id)
        return done(Outcome.LOADED, data=data, found=found)

    # --- the backend's side ---------------------------------------------------------------
    def take(self, key: str) -> Taken | None:
        """The prefetched result for `key`, once (waiting for a fetch in flight); None when
        `get` must fetch it itself (not planned, still queued, over budget, or taken, or in
        a forked child, where no thread of the pool runs to finish a fetch)."""
        if os.getpid() != self._pid:
            return None
        with self._lock:
            result = self._done.pop(key, None)
            event = None if result is not None else self._flight.get(key)
            if result is None and event is None:
                if key in self._planned and key not in self._claimed:
                    self._claimed.add(key)  # a worker will skip it: no second download
                    self._count(not_fetched=1)
                return None
        waited = 0.0
        if result is None:
            assert event is not None
            began = time.monotonic()
            event.wait()
            waited = time.monotonic() - began
            with self._lock:
                result = self._done.pop(key, None)
            if result is None:  # taken by another thread meanwhile
                return None
        with self._lock:
            self._claimed.add(key)
            self._release(result)
            if result.outcome is Outcome.LOADED:
                pass  # counted when the backend hands it to JAX (handed) or refuses it
            elif result.outcome is Outcome.REJECTED:
                self._count(rejected=1)
            elif result.outcome is Outcome.OVER_BUDGET:
                self._count(not_fetched=1)
            elif result.outcome is Outcome.NOT_FOUND:
                self._count(not_found=1)
            else:
                self._count(failed=1)
        if result.outcome is Outcome.OVER_BUDGET:
            return None
        return Taken(result, waited)

    def handed(self, taken: Taken) -> None:
        """A verified result the backend handed to JAX: used, and the fetch's time saved."""
        with self._lock:
            self._count(used=1, saved_s=max(0.0, taken.fetched.seconds - taken.waited_s))

    def refused(self) -> None:
        """A verified result the backend refused at load time (another build's entry, a key
        no longer valid): rejected."""
        with self._lock:
            self._count(rejected=1)

    def abandon(self) -> Prefetcher:
        """Never started (its early start failed): every planned key counts as not fetched,
        and `get` fetches each itself."""
        with self._lock:
            self._stopped = True
        return self

    def _count(self, used: int = 0, not_fetched: int = 0, not_found: int = 0, failed: int = 0,
               rejected: int = 0, saved_s: float = 0.0) -> None:
        """(under the lock)"""
        c = self._counts
        self._counts = PrefetchCounts(
            c.planned, c.prefetched, c.used + used, c.wasted, c.not_fetched + not_fetched,
            c.not_found + not_found, c.failed + failed, c.rejected + rejected,
            c.saved_s + saved_s, c.source, c.early_error)

    def counts(self) -> PrefetchCounts:
        """The counts now, which always add up to the keys planned: prefetched are the
        verified results so far (used or held), wasted those held and never asked for, and
        every planned key with no result (yet: still queued or in flight when the job ends, or
        never started) counts as not fetched. Final once the job has ended."""
        with self._lock:
            c = self._counts
            done = list(self._done.values())  # finished, never asked for (yet)
            held = sum(1 for r in done if r.outcome is Outcome.LOADED)
            not_found = c.not_found + sum(1 for r in done if r.outcome is Outcome.NOT_FOUND)
            failed = c.failed + sum(1 for r in done if r.outcome is Outcome.MISSED)
            rejected = c.rejected + sum(1 for r in done if r.outcome is Outcome.REJECTED)
            not_fetched = c.not_fetched + sum(1 for r in done
                                              if r.outcome is Outcome.OVER_BUDGET)
            # queued or in flight: no result to count elsewhere
            not_fetched += max(0, c.planned - c.used - held - not_found - failed - rejected
                               - not_fetched)
            return PrefetchCounts(
                c.planned, c.used + held, c.used, held, not_fetched, not_found, failed,
                rejected, round(c.saved_s, 4), c.source, c.early_error)

    @property
    def held_bytes(self) -> int:
        with self._lock:
            return self._held

    def close(self) -> None:
        """Stop: nothing more is fetched, what is held is dropped (it stays counted as
        wasted)."""
        with self._lock:
            self._stopped = self._closed = True
            for result in self._done.values():
                self._release(result)
            self._done = {k: Fetched(k, r.outcome, r.seconds)  # the bytes go, the count stays
                          for k, r in self._done.items()}

    def wait_idle(self, timeout: float | None = None) -> bool:
        """For tests and benchmarks: True once no fetch is queued or in flight."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for t in self._threads:
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)


def _import_all(store: ObjectStore, trusted: KeyRing) -> None:
    """What a fetch would import at its first request and check: the store's client and its
    request path, the digest, the verifiers of keys and of identities. A keyless verifier
    that cannot be made is left to the check, which then fails each entry as it would."""
    from jaxcache.seal.signing import digest

    store.prepare()
    "store.example".encode("idna")  # a host name's codec, which sockets import at first use
    digest.of(b"")
    from cryptography.exceptions import InvalidSignature  # noqa: F401 - signature_file's

    for key in trusted.keys.values():
        if key.kind is SignerKind.KEY:
            key.verifier()
            break
    if trusted.identities:
        from jaxcache.seal.signing import keyless

        with contextlib.suppress(Exception):  # judged, and reported, at each entry's check
            keyless.prepare(trusted.trust_root)


# a forked child has none of the pool's threads, and a lock one of them held at the fork would
# stay held there for good: each pool gets a new lock in the child, and fetches nothing more
_LIVE: weakref.WeakSet[Prefetcher] = weakref.WeakSet()


def _in_child() -> None:
    for pool in list(_LIVE):
        pool._lock = threading.Lock()
        pool._stopped = True


os.register_at_fork(after_in_child=_in_child)
