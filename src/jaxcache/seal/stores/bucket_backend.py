"""The sealed backend JAX calls for `gs://` or `s3://bucket/prefix`: a private local tier, then
the bucket.

Same guarantees as the sealed directory (sealed_cache.py): the local tier (trusted by ownership) is
read first and keeps this process's misses; a bucket entry is returned only if its signature
verifies over the very bytes returned, downloaded once (the signature first: it bounds the
download); a rejected entry is a miss, reported once, and left where it is; so is one whose
signatures claim another build (store.Reports: the build binding), judged before download.

Writes: a publisher (signing key) checks that the entry is absent, then creates the signature
and then the entry, each create-only (`put_if_absent`: GCS ifGenerationMatch=0, S3
If-None-Match: *), so no reader ever finds a published entry without its signature and the
first publisher wins. A consumer writes nothing to the bucket. Every store failure (network,
permission, a server error) is a miss that `misses` names for the run record, never an
exception for JAX: the job compiles.
After a network failure the bucket is skipped for a while, so a dead link costs one timeout,
not one per compile.
"""

from __future__ import annotations

import errno
import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from jaxcache.seal.objects.store_for_url import (
    ERROR,
    NETWORK,
    NOT_FOUND,
    ObjectStore,
    StoreError,
)
from jaxcache.seal.publishing import tier_names as names
from jaxcache.seal.publishing.tier_files import fits, open_dir, write_tier
from jaxcache.seal.signing import orphan_signatures as orphans
from jaxcache.seal.signing import signature_file as sigfile
from jaxcache.seal.signing import signature_rule as signature
from jaxcache.seal.signing.keyless import KeylessError, KeylessSigner
from jaxcache.seal.stores.backend_reports import (
    Host,
    Rejection,
    Reports,
    Tier,
    Witness,
    trusting,
)
from jaxcache.seal.stores.prefetch import (
    Outcome,
    Prefetcher,
    Taken,
)
from jaxcache.seal.stores.prefetch import (
    cosignatures as cosignatures,
)
from jaxcache.trust.inputs.public_keys import PublicKey
from jaxcache.trust.inputs.signing_keys import SigningKey
from jaxcache.trust.rules import keyring
from jaxcache.trust.rules.keyring import KeyRing

BACKOFF_S = 30.0
OWNER = "unknown: a bucket object (its writer is in the bucket's audit logs)"
_KEY = re.compile(r"^(?P<module>.+)-(?P<hash>[0-9a-f]{64})$")
KEY_MISMATCH, PREFIX_EMPTY = "key-mismatch", "prefix-empty"


def _module_of(key: str) -> str | None:
    """The module a cache key names (JAX's `<module>-<64 hex>`), None for another name."""
    m = _KEY.match(key)
    return m["module"] if m else None


@dataclass(frozen=True, slots=True)
class BucketMiss:
    """A lookup the bucket could not serve: kind not-found (with a hint key-mismatch or
    prefix-empty when the listing explains it), permission-denied, network or error."""

    key: str
    kind: str
    reason: str
    hint: str | None = None


class BucketSealedCache(Reports):
    """A JAX CacheInterface (through jaxcompat) over a sealed bucket prefix."""

    def __init__(self, store: ObjectStore, *, trusted: KeyRing | Iterable[PublicKey],
                 signer: SigningKey | KeylessSigner | None = None, local: str | None = None,
                 max_size: Callable[[], int] | None = None, host: Host | None = None,
                 require_build: bool = False, witness: Witness | None = None,
                 prefetch: Prefetcher | None = None) -> None:
        super().__init__(host, require_build, witness)
        self.store = store
        self._path = self.shared = store.url
        self.local, self.signer = local, signer
        self.trusted = keyring.of(trusted)
        self.given = self.trusted  # as the policy and caller gave it: what readers trust
        if not self.trusted and not isinstance(signer, KeylessSigner):
            raise ValueError("a sealed cache needs at least one trusted public key")
        self.trusted = trusting(self.trusted, signer)
        self.max_size = max_size or (lambda: -1)
        self._local_fd: int | None = open_dir(local) if local else None
        self._local_max = names.name_max(self._local_fd) if self._local_fd is not None \
            else names.DEFAULT_NAME_MAX
        self._closed = False
        self._down_until = 0.0
        self._listing: dict[str, str] | None = None  # module -> a key seen, for diagnosis
        self.misses: list[BucketMiss] = []
        # entries fetched and verified ahead of JAX's asking (prefetch.py); only ever
        # handed over by get, which judges and reports them as its own fetch would
        self.prefetch = prefetch

    def close(self) -> None:
        with self._lock:
            fd, self._local_fd, self._closed = self._local_fd, None, True
        if fd is not None:
            os.close(fd)
        if self.prefetch is not None:
            self.prefetch.close()

    @property
    def closed(self) -> bool:
        return self._closed

    # --- JAX's CacheInterface -------------------------------------------------------------
    def get(self, key: str) -> bytes | None:
        if not key:
            raise ValueError("key cannot be empty")
        if self._closed:
            return None
        name = names.entry(key)
        local_fd = self._local_fd
        if local_fd is not None:
            data = self._from_local(local_fd, self.local or "", key, name, self._local_max)
            if data is not None:
                return data
        try:
            return self._served(key, Tier.SHARED, self._from_bucket(key, name))
        except StoreError as exc:
            self._missed(key, exc.kind, exc.message)
            return None

    def _skip_if_down(self) -> None:
        """A bucket unreachable less than BACKOFF_S ago is not asked again (a load or a
        publish): a dead link costs one deadline, not one per compile."""
        if time.monotonic() < self._down_until:
            raise StoreError(NETWORK, f"{self.store.url} skipped: unreachable less than "
                                      f"{BACKOFF_S:.0f} s ago")

    def _went_down(self, kind: str, reason: str) -> None:
        if kind == NETWORK and "skipped" not in reason:  # a real failure, not our own skip
            self._down_until = time.monotonic() + BACKOFF_S

    def _from_bucket(self, key: str, name: str) -> bytes | None:
        if self.prefetch is not None:
            taken = self.prefetch.take(key)
            if taken is not None:
                return self._from_prefetch(key, taken)
            failed = self.prefetch.network_error
            if failed is not None and not self._down_until:  # the pool's failure is ours
                self._went_down(NETWORK, failed)
        self._skip_if_down()
        sig = self.store.get(names.sidecar(name, names.SIGNATURE, self.store.name_max),
                             limit=sigfile.MAX_BYTES + 1)
        if sig is None:
            if self.store.stat(name) is None:
                self._not_found(key, "no entry and no signature in the bucket")
                return None
            self._rejected(key, signature.UNSIGNED, "no signature object")
            return None
        found = signature.vouch(key, sig, self.trusted, cosignatures(self.store, name))
        vouched, size = found.check, found.size
        if size is None:  # rejected before a byte of the entry is downloaded
            if self.store.stat(name) is None:
                self._not_found(key, "a signature without its entry (a publisher still "
                                     "uploading, or the entry was deleted)")
                return None
            self._rejected(key, vouched.status, vouched.reason, signer=vouched.key_id)
            return None
        judged, other = self._binding(found)
        if other is not None:  # another build's entry: never downloaded
            self._rejected(key, other.status, other.reason, signer=other.key_id)
            return None
        data = self.store.get(name, limit=size + 1)
        if data is None:
            self._not_found(key, "a signature without its entry (a publisher still "
                                 "uploading, or the entry was deleted)")
            return None
        check = signature.confirm(key, data, found, self.trusted)
        if not check.ok:
            self._rejected(key, check.status, check.reason, signer=check.key_id)
            return None
        self._loaded(key, judged)
        return data

    def _from_prefetch(self, key: str, taken: Taken) -> bytes | None:
        """A prefetched result, judged and reported now, on JAX's thread, as _from_bucket
        would have: the keys' validity by the clock now, and the build binding (which needs
        this process's fingerprint), here."""
        got, pool = taken.fetched, self.prefetch
        assert pool is not None
        if got.outcome is Outcome.LOADED and got.found is not None and got.data is not None:
            data, refused = self._load_fetched(key, taken, pool, self.trusted)
            if refused is not None:  # a key expired since, or another build's entry: never
                self._rejected(key, refused.status, refused.reason, depth=1,  # loaded
                               signer=refused.key_id)
            return data
        if got.outcome is Outcome.REJECTED:
            self._rejected(key, got.status, got.reason, depth=1, signer=got.signer)
        elif got.outcome is Outcome.NOT_FOUND:
            self._not_found(key, got.reason)
        else:
            self._missed(key, got.status or ERROR, got.reason)
        return None

    def put(self, key: str, value: bytes) -> None:
        if not key:
            raise ValueError("key cannot be empty")
        if self._closed:
            return
        name = names.entry(key)
        max_size = self.max_size()
        if not fits(key, value, max_size):
            return
        if self.signer is None:
            if self._local_fd is None:
                return  # a read-only consumer: nothing is written anywhere
            where = self.local or ""
            try:
                if write_tier(self._local_fd, name, value, None, self._local_max, max_size,
                              self.evictions, where):
                    self._wrote(key, where, value, Tier.LOCAL)
            except OSError as exc:
                raise self._write_failed(key, where, exc) from None
            return
        try:
            sig = sigfile.sign(key, value, self.signer, build=self.host)
        except KeylessError as exc:
            raise self._write_failed(key, self.store.url, OSError(errno.EIO, str(exc))) from None
        self.trusted = trusting(self.trusted, self.signer)
        signame = names.sidecar(name, names.SIGNATURE, self.store.name_max)
        try:
            self._skip_if_down()
            if self.store.stat(name) is not None:
                return  # first writer wins (checked first: the store also refuses below)
            if not self.store.put_if_absent(signame, sig) and not self._settle(
                    key, value, signame, sig):
                return  # a rival publisher's signature: its entry follows
            if self.store.put_if_absent(name, value):
                if not self._still_signed(key, value, name, signame, sig):
                    return
                self._wrote(key, self.store.url, value, Tier.SHARED)
        except StoreError as exc:
            self._went_down(exc.kind, exc.message)
            raise self._write_failed(key, self.store.url, OSError(0, exc.message)) from None

    def _still_signed(self, key: str, value: bytes, name: str, signame: str,
                      sig: bytes) -> bool:
        """Once our entry is up: does the signature beside it still vouch for these bytes? A
        rival may have completed the entry on our signature and gc deleted both (entry first)
        before our entry landed, which then stands alone: every reader rejects it and every
        later publisher takes it for published (publish.py's rule, found by the fault
        campaign). If not, our entry goes again, only at the generation we find (a miss, never
        a wrong load)."""
        existing = self.store.get(signame, limit=sigfile.MAX_BYTES + 1)
        if existing == sig or (existing is not None and orphans.judge(
                key, value, existing, self.trusted.single(), None) == orphans.COMPLETE):
            return True
        info = self.store.stat(name)
        if info is not None and info.size == len(value):
            self.store.delete_if(name, info.generation)
        return False

    def _settle(self, key: str, value: bytes, signame: str, sig: bytes) -> bool:
        """A signature object and no entry: True when ours may follow it (orphan_signatures.py). The
        generation is read before the bytes, so a replace of anything newer than what was
        judged fails on the server."""
        info = self.store.stat(signame)
        existing = None if info is None else self.store.get(signame,
                                                             limit=sigfile.MAX_BYTES + 1)
        age = None if info is None else info.age_s()  # by the store's clock
        verdict = orphans.judge(key, value, existing, self.trusted.single(), age)
        if verdict == orphans.COMPLETE:
            return True
        if verdict != orphans.REPLACE:
            return False
        if info is None or existing is None:  # gone meanwhile: create-only again
            return self.store.put_if_absent(signame, sig)
        return self.store.replace_if(signame, sig, info.generation)

    # --- reporting ------------------------------------------------------------------------
    def _rejected(self, key: str, status: str, reason: str, depth: int = 0, *,
                  signer: str | None = None) -> None:
        self._report(Rejection(key, self.store.url, status, reason, OWNER, signer), depth)

    def _missed(self, key: str, kind: str, reason: str, hint: str | None = None) -> None:
        self._went_down(kind, reason)
        self.misses.append(BucketMiss(key, kind, reason, hint))

    def _not_found(self, key: str, reason: str) -> None:
        hint, why = self._diagnose(key)
        self._missed(key, NOT_FOUND, reason + (f"; {why}" if why else ""), hint)

    def _diagnose(self, key: str) -> tuple[str | None, str | None]:
        """Why a key is absent, from one listing of the prefix per process: the same module
        under other keys (publisher and reader differ in a key component), or an empty
        prefix (publisher and reader use different prefixes, or nothing was published)."""
        if self._listing is None:
            try:
                seen: dict[str, str] = {}
                for obj in self.store.list():
                    if obj.name.endswith(names.ENTRY_SUFFIX):
                        module = _module_of(names.key_of(obj.name))
                        if module is not None:
                            seen.setdefault(module, names.key_of(obj.name))
                self._listing = seen
            except StoreError:
                return None, None
        module = _module_of(key)
        if not self._listing:
            return PREFIX_EMPTY, (f"{self.store.url} holds no entries: the publisher writes "
                                  "to another prefix (compare its cache path), or has not "
                                  "published yet")
        if module is not None and module in self._listing:
            return KEY_MISMATCH, (f"the bucket holds {module} under another key "
                                  f"({self._listing[module][-64:][:12]}…): other input "
                                  "shapes, or publisher and reader differ in a key component "
                                  "(jaxlib version, platform, XLA flags, compile options); "
                                  "compare them with jaxcache explain on both records")
        return None, None
