"""The run record (docs/run-record.md) as typed data, parsed once from its JSON: the record a
run just built, or one read back and checked by documents/read.py. Readers take these
objects, not the document; `raw` stays for modules outside records/ that still take the JSON
(process_facts.py), and the untyped fields (`seal`, `origin`,
`rejections`) beside their typed forms for the readers not moved yet.

Only readers use it: the builder (run_record.py) and the probe write the JSON itself. Also
here, as parsing: which part of a record (or of a probe's document) is which process
(rank_of, subprocess_parts). The parts that are other modules' summaries (`seal`,
`cache_dir.origin`, `jax_cache_dirs`) are documents/record_parts.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from jaxcache.documents.fields import flag, integer, items, mapping, mappings, number, text
from jaxcache.documents.record_parts import OriginPart, Rejection, SealPart, UsedDir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from jaxcache.documents.fields import JsonObject


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


def subprocess_parts(doc: Mapping[str, object]) -> list[Mapping[str, object]]:
    """The record's `subprocesses[]` entries as the document holds them (the objects
    themselves: a reader may tell them apart by identity)."""
    return mappings(doc.get("subprocesses"))


class ModuleOutcome(StrEnum):
    """What JAX's cache did for one compile (docs/run-record.md, `modules[].outcome`)."""

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
    raw: JsonObject
    detail: ReasonDetail  # reason_detail, typed

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

    @property
    def loaded_from(self) -> str | None:
        """A sealed run's hit: the tier it was loaded from (shared | local), where recorded."""
        return text(self.raw.get("loaded_from"))

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> ModuleEntry:
        outcome = doc.get("outcome")
        return cls(str(doc.get("name")), ModuleOutcome.of(outcome),
                   outcome if isinstance(outcome, str) else None, text(doc.get("reason")),
                   mapping(doc.get("reason_detail")), text(doc.get("input_shapes")),
                   number(doc.get("compile_or_load_s")), integer(doc.get("entry_bytes")),
                   text(doc.get("cache_key")), text(doc.get("cache_dir_at_compile")),
                   "cache_dir_at_compile" in doc, flag(doc.get("cache_enabled_at_compile")),
                   tuple(str(e.get("message", "")) for e in mappings(doc.get("errors"))),
                   number(doc.get("compile_s_logged")),
                   number(doc.get("min_compile_time_at_compile")),
                   mapping(doc.get("key_components")) if doc.get("key_components") else None,
                   dict(doc), ReasonDetail.from_json(mapping(doc.get("reason_detail"))))


@dataclass(frozen=True, slots=True)
class Launcher:
    kind: str | None  # slurm | ompi | pmi | jax
    rank: int | None
    job_id: str | None
    step_id: str | None


@dataclass(frozen=True, slots=True)
class Counts:
    """A process's counts (docs/run-record.md, `counts`)."""

    modules: int
    compile_requests: int
    hits: int
    misses: int
    read_errors: int
    outcomes: tuple[tuple[str, int], ...]

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> Counts:
        def n(key: str) -> int:
            return integer(doc.get(key)) or 0

        outcomes = mapping(doc.get("outcomes"))
        return cls(n("modules"), n("compile_requests"), n("hits"), n("misses"),
                   n("read_errors"), tuple((str(k), integer(v) or 0)
                                           for k, v in outcomes.items()))

    def plus(self, other: Counts) -> Counts:
        added = dict(self.outcomes)
        for word, n in other.outcomes:
            added[word] = added.get(word, 0) + n
        return Counts(self.modules + other.modules,
                      self.compile_requests + other.compile_requests,
                      self.hits + other.hits, self.misses + other.misses,
                      self.read_errors + other.read_errors, tuple(added.items()))

    def outcome(self, word: ModuleOutcome) -> int:
        return dict(self.outcomes).get(word.value, 0)


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

    pid: int | None
    rank: int | None  # JAX's process index, else the launcher's rank
    host: str | None
    launcher: Launcher | None
    modules: tuple[ModuleEntry, ...]
    counts: Counts
    options: CacheOptions  # as JAX saw them at this process's first compile
    env_cache_dir: str | None  # JAX_COMPILATION_CACHE_DIR at the first compile
    disabled_first: bool  # JAX's task_disabled_cache: the first compile ran with it disabled
    xla_flags: object  # env's XLA_FLAGS, as recorded
    jaxlib: object  # versions' jaxlib
    device_kind: object
    device_count: object
    rejections: tuple[Mapping[str, object], ...]  # the sealed backend's (seal.rejections)
    raw: JsonObject  # this process's part (a subprocess's over the record's)
    entry_pid: int | None  # the pid this part itself records (the main part: none)
    pid_given: bool  # the part has a `pid` at all
    has_identity: bool  # its probe said which process of the job it is (`identity`)
    process_count: int | None  # JAX's process count, as this process saw it
    cache_view: CacheView | None
    backend: object  # platform's backend, as recorded
    jax: object  # versions' jax
    cache_path: str | None  # the record's cache directory (cache_dir.path)
    sealed_rejections: tuple[Rejection, ...]  # `rejections`, typed

    @classmethod
    def from_json(cls, doc: Mapping[str, object], pid: object = None) -> ProcessEntry:
        ident = mapping(doc.get("identity"))
        launcher = mapping(ident.get("launcher"))
        rank = rank_of(doc)
        view = doc.get("cache_view")
        rejections = tuple(mappings(mapping(doc.get("seal")).get("rejections")))
        return cls(integer(doc.get("pid")) or integer(pid), rank, text(ident.get("host")),
                   Launcher(text(launcher.get("kind")), integer(launcher.get("rank")),
                            text(launcher.get("job_id")), text(launcher.get("step_id")))
                   if launcher else None,
                   tuple(ModuleEntry.from_json(m) for m in mappings(doc.get("modules"))),
                   Counts.from_json(mapping(doc.get("counts"))),
                   CacheOptions.from_json(mapping(doc.get("cache_options_at_first_compile"))),
                   text(doc.get("env_cache_dir_at_first_compile")),
                   (number(mapping(doc.get("counts")).get("task_disabled_cache")) or 0) > 0,
                   mapping(doc.get("env")).get("XLA_FLAGS"),
                   mapping(doc.get("versions")).get("jaxlib"),
                   mapping(doc.get("platform")).get("device_kind"),
                   mapping(doc.get("platform")).get("device_count"),
                   rejections, dict(doc), integer(doc.get("pid")), "pid" in doc, bool(ident),
                   integer(ident.get("process_count")),
                   CacheView.from_json(view) if isinstance(view, dict) and view else None,
                   mapping(doc.get("platform")).get("backend"),
                   mapping(doc.get("versions")).get("jax"),
                   text(mapping(doc.get("cache_dir")).get("path")),
                   tuple(Rejection.from_json(r) for r in rejections))


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The cache directory listed before or after the job; None counts: the listing failed."""

    entries: int | None
    bytes: int | None
    unknown: str | None  # why the listing failed

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> Snapshot:
        return cls(integer(doc.get("entries")), integer(doc.get("bytes")),
                   text(doc.get("unknown")))


@dataclass(frozen=True, slots=True)
class Namespace:
    kind: str
    id: str
    parent: str


@dataclass(frozen=True, slots=True)
class CacheDirPart:
    path: str
    verdict: str
    before: Snapshot
    after: Snapshot
    namespace: Namespace | None
    origin: JsonObject | None
    path_given: str | None  # the path, None where the record has none
    origins: OriginPart | None  # `origin`, typed; None: not judged

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
                   OriginPart.from_json(origin) if isinstance(origin, dict) else None)


@dataclass(frozen=True, slots=True)
class ProcessOutcome:
    """How the job's own process ended (`process`, from wait4)."""

    exit_code: int | None
    signal: int | None
    wall_s: float
    user_s: float
    sys_s: float
    peak_rss_bytes: int

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> ProcessOutcome:
        return cls(integer(doc.get("exit_code")), integer(doc.get("signal")),
                   number(doc.get("wall_s")) or 0.0, number(doc.get("user_s")) or 0.0,
                   number(doc.get("sys_s")) or 0.0, integer(doc.get("peak_rss_bytes")) or 0)


@dataclass(frozen=True, slots=True)
class Ranks:
    expected: int | None
    seen: tuple[int, ...]
    per_rank: bool
    problems: tuple[str, ...]  # each problem's text
    remedy: str | None

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> Ranks:
        return cls(integer(doc.get("expected")),
                   tuple(r for r in items(doc.get("seen")) if isinstance(r, int)),
                   bool(doc.get("per_rank")),
                   tuple(str(p.get("text")) for p in mappings(doc.get("problems"))),
                   text(doc.get("remedy")))


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
    guard_errors: tuple[tuple[int | None, str], ...]  # (pid, error)
    seal: JsonObject | None
    raw: JsonObject  # the document, for the parts still read as one
    sealed: SealPart | None  # `seal`, typed
    probe_said: bool  # the record says whether the probe loaded (`probe.loaded` is there)
    jax_cache_dirs: tuple[UsedDir, ...]
    env: Mapping[str, str]  # the job's environment as recorded (JAX_*, XLA_FLAGS...)
    unverified_allowed: bool
    created: str | None = None  # UTC, ISO 8601, when the record was built (whole seconds)
    cwd: str | None = None  # the folder the job ran from (escaped, as the builder wrote it)

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
                   (main, *(ProcessEntry.from_json({**doc, **sp})
                            for sp in subprocess_parts(doc))),
                   tuple((integer(g.get("pid")), str(g.get("error")))
                         for g in mappings(doc.get("cache_guard_errors"))),
                   dict(seal) if isinstance(seal, dict) else None, dict(doc),
                   SealPart.from_json(seal) if isinstance(seal, dict) and seal else None,
                   "loaded" in probe, UsedDir.of_record(doc),
                   {k: val for k, val in mapping(doc.get("env")).items()
                    if isinstance(val, str)},
                   bool(doc.get("unverified_allowed")), text(doc.get("created")),
                   text(doc.get("cwd")))

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
