"""The probe's document (probe/document.py writes it inside the job, `jaxcache.probe/1`) as
typed data, parsed once, leniently (documents/fields.py): a field of another type than the
probe writes is read as absent, never trusted and never a crash. The job could write anything
into its probe folder; the builder (builder.py, records/fingerprints.py) reads these objects,
not the document.

The parts the record copies as the probe wrote them (identity, cache_view, versions, platform,
the cache options, each module, the seal's summary) are kept as mappings: the record holds
them verbatim, byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jaxcache.documents.fields import flag, integer, items, mapping, mappings, number, text
from jaxcache.fingerprint.model import Accelerator

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


@dataclass(frozen=True, slots=True)
class ProbeCounts:
    """JAX's cache events as the probe counted them (`counts`)."""

    compile_requests: int
    hits: int
    writes: int  # JAX's misnamed `cache_misses` event: fires only right before a write
    task_disabled_cache: int

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> ProbeCounts:
        return cls(integer(doc.get("compile_requests")) or 0, integer(doc.get("hits")) or 0,
                   integer(doc.get("writes")) or 0,
                   integer(doc.get("task_disabled_cache")) or 0)


@dataclass(frozen=True, slots=True)
class ProbeModule:
    """One compile the probe saw (`modules[]`), and what the builder judges it by."""

    raw: Mapping[str, object]  # as the probe wrote it: the record's module starts as a copy
    cache_key: str | None
    outcome: str | None  # JAX's word as the probe read it: hit, written, miss, ...
    in_progress: bool  # the process ended (killed, hung) inside this compile
    waiting: bool  # ... waiting for another process's executable (`waiting_for`)
    waiting_process_index: object  # that process's index, as the probe wrote it
    cache_dir: str | None  # the directory of the cache object JAX held
    dir_refused: bool  # the guard's cache (`cache_dir_status` refused): no read, no write
    read_error: bool  # one of its errors is a read error

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> ProbeModule:
        waiting = mapping(doc.get("waiting_for"))
        return cls(doc, text(doc.get("cache_key")), text(doc.get("outcome")),
                   bool(flag(doc.get("in_progress"))), bool(waiting),
                   waiting.get("process_index"), text(doc.get("cache_dir")),
                   text(doc.get("cache_dir_status")) == "refused",
                   any(text(e.get("kind")) == "read-error" for e in mappings(doc.get("errors"))))


@dataclass(frozen=True, slots=True)
class ProbeSeal:
    """The sealed backend's summary (lifecycle/sealing.py `summary`), for a sealed job."""

    raw: Mapping[str, object]  # as written: the record holds it whole
    # (cache key, directory, bytes written) of each entry it wrote
    writes: tuple[tuple[str, str | None, int | None], ...]
    rejected: frozenset[str]  # the cache keys it rejected
    publisher: bool  # it signs (a publisher), not only reads
    # cache key -> (the tier an entry JAX loaded came from: shared | local, its bytes)
    loads: Mapping[str, tuple[str | None, int | None]] = field(default_factory=dict)

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> ProbeSeal:
        writes = tuple((key, text(w.get("directory")), integer(w.get("bytes")))
                       for w in mappings(doc.get("writes"))
                       if (key := text(w.get("key"))) is not None)
        rejected = frozenset(key for r in mappings(doc.get("rejections"))
                             if (key := text(r.get("key"))) is not None)
        loads = {key: (text(x.get("tier")), integer(x.get("bytes")))
                 for x in mappings(doc.get("loads")) if (key := text(x.get("key"))) is not None}
        return cls(doc, writes, rejected, bool(doc.get("signing_key")), loads)


@dataclass(frozen=True, slots=True)
class ProbeFingerprint:
    """What the probe says of the build the process ran (probe/document.py `fingerprint`):
    the fingerprint `jaxcache run` handed the job, else the package folders it loaded."""

    given: object  # as the probe read it back: Fingerprint.from_json checks it (None: none)
    roots: tuple[tuple[str, str], ...]  # (package, real folder)
    accelerator: Accelerator | None

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> ProbeFingerprint:
        roots = tuple((r[0], r[1]) for r in items(doc.get("roots"))
                      if isinstance(r, list) and len(r) == 2
                      and isinstance(r[0], str) and isinstance(r[1], str))
        found = doc.get("accelerator")
        accel = None
        if isinstance(found, dict):
            accel = Accelerator(*(str(found.get(k) or "")[:256 if k != "platform_version"
                                                            else 8192]
                                  for k in ("platform", "platform_version", "device_kind",
                                            "compute_capability")))
        return cls(doc.get("given"), roots, accel)


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


@dataclass(frozen=True, slots=True)
class ProbeOutput:
    """One probed process's document: the main process's, or a subprocess's."""

    pid: int | None
    argv: tuple[str, ...] | None
    final: bool  # written at exit (else at a compile: the process was killed, or hangs)
    started: float | None
    import_jax_started: float | None
    now: float | None  # when the probe last wrote it
    import_jax_s: float | None
    identity: Mapping[str, object] | None  # which process of the job: copied to the record
    host: str | None  # identity's host
    cache_view: Mapping[str, object] | None  # how it saw the cache directory: copied
    versions: Mapping[str, object]  # `jax`: jax, jaxlib, plugins (copied as `versions`)
    jax: str | None  # its jax version
    platform: Mapping[str, object]  # read at exit, if something compiled; {} otherwise
    cache_options: Mapping[str, object] | None  # `cache_options_at_first_compile`
    env_cache_dir: str | None  # JAX_COMPILATION_CACHE_DIR at the first compile
    counts: ProbeCounts
    modules: tuple[ProbeModule, ...]
    warnings: tuple[str, ...]  # JAX's cache warnings, verbatim
    seal: ProbeSeal | None  # a sealed job's backend
    guard_failed: bool  # the cache guard could not be installed (`cache_guard.installed`)
    guard_error: str | None  # ... and why
    fingerprint: ProbeFingerprint | None  # None: not the final document
    cache_dirs: tuple[GuardedDir, ...] = ()  # the directories JAX initialized a cache for

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> ProbeOutput:
        identity, view = doc.get("identity"), doc.get("cache_view")
        options, seal = doc.get("cache_options_at_first_compile"), doc.get("seal")
        argv, guard = doc.get("argv"), mapping(doc.get("cache_guard"))
        found = doc.get("fingerprint")
        return cls(
            integer(doc.get("pid")),
            tuple(str(a) for a in argv) if isinstance(argv, list) else None,
            bool(flag(doc.get("final"))), number(doc.get("started")),
            number(doc.get("import_jax_started")), number(doc.get("now")),
            number(doc.get("import_jax_s")),
            identity if isinstance(identity, dict) else None,
            text(mapping(identity).get("host")),
            view if isinstance(view, dict) else None,
            mapping(doc.get("jax")), text(mapping(doc.get("jax")).get("jax")),
            mapping(doc.get("platform")),
            options if isinstance(options, dict) else None,
            text(doc.get("env_cache_dir_at_first_compile")),
            ProbeCounts.from_json(mapping(doc.get("counts"))),
            tuple(ProbeModule.from_json(m) for m in mappings(doc.get("modules"))),
            tuple(str(w) for w in items(doc.get("warnings"))),
            ProbeSeal.from_json(seal) if isinstance(seal, dict) else None,
            flag(guard.get("installed")) is False, text(guard.get("error")),
            ProbeFingerprint.from_json(found) if isinstance(found, dict) else None,
            GuardedDir.of_probe(doc))
