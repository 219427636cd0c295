"""The sealed cache backend JAX calls: `get(key)` and `put(key, bytes)`, with tiers.

Reads: a private local directory first (trusted by ownership, as its audit showed), then the
shared sealed directory, whose entry is returned only if its signature verifies over the very
bytes returned; the file is read once, through a directory fd, never following a symlink.
A rejected entry is a miss, reported once per key, and left where it is.

Writes: with a signing key, to the shared directory, signed; without one, to the local
directory only (a read-only consumer writes nothing shared). Every write is create-only
(publish.py: a temporary file hard-linked into place): first writer wins, as in JAX, and a
killed writer leaves at most a temporary file that no reader opens. The signature is
published before its entry, so no reader ever finds an entry without its signature (tier_names.py:
both always fit).
Size limit: `max_size()` (jax_compilation_cache_max_size, read at every write as JAX's
LRUCache would if it were created then) evicts least recently used entries that jaxcache
wrote in the tier it writes (lru.py).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterable

from jaxcache.seal.publishing import lru
from jaxcache.seal.publishing import tier_names as names
from jaxcache.seal.publishing.tier_files import (
    Rejected,
    cosignatures,
    fits,
    get_io,
    open_dir,
    read_whole,
    write_tier,
)
from jaxcache.seal.signing import keyless
from jaxcache.seal.signing import orphan_signatures as orphans
from jaxcache.seal.signing import signature_file as sigfile
from jaxcache.seal.signing import signature_rule as signature
from jaxcache.seal.stores.backend_reports import Host, Reports, Tier, Witness, trusting
from jaxcache.trust.inputs.public_keys import PublicKey
from jaxcache.trust.rules import keyring
from jaxcache.trust.rules.keyring import KeyRing

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeAlias

    from jaxcache.seal.stores.prefetch import Prefetcher
    from jaxcache.trust.inputs.signing_keys import SigningKey

    Signer: TypeAlias = "SigningKey | keyless.KeylessSigner"


class SealedCache(Reports):
    """A JAX CacheInterface over a sealed directory, optionally behind a private one.

    jaxcompat wraps it in JAX's own CacheInterface class; this module stays JAX-free."""

    def __init__(self, shared: str, *, trusted: KeyRing | Iterable[PublicKey],
                 signer: Signer | None = None, local: str | None = None,
                 max_size: Callable[[], int] | None = None, host: Host | None = None,
                 require_build: bool = False, witness: Witness | None = None,
                 prefetch: Prefetcher | None = None) -> None:
        self._path = shared  # what JAX and jaxcompat.cache_state() read back
        # entries of the shared directory read and verified ahead (a network filesystem:
        # directory_objects.py); only a verified one is taken, anything else read as ever
        self.prefetch = prefetch
        self.shared, self.local, self.signer = shared, local, signer
        self.trusted = keyring.of(trusted)
        self.given = self.trusted  # as the policy and caller gave it: what readers trust
        if not self.trusted and not isinstance(signer, keyless.KeylessSigner):
            raise ValueError("a sealed cache needs at least one trusted public key")
        self.trusted = trusting(self.trusted, signer)
        self.max_size = max_size or (lambda: -1)
        self._shared_fd: int | None = open_dir(shared)
        try:
            self._local_fd: int | None = open_dir(local) if local else None
        except OSError:
            os.close(self._shared_fd)
            raise
        self._shared_max = names.name_max(self._shared_fd)
        self._local_max = names.name_max(self._local_fd) if self._local_fd is not None \
            else names.DEFAULT_NAME_MAX
        super().__init__(host, require_build, witness)

    def close(self) -> None:
        """Let go of the directories (a replaced or disabled cache); later calls miss."""
        with self._lock:
            fds = (self._shared_fd, self._local_fd)
            self._shared_fd = self._local_fd = None
        for fd in fds:
            if fd is not None:
                os.close(fd)
        if self.prefetch is not None:
            self.prefetch.close()

    @property
    def closed(self) -> bool:
        return self._shared_fd is None

    # --- JAX's CacheInterface -------------------------------------------------------------
    def get(self, key: str) -> bytes | None:
        if not key:
            raise ValueError("key cannot be empty")
        name = names.entry(key)
        shared_fd, local_fd = self._shared_fd, self._local_fd
        if shared_fd is None:
            return None
        if local_fd is not None:
            data = self._from_local(local_fd, self.local or "", key, name, self._local_max)
            if data is not None:
                return data
        if self.prefetch is not None:
            data = self._prefetched(key)
            if data is not None:
                return self._served(key, Tier.SHARED, data)
        try:
            # the signature first: it bounds what we read, so a planted huge file costs a
            # recompile, not the job's memory
            sig = read_whole(shared_fd, names.sidecar(name, names.SIGNATURE, self._shared_max),
                        limit=sigfile.MAX_BYTES + 1)
            found = signature.vouch(key, sig, self.trusted,
                                    cosignatures(shared_fd, name, self._shared_max))
            size = found.size
            # valid signatures of another build's entry are a miss too, judged unread
            judged, refused = self._binding(found) if size is not None else (None, found.check)
            if size is None or refused is not None:
                # rejected, at most one byte read: a link or no file says so
                if read_whole(shared_fd, name, limit=1) is None:
                    return None
                try:
                    uid = os.stat(name, dir_fd=shared_fd, follow_symlinks=False).st_uid
                except FileNotFoundError:
                    return None  # removed meanwhile (JAX's own LRU eviction, a cleanup)
                assert refused is not None
                raise Rejected(refused.status, refused.reason, uid, signer=refused.key_id)
            data = read_whole(shared_fd, name, limit=size + 1)
            if data is None:
                return None
            check = signature.confirm(key, data, found, self.trusted)
            if not check.ok:
                try:
                    uid = os.stat(name, dir_fd=shared_fd, follow_symlinks=False).st_uid
                except FileNotFoundError:
                    uid = -1  # removed since it was read: still a rejection, owner unknown
                raise Rejected(check.status, check.reason, uid, signer=check.key_id)
        except Rejected as exc:
            get_io(exc, self.shared, name)
            self._reject(key, self.shared, exc)
            return None
        if judged is not None:
            self._loaded(key, judged)
        if self.signer is not None:  # only the publisher keeps the shared tier's recency
            lru.touch(shared_fd, name, self._shared_max)
        return self._served(key, Tier.SHARED, data)

    def _prefetched(self, key: str) -> bytes | None:
        """The entry read and verified ahead, if it was and it passes as a load now
        (_load_fetched); None: read it from the directory as ever, which judges and reports
        anything else as its own load would (the file's owner too)."""
        from jaxcache.seal.stores.prefetch import Outcome as Fetch

        pool = self.prefetch
        assert pool is not None
        taken = pool.take(key)
        got = None if taken is None else taken.fetched
        if taken is None or got is None or got.outcome is not Fetch.LOADED or \
                got.found is None or got.data is None:
            return None
        data, _ = self._load_fetched(key, taken, pool, self.trusted)
        return data  # refused: read from the directory as ever, reported with its owner

    def put(self, key: str, value: bytes) -> None:
        if not key:
            raise ValueError("key cannot be empty")
        name = names.entry(key)
        if self.signer is not None:
            where, fd, limit, tier = self.shared, self._shared_fd, self._shared_max, Tier.SHARED
            try:
                sig = sigfile.sign(key, value, self.signer, build=self.host)
            except keyless.KeylessError as exc:
                raise self._write_failed(key, where, OSError(errno.EIO, str(exc))) from None
            self.trusted = trusting(self.trusted, self.signer)
        elif self._local_fd is not None:
            where, fd, limit, sig = self.local or "", self._local_fd, self._local_max, None
            tier = Tier.LOCAL
        else:
            return  # a read-only consumer of the sealed directory
        if fd is None:
            return  # closed
        max_size = self.max_size()
        if not fits(key, value, max_size):
            return
        trusted = self.trusted.single()  # our own signature of these bytes completes it

        def orphan(existing: bytes | None, age: float | None) -> str:
            return orphans.judge(key, value, existing, trusted, age)
        try:
            if write_tier(fd, name, value, sig, limit, max_size, self.evictions, where,
                          orphan if sig is not None else None):
                self._wrote(key, where, value, tier)
        except OSError as exc:
            raise self._write_failed(key, where, exc) from None
