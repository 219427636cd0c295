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

import contextlib
import errno
import logging
import os
import stat
import threading
import warnings
from collections.abc import Callable, Iterable
from enum import Enum
from typing import assert_never

from jaxcache import fingerprint
from jaxcache.errors import JaxcacheError
from jaxcache.fingerprint.model import Fingerprint
from jaxcache.fingerprint.rule import Judgement, Outcome
from jaxcache.seal.publishing import lru
from jaxcache.seal.publishing import tier_names as names
from jaxcache.seal.publishing.publish import Orphan, exists, publish
from jaxcache.seal.signing import build_claims as builds
from jaxcache.seal.signing import keyless
from jaxcache.seal.signing import orphan_signatures as orphans
from jaxcache.seal.signing import signature_file as sigfile
from jaxcache.seal.signing import signature_rule as signature
from jaxcache.text import safe
from jaxcache.trust.inputs.public_keys import PublicKey
from jaxcache.trust.inputs.signing_keys import SigningKey
from jaxcache.trust.rules import keyring
from jaxcache.trust.rules.keyring import KeyRing
from jaxcache.values import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeAlias

    from jaxcache.seal.stores.prefetch import Prefetcher, Taken

    Signer: TypeAlias = "SigningKey | keyless.KeylessSigner"

ENTRY_SUFFIX = names.ENTRY_SUFFIX
logger = logging.getLogger("jaxcache.seal")


class SealWarning(UserWarning):
    """An entry was rejected; the job compiles instead. (A failed write goes to JAX, which
    warns as it does for its own cache.)"""


@frozen
class Rejection:
    key: str
    directory: str
    status: str  # unsigned | bad-signature | unknown-key | not-a-file | other-build
    #              | build-unknown (and the key statuses of signature_rule.py)
    reason: str
    owner: str  # the file's owner, as the kernel reports it

    def describe(self) -> str:
        return (f"jaxcache: rejected cache entry {safe(self.key)} in {safe(self.directory)}: "
                f"{safe(self.reason)} (file owner {safe(self.owner)}); compiling instead")


class Rejected(Exception):
    """An entry judged unusable. `io`: the error JAX's own cache would have met reading it
    (a directory in its place, a file it may not open), which the sealed reader hands to JAX
    as JAX's cache would (get_io); None for a judgement of its own (a link, a signature)."""

    def __init__(self, status: str, reason: str, uid: int, io: OSError | None = None) -> None:
        super().__init__(reason)
        self.status, self.reason, self.uid, self.io = status, reason, uid, io


def get_io(exc: Rejected, directory: str, name: str) -> None:
    """The sealed reader's get() follows JAX on I/O errors reading the entry `name` itself:
    they go to JAX, which warns and misses, or raises with jax_raise_persistent_cache_errors
    (JAX's _cache_read), naming the file in `directory` as JAX's would. Anything else
    returns, to be a reported miss: a signature rejection is not an I/O error, and a sidecar
    JAX never reads (a directory at the signature's name) is jaxcache's own judgement."""
    io = exc.io
    if io is not None and io.filename == name:
        raise type(io)(io.errno, io.strerror, os.path.join(directory, name)) from None


Host = Callable[[], Fingerprint]  # this process's fingerprint (asked once, when first needed)
# told (directory, key, bytes) of each entry written to the local tier, as JAX's own writes are
# told to the origin ledger's witness (lifecycle/witness.py recorder())
Witness = Callable[[str, str, bytes], None]


class Tier(str, Enum):
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


@frozen
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
        self._report(Rejection(key, directory, exc.status, exc.reason, _owner(exc.uid)),
                     depth)

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


def fits(key: str, value: bytes, max_size: int) -> bool:
    """JAX's rule: an entry larger than jax_compilation_cache_max_size is not stored."""
    if max_size != -1 and len(value) > max_size:
        warnings.warn(f"Cache value for key {safe(key)!r} of size {len(value)} bytes "
                      f"exceeds the maximum cache size of {max_size} bytes", stacklevel=3)
        return False
    return True


def write_tier(fd: int, name: str, value: bytes, sig: bytes | None, limit: int,
               max_size: int, evictions: list[tuple[str, str]], where: str,
               orphan: Orphan | None = None) -> bool:
    """Publish into a directory tier, evicting least recently used entries of ours first
    when there is a limit; False if the name was taken (first writer wins)."""
    if max_size == -1:
        return publish(fd, name, value, sig, limit, orphan)  # takes the lock if it must
    with lru.locked(fd):
        if exists(fd, name):
            return False
        for gone in lru.evict(fd, max_size, len(value), limit):
            evictions.append((gone, where))
        return publish(fd, name, value, sig, limit, orphan, locked=True)


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
                return data
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
                raise Rejected(refused.status, refused.reason, uid)
            data = read_whole(shared_fd, name, limit=size + 1)
            if data is None:
                return None
            check = signature.confirm(key, data, found, self.trusted)
            if not check.ok:
                try:
                    uid = os.stat(name, dir_fd=shared_fd, follow_symlinks=False).st_uid
                except FileNotFoundError:
                    uid = -1  # removed since it was read: still a rejection, owner unknown
                raise Rejected(check.status, check.reason, uid)
        except Rejected as exc:
            get_io(exc, self.shared, name)
            self._reject(key, self.shared, exc)
            return None
        if judged is not None:
            self._loaded(key, judged)
        if self.signer is not None:  # only the publisher keeps the shared tier's recency
            lru.touch(shared_fd, name, self._shared_max)
        return data

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


def apart(local: str, shared: str) -> None:
    """Refuse a local tier that is the sealed directory, inside it or above it: its entries
    would be loaded unsigned from where others write, or it would hold the sealed cache.
    Both absolute; symlinks in what exists are resolved before comparing."""
    a, b = os.path.realpath(local), os.path.realpath(shared)
    if a == b:
        where = "is the sealed cache directory itself"
    elif a.startswith(b.rstrip("/") + "/"):
        where = f"is inside the sealed cache {safe(b)}"
    elif b.startswith(a.rstrip("/") + "/"):
        where = f"contains the sealed cache {safe(b)}"
    else:
        return
    raise JaxcacheError(f"the local tier {safe(os.path.normpath(local))} {where}: give a "
                        "private directory apart from it")


def cosignatures(dir_fd: int, name: str, name_max: int) -> signature.Fetch:
    """The co-signature of `name` by a key id, read as a signature is (bounded, O_NOFOLLOW);
    a link or special file there counts as none."""
    def fetch(key_id: str) -> bytes | None:
        where = names.cosignature(name, key_id, name_max)
        if where is None:
            return None
        try:
            return read_whole(dir_fd, where, limit=sigfile.MAX_BYTES + 1)
        except Rejected:
            return None
    return fetch


def open_dir(path: str) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _owner(uid: int) -> str:
    import pwd

    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def read_whole(dir_fd: int, name: str, limit: int | None = None) -> bytes | None:
    """The whole file, read once; None if absent. A symlink or non-file is rejected; where
    JAX's own read would have failed too (a directory, a file it may not open), the
    rejection carries that error (`io`)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                     dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            try:
                uid = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_uid
            except FileNotFoundError:
                return None  # the link went away meanwhile: nothing there now
            raise Rejected("not-a-file", f"{name} is a symbolic link", uid) from None
        raise Rejected("not-a-file", f"cannot open {name}: {exc.strerror}", -1,
                        io=exc) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # a directory, FIFO or device: judged, never read
            io = IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), name) \
                if stat.S_ISDIR(st.st_mode) else None  # what JAX's read_bytes() raises
            raise Rejected("not-a-file", f"{name} is not a regular file", st.st_uid, io=io)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb", buffering=0) as f:
        data = f.read(limit) if limit is not None else f.readall()
    return data
