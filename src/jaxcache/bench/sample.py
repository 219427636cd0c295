"""One measured process of a bench, reduced from its run record to what the bench compares."""

from __future__ import annotations

from dataclasses import dataclass

from jaxcache import thresholds
from jaxcache.bench import per_rank
from jaxcache.bench.comparable import Comparable
from jaxcache.fingerprint.model import Fingerprint
from jaxcache.records.run_document import ModuleOutcome

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.records.run_document import RunRecord, StartTimes

PHASES = ("startup", "import_jax", "trace", "lower", "compile_or_load", "rest")
PHASE_LABELS = {
    "startup": "start-up before import jax",
    "import_jax": "import jax",
    "trace": "trace",
    "lower": "lower",
    "compile_or_load": "compile or load",
    "rest": "execution and the rest",
}


@dataclass(frozen=True, slots=True)
class ProcessSample:
    trial: int
    kind: str  # cold | warm
    index: int  # warm run number within its trial (0 for cold)
    wall_s: float
    user_s: float
    sys_s: float
    peak_rss_bytes: int
    exit_code: int | None
    signal: int | None
    timed_out: bool
    phases: dict[str, float]
    modules: int
    hits: int
    written: int
    entries_before: int | None  # None: the directory or bucket could not be listed
    entries_after: int | None
    bytes_after: int | None
    write_overhead_s: float  # serializing and writing entries, inside compile_or_load
    skipped: tuple[tuple[str, str, float], ...]  # (module, reason, compile seconds)
    cached: tuple[str, ...]  # modules written (cold) or hit (warm)
    comparable: Comparable
    record_path: str
    ranks: tuple[per_rank.RankSample, ...] = ()  # the job's JAX processes, per rank
    first_step_s: float = 0.0  # from launch until the slowest rank's last compile ended
    missed: tuple[per_rank.RankMiss, ...] = ()  # warm: ranks that missed the cold run's entries
    # the covariate (bench/adjust.py): modules compiled without the cache, the same work in
    # every run, and their compile-or-load seconds
    uncached: tuple[str, ...] = ()  # 'name input_shapes', sorted
    uncached_s: float = 0.0
    left_out: thresholds.LeftOut | None = None  # what JAX's write thresholds kept out
    fingerprint: Fingerprint | None = None  # the build and host of the job's first process

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


def from_record(record: RunRecord, *, trial: int, kind: str, index: int, path: str,
                timed_out: bool = False, probes: tuple[StartTimes, ...] | None = None,
                launched_at: float | None = None) -> ProcessSample:
    """Counts over every probed process of the job (a launcher may leave the JAX work to a
    child); phases per rank, the job's the maximum over ranks running in parallel
    (bench/per_rank.py). `probes` (in the record's order) and `launched_at` add every rank's
    start-up times."""
    from jaxcache.records.run_document import facts_of

    p = record.process
    modules = record.modules
    ranks = per_rank.ranks_of(record, probes, launched_at)
    phases, first_step = per_rank.job_phases(ranks, p.wall_s)
    written = [m for m in modules if m.outcome is ModuleOutcome.WRITTEN]
    overhead = sum(max(0.0, (m.compile_or_load_s or 0) - (m.compile_s_logged or 0))
                   for m in written if m.compile_s_logged is not None)
    uncached = [m for m in modules
                if m.outcome in (ModuleOutcome.SKIPPED, ModuleOutcome.UNCACHED)]
    skipped = tuple((m.name or "?", m.reason or "?",
                     float(m.logged_compile_s or m.compile_or_load_s or 0.0))
                    for m in uncached)
    cache = record.cache_dir
    return ProcessSample(
        trial, kind, index, p.wall_s, p.user_s, p.sys_s, p.peak_rss_bytes,
        p.exit_code, p.signal, timed_out, phases, len(modules),
        sum(1 for m in modules if m.hit), len(written),
        cache.before.entries, cache.after.entries, cache.after.bytes,
        overhead, skipped,
        tuple(sorted({m.name or "?" for m in modules
                      if m.outcome in (ModuleOutcome.WRITTEN, ModuleOutcome.HIT)})),
        Comparable.of(record, path), path, ranks, first_step,
        uncached=tuple(sorted(f"{m.name or '?'} {m.input_shapes or ''}"
                              for m in uncached)),
        uncached_s=sum(float(m.compile_or_load_s or 0.0) for m in uncached),
        left_out=thresholds.left_out(record.modules, p.wall_s),
        fingerprint=next((f.fingerprint for f in facts_of([(path, record)])), None))
