"""The run record (docs/reference/run-record.md): its one model, written and read as JSON at the
edge.

The builder (records/builder.py) makes a RunRecord, rank_views.py and used_dirs.py
return new parts of it, and run_record.py writes it with `to_json()`; every reader takes one
`from_json()` parsed, leniently (documents/fields.py), from a record documents/read.py
checked (bounded and validated: the user's job wrote it, it may be hostile). Only the probe
writes plain JSON, inside the job (records/probe_output.py reads it).

The parts the record copies as other code wrote them are kept as that JSON beside their typed
forms: what each probe said of its process (identity, cache_view, versions, platform, the
cache options, the fingerprint: ProcessEntry.copied), each module (ModuleEntry.raw: the
probe's, with the builder's judgement), the sealed backend's summary (`seal`) and the audit's
word on where the entries came from (`cache_dir.origin`). Values are raw; reports escape them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from jaxcache.documents.fields import flag, integer, items, mapping, mappings, number, text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from jaxcache.fingerprint.model import Fingerprint

# What a process entry holds as its probe said it, in the record's order: the main process's
# at the top of the record, a subprocess's in its `subprocesses[]` entry.
MAIN_COPIED = ("versions", "fingerprint", "fingerprint_unknown", "identity", "cache_view",
               "platform", "cache_options_at_first_compile", "env_cache_dir_at_first_compile")
SUB_COPIED = ("identity", "cache_view", "versions", "fingerprint", "fingerprint_unknown",
              "platform")


# --- which part of a record (or of the probes' documents) is which process -----------------

def rank_of(proc: Mapping[str, object]) -> int | None:
    """JAX's process index of a record entry (or a probe's document), else its launcher's
    rank, else None."""
    ident = mapping(proc.get("identity"))
    index = ident.get("process_index")
    if isinstance(index, int):
        return int(index)
    index = mapping(proc.get("platform")).get("process_index")
    if isinstance(index, int):
        return index
    rank = mapping(ident.get("launcher")).get("rank")
    return rank if isinstance(rank, int) else None


def in_record_order(probes: Iterable[Mapping[str, object]], main_pid: int | None
                    ) -> list[Mapping[str, object]]:
    """The probes' documents in the order the record holds them: the job's own process
    first; without one (a launcher such as srun, which is not Python), the lowest rank first,
    so that `identity` at the top is rank 0's."""
    probes = list(probes)
    if probes and integer(probes[0].get("pid")) != main_pid:
        probes.sort(key=lambda p: (rank_of(p) is None, rank_of(p) or 0))
    return probes


# --- the parts other modules summarize: the sealed backend's, the audit's origins, the ------
# --- directories JAX used ----------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Rejection:
    """One entry the sealed backend would not load or could not publish (`seal.rejections`)."""

    key: str | None
    directory: str | None
    status: str | None  # unsigned, bad-signature, unknown-key, other-build, build-unknown...
    reason: str | None
    owner: str | None
    signer: str | None = None  # the id of the key whose signature was judged, if named

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> Rejection:
        return cls(text(doc.get("key")), text(doc.get("directory")), text(doc.get("status")),
                   text(doc.get("reason")), text(doc.get("owner")), text(doc.get("signer")))


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
    # a generation's reader: the generation it read (None: none, or refused: then why)
    generation: str | None = None
    generation_refused: str | None = None

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
                   if doc.get("prefetch") else None,
                   text(mapping(doc.get("generation")).get("name")),
                   text(mapping(doc.get("generation")).get("refused")))


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

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "status": self.status, "how": self.how,
                "reason": self.reason, "audited_dir": self.audited_dir,
                "pids": list(self.pids), "verdict": self.verdict,
                "verdict_detail": self.verdict_detail}


# --- each module, each process -----------------------------------------------------------

class ModuleOutcome(StrEnum):
    """What JAX's cache did for one compile (docs/reference/run-record.md, `modules[].outcome`)."""

    HIT = "hit"
    WRITTEN = "written"
    SKIPPED = "skipped"
    UNCACHED = "uncached"
    ERROR = "error"
    IN_PROGRESS = "in-progress"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def of(cls, word: object) -> ModuleOutcome | None:
        """The outcome a record names; None for a word this version does not know."""
        if not isinstance(word, str):
            return None
        try:
            return cls(word)
        except ValueError:
            return None


@dataclass(frozen=True, slots=True)
class ReasonDetail:
    """A module's `reason_detail`: the numbers its reason was given with."""

    threshold_s: float  # 0 where not given
    entry_bytes: object  # as recorded
    threshold_bytes: object
    process_index: object  # the process a compile waited for (waiting-for-process)
    cache_dir: object  # the refused directory (dir-refused)
    message: str  # a cache error's ("" where not given)

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> ReasonDetail:
        return cls(number(doc.get("threshold_s")) or 0, doc.get("entry_bytes"),
                   doc.get("threshold_bytes"), doc.get("process_index"), doc.get("cache_dir"),
                   str(doc.get("message", "")))


@dataclass(frozen=True, slots=True)
class ModuleEntry:
    name: str
    outcome: ModuleOutcome | None
    outcome_word: str | None  # as the record says it (a newer writer's word stays shown)
    reason: str | None
    reason_detail: Mapping[str, object]
    input_shapes: str | None
    compile_or_load_s: float | None
    entry_bytes: int | None
    cache_key: str | None
    cache_dir_at_compile: str | None
    dir_known: bool  # the record says which directory was set at this compile (None: none)
    cache_enabled_at_compile: bool | None
    error_messages: tuple[str, ...]
    compile_s_logged: float | None
    min_compile_time_at_compile: float | None
    key_components: Mapping[str, object] | None
    raw: Mapping[str, object]  # the module as the record holds it: the probe's, judged
    detail: ReasonDetail  # reason_detail, typed
    loaded_from: str | None = None  # a sealed run's hit: the tier it came from (shared | local)
    trace_s: float = 0.0  # 0 where not measured
    lower_s: float = 0.0
    logged_compile_s: float | None = None  # reason_detail.compile_s: the time JAX logged

    @property
    def seconds(self) -> float:
        """Compile (or, on a hit, load) seconds; 0 where not measured."""
        return self.compile_or_load_s or 0.0

    @property
    def compile_s(self) -> float | None:
        """The one compile time every report shows for this module: the seconds JAX timed and
        compared with its threshold (`compile_s_logged`), else, on a miss, the probe's
        `compile_or_load_s` (which also holds serializing and writing the entry); None on a
        hit, which compiled nothing (`seconds` is its load)."""
        if self.compile_s_logged is not None:
            return self.compile_s_logged
        return None if self.hit else self.compile_or_load_s

    @property
    def hit(self) -> bool:
        return self.outcome is ModuleOutcome.HIT

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> ModuleEntry:
        outcome = doc.get("outcome")
        detail = mapping(doc.get("reason_detail"))
        return cls(str(doc.get("name")), ModuleOutcome.of(outcome),
                   outcome if isinstance(outcome, str) else None, text(doc.get("reason")),
                   detail, text(doc.get("input_shapes")),
                   number(doc.get("compile_or_load_s")), integer(doc.get("entry_bytes")),
                   text(doc.get("cache_key")), text(doc.get("cache_dir_at_compile")),
                   "cache_dir_at_compile" in doc, flag(doc.get("cache_enabled_at_compile")),
                   tuple(str(e.get("message", "")) for e in mappings(doc.get("errors"))),
                   number(doc.get("compile_s_logged")),
                   number(doc.get("min_compile_time_at_compile")),
                   mapping(doc.get("key_components")) if doc.get("key_components") else None,
                   dict(doc), ReasonDetail.from_json(detail), text(doc.get("loaded_from")),
                   number(doc.get("trace_s")) or 0.0, number(doc.get("lower_s")) or 0.0,
                   number(detail.get("compile_s")))

    def to_json(self) -> dict[str, object]:
        return dict(self.raw)


@dataclass(frozen=True, slots=True)
class Launcher:
    kind: str | None  # slurm | ompi | pmi | jax
    rank: int | None
    job_id: str | None
    step_id: str | None


@dataclass(frozen=True, slots=True)
class Counts:
    """A process's counts (docs/reference/run-record.md, `counts`)."""

    modules: int
    compile_requests: int
    hits: int
    misses: int
    read_errors: int
    outcomes: tuple[tuple[str, int], ...]
    writes_event: int = 0  # JAX's `cache_misses` event: fires only right before a write
    task_disabled_cache: int = 0  # compiles JAX ran with the cache disabled for the task

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> Counts:
        def n(key: str) -> int:
            return integer(doc.get(key)) or 0

        outcomes = mapping(doc.get("outcomes"))
        return cls(n("modules"), n("compile_requests"), n("hits"), n("misses"),
                   n("read_errors"), tuple((str(k), integer(v) or 0)
                                           for k, v in outcomes.items()),
                   n("writes_event"), _some(doc.get("task_disabled_cache")))

    def to_json(self) -> dict[str, object]:
        return {"modules": self.modules, "compile_requests": self.compile_requests,
                "hits": self.hits, "misses": self.misses, "writes_event": self.writes_event,
                "task_disabled_cache": self.task_disabled_cache,
                "read_errors": self.read_errors, "outcomes": dict(self.outcomes)}

    def plus(self, other: Counts) -> Counts:
        added = dict(self.outcomes)
        for word, n in other.outcomes:
            added[word] = added.get(word, 0) + n
        return Counts(self.modules + other.modules,
                      self.compile_requests + other.compile_requests,
                      self.hits + other.hits, self.misses + other.misses,
                      self.read_errors + other.read_errors, tuple(added.items()),
                      self.writes_event + other.writes_event,
                      self.task_disabled_cache + other.task_disabled_cache)

    def outcome(self, word: ModuleOutcome) -> int:
        return dict(self.outcomes).get(word.value, 0)


def _some(value: object) -> int:
    """A count as recorded; a fraction above 0 (never written so) read as 1, not 0."""
    n = number(value) or 0.0
    return integer(value) or (1 if n > 0 else 0)


@dataclass(frozen=True, slots=True)
class CacheOptions:
    """`cache_options_at_first_compile`: JAX's cache options as its first compile saw them."""

    min_compile_time_s: float | None
    directory: str | None
    max_size: object  # as recorded (absent: MISSING)
    max_size_set: bool  # present and not JAX's default, -1
    min_entry_size_bytes: int | None = None

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> CacheOptions:
        size = doc.get("jax_compilation_cache_max_size", MISSING)
        return cls(number(doc.get("jax_persistent_cache_min_compile_time_secs")),
                   text(doc.get("jax_compilation_cache_dir")),
                   None if size is MISSING else size, size is not MISSING and size != -1,
                   integer(doc.get("jax_persistent_cache_min_entry_size_bytes")))


MISSING = object()


@dataclass(frozen=True, slots=True)
class CacheView:
    """How one process saw the cache directory (`cache_view`, written by its probe): the
    path, the filesystem and inode it resolved to there, jaxlib and XLA_FLAGS."""

    path: str | None
    source: str | None  # audited | jax
    device: str | None  # "major:minor"
    inode: int | None
    fs_type: str | None
    mode: str | None
    uid: int | None
    error: str | None  # why the path could not be seen
    jaxlib: str | None
    xla_flags: str | None

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> CacheView:
        return cls(text(doc.get("path")), text(doc.get("source")), text(doc.get("device")),
                   integer(doc.get("inode")), text(doc.get("fs_type")), text(doc.get("mode")),
                   integer(doc.get("uid")), text(doc.get("error")), text(doc.get("jaxlib")),
                   text(doc.get("xla_flags")))


@dataclass(frozen=True, slots=True)
class ProcessEntry:
    """The main probed process, or one of `subprocesses[]`."""

    pid: int | None  # the record's main process: the job's own pid
    entry_pid: int | None  # the pid this part itself records (the main part: none)
    pid_given: bool  # the part has a `pid` at all
    argv: tuple[str, ...] | None  # a subprocess's command line, where its probe read it
    copied: Mapping[str, object]  # MAIN_COPIED / SUB_COPIED: what this entry itself says
    modules: tuple[ModuleEntry, ...]
    counts: Counts
    # what every entry reads from the record as a whole (a subprocess's own entry may say
    # otherwise): JAX's options and variable at the (main process's) first compile, the
    # job's XLA_FLAGS (as recorded), the audited directory, the sealed backend's rejections
    options: CacheOptions
    env_cache_dir: str | None
    xla_flags: object
    cache_path: str | None
    sealed_rejections: tuple[Rejection, ...]
    inherited: Mapping[str, object] = field(default_factory=dict)  # a subprocess: what the
    # record says of its probe's parts where its own entry does not

    def said(self, key: str) -> object:
        """A part as the probe said it: this entry's own, else the record's."""
        return self.copied[key] if key in self.copied else self.inherited.get(key)

    @property
    def rank(self) -> int | None:
        """JAX's process index, else the launcher's rank."""
        return rank_of({k: self.said(k) for k in ("identity", "platform")})

    @property
    def identity(self) -> Mapping[str, object]:
        return mapping(self.said("identity"))

    @property
    def has_identity(self) -> bool:
        """Its probe said which process of the job it is (`identity`)."""
        return bool(self.identity)

    @property
    def host(self) -> str | None:
        return text(self.identity.get("host"))

    @property
    def process_count(self) -> int | None:
        """JAX's process count, as this process saw it."""
        return integer(self.identity.get("process_count"))

    @property
    def launcher(self) -> Launcher | None:
        found = mapping(self.identity.get("launcher"))
        return Launcher(text(found.get("kind")), integer(found.get("rank")),
                        text(found.get("job_id")), text(found.get("step_id"))) \
            if found else None

    @property
    def cache_view(self) -> CacheView | None:
        view = self.said("cache_view")
        return CacheView.from_json(view) if isinstance(view, dict) and view else None

    @property
    def versions(self) -> Mapping[str, object]:
        return mapping(self.said("versions"))

    @property
    def platform(self) -> Mapping[str, object]:
        return mapping(self.said("platform"))

    @property
    def plugins(self) -> tuple[tuple[str, str], ...]:
        """(plugin, version) of each JAX plugin its probe named, sorted."""
        found = mapping(self.versions.get("plugins"))
        return tuple(sorted((k, v) for k, v in found.items() if isinstance(v, str)))

    @property
    def option_values(self) -> tuple[tuple[str, object], ...]:
        """JAX's cache options at the first compile, as recorded (the main process's)."""
        return tuple(mapping(self.said("cache_options_at_first_compile")).items())

    @property
    def jax(self) -> object:
        return self.versions.get("jax")

    @property
    def jaxlib(self) -> object:
        return self.versions.get("jaxlib")

    @property
    def backend(self) -> object:
        return self.platform.get("backend")

    @property
    def device_kind(self) -> object:
        return self.platform.get("device_kind")

    @property
    def device_count(self) -> object:
        return self.platform.get("device_count")

    @property
    def disabled_first(self) -> bool:
        """JAX's task_disabled_cache: the first compile ran with it disabled."""
        return self.counts.task_disabled_cache > 0

    @classmethod
    def from_json(cls, doc: Mapping[str, object], pid: object = None,
                  record: Mapping[str, object] | None = None) -> ProcessEntry:
        """The process of `doc`: the record itself, or a subprocess's entry of `record` (what
        the entry does not say is the record's)."""
        whole = doc if record is None else {**record, **doc}
        keys = MAIN_COPIED if record is None else SUB_COPIED
        argv = doc.get("argv") if record is not None else None
        return cls(integer(whole.get("pid")) or integer(pid), integer(whole.get("pid")),
                   "pid" in whole,
                   tuple(str(a) for a in argv) if isinstance(argv, list) else None,
                   {k: doc[k] for k in keys if k in doc},
                   tuple(ModuleEntry.from_json(m) for m in mappings(whole.get("modules"))),
                   Counts.from_json(mapping(whole.get("counts"))),
                   CacheOptions.from_json(mapping(whole.get("cache_options_at_first_compile"))),
                   text(whole.get("env_cache_dir_at_first_compile")),
                   mapping(whole.get("env")).get("XLA_FLAGS"),
                   text(mapping(whole.get("cache_dir")).get("path")),
                   tuple(Rejection.from_json(r)
                         for r in mappings(mapping(whole.get("seal")).get("rejections"))),
                   {k: record[k] for k in keys if k in record} if record is not None else {})

    def to_json(self) -> dict[str, object]:
        """A subprocess's entry (the main process's parts are the record's own)."""
        return {"pid": self.entry_pid, "argv": list(self.argv) if self.argv is not None
                else None, **{k: self.copied.get(k) for k in SUB_COPIED},
                "counts": self.counts.to_json(), "modules": [m.to_json() for m in self.modules]}


@dataclass(frozen=True, slots=True)
class StartTimes:
    """When a process started, and its `import jax`: from its probe document, or (for the
    main process of a record read alone) from the record's `probe_times` and `import_jax_s`
    (with no pid or host: the record's own entries hold those)."""

    pid: int | None
    host: str | None
    started: float | None  # the probe's start (time.time())
    import_jax_started: float | None
    import_jax_s: float | None  # None: it never imported jax
    last_write: float | None = None  # when its probe last wrote
    final: bool = False  # its probe wrote at exit

    @classmethod
    def from_probe(cls, doc: Mapping[str, object]) -> StartTimes:
        """From a probe document (probe/document.py)."""
        return cls(integer(doc.get("pid")), text(mapping(doc.get("identity")).get("host")),
                   number(doc.get("started")), number(doc.get("import_jax_started")),
                   number(doc.get("import_jax_s")))

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> StartTimes:
        """The main process's, from the record."""
        times = mapping(doc.get("probe_times"))
        return cls(None, None, number(times.get("started")),
                   number(times.get("import_jax_started")), number(doc.get("import_jax_s")),
                   number(times.get("last_write")), bool(times.get("final")))

    def to_json(self) -> dict[str, object]:
        """`probe_times` (`import_jax_s` is the record's own field)."""
        return {"started": self.started, "import_jax_started": self.import_jax_started,
                "last_write": self.last_write, "final": self.final}


# --- the record's own parts --------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Snapshot:
    """The cache directory listed before or after the job; None counts: the listing failed."""

    entries: int | None
    bytes: int | None
    unknown: str | None  # why the listing failed
    files: int | None = None

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> Snapshot:
        return cls(integer(doc.get("entries")), integer(doc.get("bytes")),
                   text(doc.get("unknown")), integer(doc.get("files")))

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"entries": self.entries, "files": self.files,
                                  "bytes": self.bytes}
        if self.unknown is not None:
            out["unknown"] = self.unknown
        return out


@dataclass(frozen=True, slots=True)
class Namespace:
    kind: str
    id: str
    parent: str

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "id": self.id, "parent": self.parent}


@dataclass(frozen=True, slots=True)
class CacheDirPart:
    path: str
    verdict: str
    before: Snapshot
    after: Snapshot
    namespace: Namespace | None
    origin: Mapping[str, object] | None  # the audit's summary, as `jaxcache run` wrote it
    path_given: str | None  # the path, None where the record has none
    origins: OriginPart | None  # `origin`, typed; None: not judged
    new_files: tuple[tuple[str, int], ...] = ()  # (name, bytes) of the files the job added

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> CacheDirPart:
        named = mapping(doc.get("namespace"))
        origin = doc.get("origin")
        return cls(str(doc.get("path")), str(doc.get("verdict")),
                   Snapshot.from_json(mapping(doc.get("before"))),
                   Snapshot.from_json(mapping(doc.get("after"))),
                   Namespace(str(named.get("kind")), str(named.get("id")),
                             str(named.get("parent"))) if named else None,
                   dict(origin) if isinstance(origin, dict) else None, text(doc.get("path")),
                   OriginPart.from_json(origin) if isinstance(origin, dict) else None,
                   tuple((str(f.get("name")), integer(f.get("bytes")) or 0)
                         for f in mappings(doc.get("new_files"))))

    def to_json(self, by_run: bool) -> dict[str, object]:
        out: dict[str, object] = {
            "path": self.path_given, "verdict": self.verdict, "before": self.before.to_json(),
            "after": self.after.to_json(),
            "new_files": [{"name": n, "bytes": b} for n, b in self.new_files]}
        if by_run:
            out["origin"] = dict(self.origin) if self.origin is not None else None
            out["namespace"] = self.namespace.to_json() if self.namespace else None
        return out


@dataclass(frozen=True, slots=True)
class ProcessOutcome:
    """How the job's own process ended (`process`, from wait4)."""

    exit_code: int | None
    signal: int | None
    wall_s: float
    user_s: float
    sys_s: float
    peak_rss_bytes: int
    pid: int | None = None

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> ProcessOutcome:
        return cls(integer(doc.get("exit_code")), integer(doc.get("signal")),
                   number(doc.get("wall_s")) or 0.0, number(doc.get("user_s")) or 0.0,
                   number(doc.get("sys_s")) or 0.0, integer(doc.get("peak_rss_bytes")) or 0,
                   integer(doc.get("pid")))

    def to_json(self) -> dict[str, object]:
        return {"pid": self.pid, "exit_code": self.exit_code, "signal": self.signal,
                "wall_s": self.wall_s, "user_s": self.user_s, "sys_s": self.sys_s,
                "peak_rss_bytes": self.peak_rss_bytes}


@dataclass(frozen=True, slots=True)
class RankProblem:
    """A rank that saw another cache directory than the audited one, or went unseen."""

    rank: int | None
    pid: int | None
    what: str  # absent | host | path | view | filesystem | jaxlib | xla_flags
    text: str

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> RankProblem:
        return cls(integer(doc.get("rank")), integer(doc.get("pid")),
                   str(doc.get("what", "")), str(doc.get("text")))

    def to_json(self) -> dict[str, object]:
        return {"rank": self.rank, "pid": self.pid, "what": self.what, "text": self.text}


@dataclass(frozen=True, slots=True)
class Ranks:
    """What the probes say of the job's ranks (records/rank_views.py)."""

    expected: int | None
    seen: tuple[int, ...]
    per_rank: bool
    problems: tuple[RankProblem, ...]
    remedy: str | None
    absent: tuple[int, ...] = ()

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> Ranks:
        return cls(integer(doc.get("expected")),
                   tuple(r for r in items(doc.get("seen")) if isinstance(r, int)),
                   bool(doc.get("per_rank")),
                   tuple(RankProblem.from_json(p) for p in mappings(doc.get("problems"))),
                   text(doc.get("remedy")),
                   tuple(r for r in items(doc.get("absent")) if isinstance(r, int)))

    def to_json(self) -> dict[str, object]:
        return {"expected": self.expected, "seen": list(self.seen), "absent": list(self.absent),
                "per_rank": self.per_rank, "problems": [p.to_json() for p in self.problems],
                "remedy": self.remedy}


NO_RANKS = Ranks(None, (), False, (), None)


@dataclass(frozen=True, slots=True)
class Host:
    """Where jaxcache ran (`host`)."""

    system: str | None
    release: str | None
    machine: str | None
    node: str | None
    runner_python: str | None
    runner_python_version: str | None

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> Host:
        return cls(*(text(doc.get(k)) for k in ("system", "release", "machine", "node",
                                                  "runner_python", "runner_python_version")))

    def to_json(self) -> dict[str, object]:
        return {"system": self.system, "release": self.release, "machine": self.machine,
                "node": self.node, "runner_python": self.runner_python,
                "runner_python_version": self.runner_python_version}


@dataclass(frozen=True, slots=True)
class RunRecord:
    argv: tuple[str, ...]
    unverified: str | None
    process: ProcessOutcome
    cache_dir: CacheDirPart
    probe_loaded: bool
    probe_note: str | None
    ranks: Ranks
    processes: tuple[ProcessEntry, ...]  # the main probed process first
    guard_errors: tuple[tuple[int | None, str | None], ...]  # (pid, error)
    seal: Mapping[str, object] | None  # the sealed backend's summary, as it wrote it
    sealed: SealPart | None  # `seal`, typed
    probe_said: bool  # the record says whether the probe loaded (`probe.loaded` is there)
    jax_cache_dirs: tuple[UsedDir, ...]
    env: Mapping[str, str]  # the job's environment as recorded (JAX_*, XLA_FLAGS...)
    unverified_allowed: bool
    created: str | None = None  # UTC, ISO 8601, when the record was built (whole seconds)
    cwd: str | None = None  # the folder the job ran from (escaped, as the builder wrote it)
    host: Host = Host(None, None, None, None, None, None)
    start: StartTimes = StartTimes(None, None, None, None, None)  # the main process's
    jax_warnings: tuple[str, ...] = ()
    by_run: bool = False  # `jaxcache run` made it: it says unverified, origin and namespace

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> RunRecord:
        probe = mapping(doc.get("probe"))
        seal = doc.get("seal")
        main = ProcessEntry.from_json(doc, mapping(doc.get("process")).get("pid"))
        return cls(tuple(str(a) for a in items(doc.get("argv"))), text(doc.get("unverified")),
                   ProcessOutcome.from_json(mapping(doc.get("process"))),
                   CacheDirPart.from_json(mapping(doc.get("cache_dir"))),
                   bool(probe.get("loaded")), text(probe.get("note")),
                   Ranks.from_json(mapping(doc.get("ranks"))),
                   (main, *(ProcessEntry.from_json(sp, record=doc)
                            for sp in mappings(doc.get("subprocesses")))),
                   tuple((integer(g.get("pid")), str(g.get("error")))
                         for g in mappings(doc.get("cache_guard_errors"))),
                   dict(seal) if isinstance(seal, dict) else None,
                   SealPart.from_json(seal) if isinstance(seal, dict) and seal else None,
                   "loaded" in probe,
                   tuple(UsedDir.from_json(e) for e in mappings(doc.get("jax_cache_dirs"))),
                   {k: val for k, val in mapping(doc.get("env")).items()
                    if isinstance(val, str)},
                   bool(doc.get("unverified_allowed")), text(doc.get("created")),
                   text(doc.get("cwd")), Host.from_json(mapping(doc.get("host"))),
                   StartTimes.from_json(doc),
                   tuple(str(w) for w in items(doc.get("jax_warnings"))),
                   "unverified_allowed" in doc)

    def to_json(self) -> dict[str, object]:
        """The record's document (docs/reference/run-record.md), as run_record.write() writes it."""
        from jaxcache.documents.kinds import envelope

        main = self.processes[0]
        out: dict[str, object] = {
            **envelope("run"), "created": self.created, "argv": list(self.argv),
            "cwd": self.cwd, "host": self.host.to_json(),
            "probe": {"loaded": self.probe_loaded, "note": self.probe_note},
            **{k: main.copied.get(k) for k in MAIN_COPIED}, "env": dict(self.env),
            "import_jax_s": self.start.import_jax_s, "probe_times": self.start.to_json(),
            "modules": [m.to_json() for m in main.modules],
            "counts": main.counts.to_json() if self.probe_loaded else None,
            "jax_warnings": list(self.jax_warnings),
            "cache_dir": self.cache_dir.to_json(self.by_run),
            "process": self.process.to_json(),
            "subprocesses": [p.to_json() for p in self.processes[1:]],
            "seal": dict(self.seal) if self.seal is not None else None,
            "jax_cache_dirs": [e.to_json() for e in self.jax_cache_dirs],
            "cache_guard_errors": [{"pid": pid, "error": error}
                                   for pid, error in self.guard_errors],
            "ranks": self.ranks.to_json()}
        if self.by_run:
            out["unverified"] = self.unverified
            out["unverified_allowed"] = self.unverified_allowed
        return out

    @property
    def modules(self) -> tuple[ModuleEntry, ...]:
        """Every process's modules, the main process's first."""
        return tuple(m for p in self.processes for m in p.modules)

    @property
    def totals(self) -> Counts:
        """The counts of every probed process added up."""
        out = self.processes[0].counts
        for p in self.processes[1:]:
            out = out.plus(p.counts)
        return out


# --- each process as explain and decide compare it ---------------------------------------

@dataclass(frozen=True, slots=True)
class ProcessFacts:
    """What one process of a record ran on and with: what decides whether its cache entries
    can serve another process (the build and host outside JAX's key, the rest inside it).
    Only what the process's own entry says (a subprocess's entry does not borrow the
    record's fingerprint or versions)."""

    record: str  # the record's path
    label: str  # "rank 1", "pid 123" or "main"
    rank: int | None
    host: str
    fingerprint: Fingerprint | None
    unknown: str  # why the fingerprint is not known ("" when it is)
    jax: str | None
    jaxlib: str | None
    backend: str | None
    device_kind: str | None
    xla_flags: str | None
    shapes: tuple[tuple[str, str], ...]  # (module, input shapes), sorted

    @property
    def who(self) -> str:
        """'rank 1 of r.json' (escaped)."""
        from jaxcache.text import safe

        return f"{self.label} of {safe(self.record)}"

    @classmethod
    def of(cls, path: str, proc: ProcessEntry, main: bool) -> ProcessFacts:
        """One process `proc` of the record at `path` (`main`: the record's own process)."""
        from jaxcache import validate
        from jaxcache.fingerprint.model import Fingerprint
        from jaxcache.text import safe

        own = proc.copied
        rank = rank_of(own)
        label = (f"rank {rank}" if rank is not None else
                 "main" if main else f"pid {proc.entry_pid}")
        fp = own.get("fingerprint")
        try:
            parsed = Fingerprint.from_json(fp) if fp is not None else None
        except validate.Invalid:  # documents/read.py refuses such a record before
            parsed = None
        unknown = "" if parsed is not None else str(
            own.get("fingerprint_unknown")
            or "the record has no fingerprint (an older jaxcache)")
        versions = mapping(own.get("versions"))
        platform = mapping(own.get("platform"))
        view = mapping(own.get("cache_view"))
        flags = view.get("xla_flags") if "xla_flags" in view else proc.xla_flags
        shapes = sorted({(str(m.raw.get("name") or "?"), str(m.raw.get("input_shapes") or "?"))
                         for m in proc.modules})
        return cls(path, label, rank, str(mapping(own.get("identity")).get("host") or "?"),
                   parsed, safe(unknown), _str(versions.get("jax")),
                   _str(versions.get("jaxlib")), _str(platform.get("backend")),
                   _str(platform.get("device_kind")), _str(flags), tuple(shapes))


def _str(value: object) -> str | None:
    return None if value is None else str(value)


def facts_of(records: Iterable[tuple[str, RunRecord]]) -> list[ProcessFacts]:
    """Every probed process of these records (path, record), rank 0 first within a record."""
    out: list[ProcessFacts] = []
    for path, record in records:
        main, *subs = record.processes
        probed = bool(main.copied.get("identity")) or record.probe_loaded
        procs = [(p, p is main) for p in ([main] if probed else []) + subs]
        procs.sort(key=lambda pm: (rank_of(pm[0].copied) is None, rank_of(pm[0].copied) or 0))
        out += [ProcessFacts.of(path, p, is_main) for p, is_main in procs]
    return out
