"""What bench reads of a run record beyond records/run_document.py's RunRecord, parsed once:
each module's trace and lower seconds and the compile time JAX logged, the main process's
start-up times, what makes two processes' timings comparable (versions, host, devices,
flags, cache options), and each probe document's start-up times (the probe writes them; the
record keeps only the main process's).

A model, like run_document.py: readers (per_rank.py, sample.py, comparable.py) take these
objects, never the documents.
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxcache.documents.fields import integer, mapping, number, text
from jaxcache.records.run_document import ModuleEntry, ProcessEntry, RunRecord

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


@dataclass(frozen=True, slots=True)
class TimedModule:
    """One module of a process, with the phases the run record keeps beside its outcome."""

    entry: ModuleEntry
    trace_s: float  # 0 where not measured
    lower_s: float
    logged_compile_s: float | None  # reason_detail.compile_s: the compile time JAX logged

    @classmethod
    def of(cls, entry: ModuleEntry) -> TimedModule:
        return cls(entry, number(entry.raw.get("trace_s")) or 0.0,
                   number(entry.raw.get("lower_s")) or 0.0,
                   number(entry.reason_detail.get("compile_s")))


@dataclass(frozen=True, slots=True)
class TimedProcess:
    entry: ProcessEntry
    modules: tuple[TimedModule, ...]  # entry.modules, in order


@dataclass(frozen=True, slots=True)
class StartTimes:
    """When a process started, and its `import jax`: from its probe document, or (for the
    main process of a record read alone) from the record's `probe_times` and `import_jax_s`."""

    pid: int | None
    host: str | None
    started: float | None  # the probe's start (time.time())
    import_jax_started: float | None
    import_jax_s: float | None  # None: it never imported jax

    @classmethod
    def from_probe(cls, doc: Mapping[str, object]) -> StartTimes:
        """From a probe document (probe/document.py)."""
        return cls(integer(doc.get("pid")), text(mapping(doc.get("identity")).get("host")),
                   number(doc.get("started")), number(doc.get("import_jax_started")),
                   number(doc.get("import_jax_s")))

    @classmethod
    def from_record(cls, doc: Mapping[str, object]) -> StartTimes:
        """The main process's, as a run record keeps them (no pid or host: the record's
        own entries hold those)."""
        times = mapping(doc.get("probe_times"))
        return cls(None, None, number(times.get("started")),
                   number(times.get("import_jax_started")), number(doc.get("import_jax_s")))


@dataclass(frozen=True, slots=True)
class Setup:
    """What the record's main process ran with, as bench/comparable.py compares it."""

    jax: str | None
    jaxlib: str | None
    plugins: tuple[tuple[str, str], ...]  # (plugin, version), sorted
    python: str | None  # the runner's Python version
    system: str | None
    machine: str | None
    backend: str | None
    device_kind: str | None
    device_count: int | None
    xla_flags: str | None
    cache_options: tuple[tuple[str, object], ...]  # JAX's options at the first compile

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> Setup:
        versions = mapping(doc.get("versions"))
        host = mapping(doc.get("host"))
        platform = mapping(doc.get("platform"))
        plugins = mapping(versions.get("plugins"))
        return cls(text(versions.get("jax")), text(versions.get("jaxlib")),
                   tuple(sorted((k, v) for k, v in plugins.items() if isinstance(v, str))),
                   text(host.get("runner_python_version")), text(host.get("system")),
                   text(host.get("machine")), text(platform.get("backend")),
                   text(platform.get("device_kind")), integer(platform.get("device_count")),
                   text(mapping(doc.get("env")).get("XLA_FLAGS")),
                   tuple(mapping(doc.get("cache_options_at_first_compile")).items()))


@dataclass(frozen=True, slots=True)
class BenchRun:
    """One run record as bench reads it: the typed record and the parts it adds."""

    record: RunRecord
    processes: tuple[TimedProcess, ...]  # record.processes, with their modules' phases
    start: StartTimes  # the main process's, from the record
    setup: Setup

    @classmethod
    def of(cls, record: RunRecord) -> BenchRun:
        return cls(record, tuple(TimedProcess(p, tuple(TimedModule.of(m) for m in p.modules))
                                 for p in record.processes),
                   StartTimes.from_record(record.raw), Setup.from_json(record.raw))

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> BenchRun:
        return cls.of(RunRecord.from_json(doc))

    @property
    def modules(self) -> tuple[TimedModule, ...]:
        """Every process's modules, the main process's first (record.modules)."""
        return tuple(m for p in self.processes for m in p.modules)
