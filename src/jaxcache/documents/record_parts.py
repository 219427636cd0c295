"""The parts of a run record (docs/run-record.md) that other modules summarize, typed:
a sealed run's `seal` (lifecycle/sealing.py's summary), the audit's word on where the
entries before the job came from (`cache_dir.origin`, trust/provenance/origin.py), and the
directories JAX initialized a cache for (`jax_cache_dirs`, from each probe's `cache_dirs`:
jaxcompat/guard.py). Parsed once, leniently (documents/fields.py); records/run_document.py
holds them in a RunRecord.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jaxcache.documents.fields import integer, items, mapping, mappings, number, text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


@dataclass(frozen=True, slots=True)
class Rejection:
    """One entry the sealed backend would not load or could not publish (`seal.rejections`)."""

    key: str | None
    directory: str | None
    status: str | None  # unsigned, bad-signature, unknown-key, other-build, build-unknown...
    reason: str | None
    owner: str | None

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> Rejection:
        return cls(text(doc.get("key")), text(doc.get("directory")), text(doc.get("status")),
                   text(doc.get("reason")), text(doc.get("owner")))


@dataclass(frozen=True, slots=True)
class TrustedKey:
    """A key the sealed backend judged with (`seal.trusted_keys`), with its state then."""

    id: str | None
    name: str | None
    state: str | None

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> TrustedKey:
        return cls(text(doc.get("id")), text(doc.get("name")), text(doc.get("state")))


@dataclass(frozen=True, slots=True)
class BucketMiss:
    """A sealed reader's lookup in a bucket that found nothing it could load."""

    kind: str | None  # not-found | permission-denied | network | error
    hint: str | None  # prefix-empty | key-mismatch
    reason: str | None

    @property
    def group(self) -> str:
        """What the miss is listed under: its hint, else its kind."""
        return self.hint or self.kind or "error"

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> BucketMiss:
        return cls(text(doc.get("kind")), text(doc.get("hint")), text(doc.get("reason")))


@dataclass(frozen=True, slots=True)
class PrefetchPart:
    """What a sealed bucket reader fetched ahead (`seal.prefetch`: seal/stores/prefetch.py's
    counts): keys planned from a record, entries prefetched, used by JAX, wasted (never asked
    for), not fetched, not found (no such entry in the cache: no failure), failed, rejected,
    the seconds the job did not wait, and why the fetch started only at enable (not as the
    job began to import JAX), if it did. A record written before `not_found` was counted
    apart has those keys among `failed`."""

    planned: int
    prefetched: int
    used: int
    wasted: int
    not_fetched: int
    not_found: int
    failed: int
    rejected: int
    saved_s: float
    source: str | None
    early_error: str | None = None

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> PrefetchPart:
        def n(value: object) -> int:
            return integer(value) or 0
        return cls(n(doc.get("planned")), n(doc.get("prefetched")), n(doc.get("used")),
                   n(doc.get("wasted")), n(doc.get("not_fetched")), n(doc.get("not_found")),
                   n(doc.get("failed")), n(doc.get("rejected")),
                   number(doc.get("saved_s")) or 0.0,
                   text(doc.get("source")), text(doc.get("early_error")))


@dataclass(frozen=True, slots=True)
class SealWrite:
    """An entry the sealed backend added (`seal.writes`): where, to which tier (shared: the
    sealed cache, signed; local: the private --local tier) and its size as written."""

    key: str | None
    directory: str | None
    bytes: int | None
    tier: str | None  # shared | local (seal/stores/sealed_cache.py's Tier)

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> SealWrite:
        return cls(text(doc.get("key")), text(doc.get("directory")), integer(doc.get("bytes")),
                   text(doc.get("tier")))


@dataclass(frozen=True, slots=True)
class SealPart:
    """A sealed run's reader and publisher (`seal`: lifecycle/sealing.py's summary)."""

    path: str | None  # the shared directory or bucket URL
    signing_key: str | None  # its id; None: a read-only consumer
    signing_key_name: str | None
    trusted_keys: tuple[TrustedKey, ...]
    signatures_needed: int
    rejections: tuple[Rejection, ...]
    writes: tuple[SealWrite, ...]
    write_errors: int
    evictions: int
    bucket_misses: tuple[BucketMiss, ...]
    unknown_builds_loaded: int  # `build.unknown_loaded`: loaded, no signature named a build
    # keyless: the identity the job signed as, as its certificate states it (None: a key)
    signing_identity: str | None = None
    # keyless: why every reader with the policy rejects what the job signed (its own identity
    # not trusted, or revoked); None: they accept it
    identity_rejected: str | None = None
    prefetch: PrefetchPart | None = None  # a bucket reader's fetch ahead, None: none

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> SealPart:
        return cls(text(doc.get("path")), text(doc.get("signing_key")),
                   text(doc.get("signing_key_name")),
                   tuple(TrustedKey.from_json(k) for k in mappings(doc.get("trusted_keys"))),
                   integer(doc.get("signatures_needed")) or 1,
                   tuple(Rejection.from_json(r) for r in mappings(doc.get("rejections"))),
                   tuple(SealWrite.from_json(w) for w in mappings(doc.get("writes"))),
                   len(items(doc.get("write_errors"))), len(items(doc.get("evictions"))),
                   tuple(BucketMiss.from_json(m) for m in mappings(doc.get("bucket_misses"))),
                   len(items(mapping(doc.get("build")).get("unknown_loaded"))),
                   _identity_text(mapping(doc.get("signing_identity"))),
                   text(mapping(doc.get("signing_identity")).get("rejected_by_readers")),
                   PrefetchPart.from_json(mapping(doc.get("prefetch")))
                   if doc.get("prefetch") else None)


def _identity_text(doc: Mapping[str, object]) -> str | None:
    """`signing_identity` as reports write it: the workflow, its issuer, the ref, the caller
    where another workflow called it, the event and the job run."""
    who = text(doc.get("identity"))
    if who is None:
        return None
    caller = text(doc.get("caller"))
    parts = [f"issuer {text(doc.get('issuer'))}"] + [
        f"{word} {value}" for word, value in (
            ("ref", text(doc.get("ref"))),
            ("called from", caller if caller != who else None),
            ("event", text(doc.get("event"))), ("run", text(doc.get("run")))) if value]
    return f"{who} ({', '.join(parts)})"


@dataclass(frozen=True, slots=True)
class OriginFinding:
    code: str | None
    effect: str | None  # info | warning | unsafe
    message: str
    remedy: str | None

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> OriginFinding:
        return cls(text(doc.get("code")), text(doc.get("effect")), str(doc.get("message")),
                   text(doc.get("remedy")))


@dataclass(frozen=True, slots=True)
class OriginPart:
    """Where the entries before the job came from (`cache_dir.origin`, the audit's origins:
    trust/provenance/origin.py)."""

    counts: Mapping[str, int]  # yours, vouched, unknown, changed: as the record has them
    ledger_problem: str | None
    other_build: tuple[str, ...]  # the names of the entries of yours another build wrote
    findings: tuple[OriginFinding, ...]
    # how many entries each trusted writer's ledger vouched for (the policy's trusted_ledgers),
    # by that writer's name (raw, as the record holds it: escaped where shown)
    vouched_by: Mapping[str, int] = field(default_factory=dict)
    # the entries another build wrote, counted by whose: "yours", or "teamb's" (vouched)
    other_whose: Mapping[str, int] = field(default_factory=dict)

    def count(self, origin: str) -> int:
        return self.counts.get(origin, 0)

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> OriginPart:
        from jaxcache.trust.provenance.origin import ORDER

        counts = {word: n for word in ORDER if (n := integer(doc.get(word))) is not None}
        by = {who: n for who, v in mapping(doc.get("vouched_by")).items()
              if (n := integer(v)) is not None}
        other = mappings(doc.get("other_build"))
        whose: dict[str, int] = {}
        for e in other:
            who = text(e.get("vouched_by"))
            key = f"{who}'s" if who else "yours"
            whose[key] = whose.get(key, 0) + 1
        return cls(counts, text(doc.get("ledger_problem")),
                   tuple(str(e.get("name")) for e in other),
                   tuple(OriginFinding.from_json(f) for f in mappings(doc.get("findings"))),
                   by, whose)


@dataclass(frozen=True, slots=True)
class UsedDir:
    """A directory JAX initialized a cache for (`jax_cache_dirs[]`), with what the guard did
    and, for one other than the audited directory, its own verdict (records/used_dirs.py)."""

    path: str | None
    status: str | None  # served | refused
    how: str | None
    reason: str | None
    audited_dir: bool
    pids: tuple[int | None, ...]
    verdict: str | None
    verdict_detail: str | None

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> UsedDir:
        return cls(text(doc.get("path")), text(doc.get("status")), text(doc.get("how")),
                   text(doc.get("reason")), bool(doc.get("audited_dir")),
                   tuple(integer(p) for p in items(doc.get("pids"))),
                   text(doc.get("verdict")), text(doc.get("verdict_detail")))

    @classmethod
    def of_record(cls, doc: Mapping[str, object]) -> tuple[UsedDir, ...]:
        """A record's `jax_cache_dirs`, read on its own (the builder's record, before the
        whole of it is read)."""
        return tuple(cls.from_json(e) for e in mappings(doc.get("jax_cache_dirs")))


@dataclass(frozen=True, slots=True)
class GuardedDir:
    """One of a probe's `cache_dirs`: a directory JAX initialized a cache for in that process,
    and what the guard (jaxcompat/guard.py) did with it."""

    path: str
    status: str | None
    how: str | None
    reason: str | None
    pid: int | None

    @classmethod
    def of_probe(cls, probe: Mapping[str, object]) -> tuple[GuardedDir, ...]:
        """Those of a probe's document that name their path."""
        return tuple(cls(path, text(e.get("status")), text(e.get("how")),
                         text(e.get("reason")), integer(e.get("pid")))
                     for e in mappings(probe.get("cache_dirs"))
                     if isinstance(path := e.get("path"), str))
