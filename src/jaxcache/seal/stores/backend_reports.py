"""What a sealed backend (a directory, sealed_cache.py, or a bucket, bucket_backend.py) tells
the run record and the person: entries rejected (each key once, with a SealWarning), written
(where, which tier, how many bytes), evicted, writes that failed, loads whose build no signature
claims; and the build binding both judge loads by (the host's fingerprint, asked once).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import assert_never

from jaxcache import fingerprint
from jaxcache.fingerprint.model import Fingerprint
from jaxcache.fingerprint.rule import Judgement, Outcome
from jaxcache.seal.publishing import lru
from jaxcache.seal.publishing.tier_files import Rejected, get_io, owner_of, read_whole
from jaxcache.seal.signing import build_claims as builds
from jaxcache.seal.signing import signature_rule as signature
from jaxcache.text import safe
from jaxcache.trust.inputs.signing_keys import SigningKey
from jaxcache.trust.rules.keyring import KeyRing

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeAlias

    from jaxcache.seal.signing import keyless
    from jaxcache.seal.stores.prefetch import Prefetcher, Taken

    Signer: TypeAlias = "SigningKey | keyless.KeylessSigner"

logger = logging.getLogger("jaxcache.seal")


class SealWarning(UserWarning):
    """An entry was rejected; the job compiles instead. (A failed write goes to JAX, which
    warns as it does for its own cache.)"""


@dataclass(frozen=True, slots=True)
class Rejection:
    key: str
    directory: str
    status: str  # unsigned | bad-signature | unknown-key | not-a-file | other-build
    #              | build-unknown (and the key statuses of signature_rule.py)
    reason: str
    owner: str  # the file's owner, as the kernel reports it
    signer: str | None = None  # the id of the key whose signature was judged, if one was named

    def describe(self) -> str:
        return (f"jaxcache: rejected cache entry {safe(self.key)} in {safe(self.directory)}: "
                f"{safe(self.reason)} (file owner {safe(self.owner)}); compiling instead")


Host = Callable[[], Fingerprint]  # this process's fingerprint (asked once, when first needed)
# told (directory, key, bytes) of each entry written to the local tier, as JAX's own writes are
# told to the origin ledger's witness (lifecycle/witness.py recorder())
Witness = Callable[[str, str, bytes], None]


class Tier(StrEnum):
    """Where a sealed backend wrote an entry: the sealed (shared) cache, signed, or the
    private local tier (--local), unsigned and trusted by ownership."""

    SHARED = "shared"
    LOCAL = "local"

    @property
    def words(self) -> str:
        if self is Tier.SHARED:
            return "the sealed cache"
        if self is Tier.LOCAL:
            return "the local tier"
        assert_never(self)


@dataclass(frozen=True, slots=True)
class Write:
    """An entry this process added: its key, the directory (or bucket URL) and tier it went to,
    and its size: the bytes written, whatever another file at that key in another tier holds."""

    key: str
    directory: str
    bytes: int
    tier: Tier


class Reports:
    """What a sealed backend tells the run record: rejections (each key reported once, with a
    SealWarning), entries written (where, which tier, how many bytes) and evicted, writes that
    failed, entries loaded whose build is unknown. Also the build binding both backends share:
    the host's fingerprint (`host`, asked once per backend, at the first load or write: inside
    a job, after its first compile has made the backend) that a publisher signs and a reader
    judges claims by. `witness` hears each entry written to the local tier (the origin ledger:
    those entries are trusted by ownership, as a plain cache's are)."""

    def __init__(self, host: Host | None = None, require_build: bool = False,
                 witness: Witness | None = None) -> None:
        self._host_of: Host = host or fingerprint.in_job
        self._host: Fingerprint | None = None
        self.require_build = require_build
        self.witness = witness
        self.unknown_builds: list[str] = []  # keys loaded though no signature claims a build
        self.rejections: list[Rejection] = []
        self.writes: list[Write] = []  # the entries this process added
        self.evictions: list[tuple[str, str]] = []  # (entry, directory) this process evicted
        self.write_errors: list[str] = []
        # key -> (the tier an entry JAX loaded came from, its bytes): the record's size of a
        # hit is what was loaded, not what the shared directory holds at that key
        self.served: dict[str, tuple[Tier, int]] = {}
        self._reported: set[tuple[str, str]] = set()
        self._unknown_seen: set[str] = set()
        self._lock = threading.Lock()

    @property
    def host(self) -> Fingerprint:
        """This process's fingerprint, computed once (fingerprint.in_job: what `jaxcache run`
        handed the job, else hashed here once per install)."""
        found = self._host
        if found is None:
            found = self._host = self._host_of()
        return found

    @property
    def host_if_asked(self) -> Fingerprint | None:
        """The fingerprint, if a load or a write has asked for it (reports never compute it)."""
        return self._host

    def _binding(self, found: signature.Vouch) -> tuple[Judgement, signature.Check | None]:
        """The build binding, judged from the verified claims before the entry is read: the
        judgement, and the Check that rejects the entry (None: it may load)."""
        return builds.build_check(found, self.host, self.require_build)

    def _load_fetched(self, key: str, taken: Taken, pool: Prefetcher, trusted: KeyRing
                      ) -> tuple[bytes | None, signature.Check | None]:
        """A result fetched and verified ahead (prefetch.py), judged as a load at this moment
        would judge it: its signers by the clock now, then the build binding. (the bytes,
        None): handed to JAX, counted used; (None, why): refused, counted rejected. Both
        backends take a fetch ahead through here."""
        got = taken.fetched
        assert got.found is not None and got.data is not None
        now = signature.still_valid(key, got.found, trusted)
        judged, other = self._binding(got.found) if now.ok else (None, now)
        if other is not None:
            pool.refused()
            return None, other
        assert judged is not None
        pool.handed(taken)
        self._loaded(key, judged)
        return got.data, None

    def _loaded(self, key: str, judged: Judgement) -> None:
        """An entry was loaded: count it if no signature said which build made it."""
        if judged.outcome is Outcome.UNKNOWN:
            with self._lock:
                if key in self._unknown_seen:
                    return
                self._unknown_seen.add(key)
            self.unknown_builds.append(key)

    def _reject(self, key: str, directory: str, exc: Rejected, depth: int = 0) -> None:
        self._report(Rejection(key, directory, exc.status, exc.reason, owner_of(exc.uid),
                               exc.signer), depth)

    def _report(self, rejection: Rejection, depth: int = 0) -> None:
        """depth: calls between JAX's get() and this one beyond the usual two, so the
        warning points at JAX's caller wherever it is raised from."""
        with self._lock:
            if (rejection.directory, rejection.key) in self._reported:
                return
            self._reported.add((rejection.directory, rejection.key))
        self.rejections.append(rejection)
        logger.debug(rejection.describe())  # the warning below is what people see
        warnings.warn(rejection.describe(), SealWarning, stacklevel=4 + depth)

    def _from_local(self, fd: int, where: str, key: str, name: str, limit: int
                    ) -> bytes | None:
        """An entry of the private tier (trusted by ownership, read first): a rejected one is
        reported and is a miss; a hit becomes the most recently used."""
        try:
            data = read_whole(fd, name)
        except Rejected as exc:
            get_io(exc, where, name)
            self._reject(key, where, exc, depth=1)
            return None
        if data is not None:
            lru.touch(fd, name, limit)
            self._served(key, Tier.LOCAL, data)
        return data

    def _served(self, key: str, tier: Tier, data: bytes | None) -> bytes | None:
        """`data`, handed to JAX from `tier` (None: a miss, nothing to say)."""
        if data is not None:
            self.served[key] = (tier, len(data))
        return data

    def _wrote(self, key: str, where: str, value: bytes, tier: Tier) -> None:
        """An entry was written: recorded with its size, and one in the local tier told to
        the witness, whose failure never reaches the job (the entry stays of unknown
        origin: fails closed)."""
        self.writes.append(Write(key, where, len(value), tier))
        if tier is Tier.LOCAL and self.witness is not None:
            with contextlib.suppress(Exception):
                self.witness(where, key, value)

    def _write_failed(self, key: str, where: str, exc: OSError) -> OSError:
        """As JAX's own cache does: the error goes to JAX, which warns (or raises, with
        jax_raise_persistent_cache_errors) and goes on uncached."""
        text = (f"jaxcache: could not write cache entry {safe(key)} to {safe(where)}: "
                f"{exc.strerror or exc}; the job goes on without caching it")
        self.write_errors.append(text)
        logger.debug(text)
        return OSError(exc.errno, text)


def trusting(ring: KeyRing, signer: Signer | None) -> KeyRing:
    """The ring a publisher judges its own writes with: it trusts what it signs (its key;
    keyless, exactly the identity its certificate states, once it has signed)."""
    if isinstance(signer, SigningKey):
        return ring.with_key(signer.public)
    own = signer.identity if signer is not None else None
    return ring.with_identity(own) if own is not None else ring
