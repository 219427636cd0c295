"""One process of a job per rank: ranks run in parallel, so the job waits for the slowest.

A multi-rank job (jax.distributed, srun, mpirun) is one measured command but several JAX
processes. Their compile times are not added up (13 s of "compile" in a 10 s run): each phase
of the job is the maximum over its ranks, and processes of one rank (a parent and the child
it hands the JAX work to) are added, as they run one after the other. Hits are judged per
rank: on CPU rank 1's keys differ from rank 0's and only process 0 writes, so rank 1 misses
on every start, whatever rank 0 does.
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxcache.records.run_document import rank_of as rank_of  # re-exported: the one rule

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.records.run_document import ProcessEntry, RunRecord, StartTimes

RANK_PHASES = ("startup", "import_jax", "trace", "lower", "compile_or_load")
NOT_PROCESS_0 = "not-process-0"  # the cold rank skipped only because it is not process 0

ModuleId = tuple[str, str]  # (module name, input shapes): the same program on every rank


@dataclass(frozen=True, slots=True)
class Module:
    id: ModuleId
    key: str | None
    outcome: str | None
    reason: str | None


@dataclass(frozen=True, slots=True)
class RankSample:
    """One rank of one measured run: its processes' phases added, its modules' outcomes."""

    rank: int | None
    pids: tuple[int, ...]
    host: str | None
    started_s: float | None  # its first process's probe start, after the job was launched
    phases: dict[str, float]  # RANK_PHASES
    first_step_s: float  # from launch until its last compile ended
    modules: tuple[Module, ...]

    @property
    def hits(self) -> int:
        return sum(1 for m in self.modules if m.outcome == "hit")

    @property
    def written(self) -> int:
        return sum(1 for m in self.modules if m.outcome == "written")


@dataclass(frozen=True, slots=True)
class RankMiss:
    """A warm rank that compiled again what its trial's cold run wrote (or, for a rank that
    is not process 0, what it would have written had it been)."""

    rank: int | None
    modules: tuple[str, ...]
    keys_differ: bool  # its keys are not the ones written: a lookup of another entry
    not_process_0: bool  # in the cold run this rank skipped writing only for not being 0


def _times(times: StartTimes | None) -> tuple[float | None, float, float]:
    """(probe start, start-up before import jax, import jax) of one process."""
    if times is None:
        return None, 0.0, 0.0
    started, imp_started = times.started, times.import_jax_started
    startup = max(0.0, imp_started - started) if imp_started and started else 0.0
    return started, startup, times.import_jax_s or 0.0


def ranks_of(run: RunRecord, probes: tuple[StartTimes, ...] | None = None,
             launched_at: float | None = None) -> tuple[RankSample, ...]:
    """The record's JAX processes grouped by rank (launchers that never imported jax left
    out), in rank order. `probes` (the probe documents' times, main first, in the order the
    record holds them: run_document.in_record_order) add each process's start-up times;
    `launched_at` (time.time() when the job was started) places each rank's start."""
    aligned: list[StartTimes | None] = list(probes or ())
    aligned += [None] * (len(run.processes) - len(aligned))
    groups: dict[int | None, list[tuple[int, ProcessEntry, StartTimes | None]]] = {}
    for i, proc in enumerate(run.processes):
        probe = aligned[i]
        imported = probe.import_jax_s if probe is not None else (
            run.start.import_jax_s if i == 0 else None)
        if not proc.modules and imported is None:
            continue  # a launcher that never imported jax, not a rank
        groups.setdefault(proc.rank, []).append((i, proc, probe))
    out = []
    for rank, members in groups.items():
        phases = dict.fromkeys(RANK_PHASES, 0.0)
        starts, pids, modules = [], [], []
        host = None
        for i, proc, probe in members:
            # a record alone: only the main process has its times
            started, startup, imp = _times(probe if probe is not None else
                                           run.start if i == 0 else None)
            if started is not None:
                starts.append(started)
            phases["startup"] += startup
            phases["import_jax"] += imp
            for m in proc.modules:
                phases["trace"] += m.trace_s
                phases["lower"] += m.lower_s
                phases["compile_or_load"] += m.seconds
                modules.append(Module((m.name or "?", m.input_shapes or "?"),
                                      m.cache_key, m.outcome_word, m.reason))
            # the main process's own entry in the record has no pid of its own
            pid = (probe.pid if probe is not None else None) or (
                proc.pid if i > 0 else None)
            if pid is not None:
                pids.append(pid)
            host = host or (probe.host if probe is not None else None) or proc.host
        offset = (max(0.0, min(starts) - launched_at)
                  if starts and launched_at is not None else None)
        out.append(RankSample(rank, tuple(pids), host, offset, phases,
                              (offset or 0.0) + sum(phases.values()), tuple(modules)))
    return tuple(sorted(out, key=lambda r: (r.rank is None, r.rank or 0)))


def job_phases(ranks: tuple[RankSample, ...], wall_s: float) -> tuple[dict[str, float], float]:
    """The job's phases (each the maximum over its ranks, which run in parallel; `rest` the
    wall time left) and its time to first step (the slowest rank's, at most the wall time)."""
    phases = {p: max((r.phases[p] for r in ranks), default=0.0) for p in RANK_PHASES}
    phases = {p: min(v, wall_s) for p, v in phases.items()}
    phases["rest"] = max(0.0, wall_s - sum(phases.values()))
    first = min(wall_s, max((r.first_step_s for r in ranks), default=0.0))
    return phases, first


def misses(cold: tuple[RankSample, ...], warm: tuple[RankSample, ...]) -> tuple[RankMiss, ...]:
    """The warm ranks that compiled again a module the cold run wrote.

    A module counts when the cold run wrote an entry for the same name and input shapes and
    the warm rank did not load one; a key the cold run itself skipped for its own reasons
    (too quick to compile, too small) is no miss, but one it skipped only because the rank
    was not process 0 is: that rank will never find an entry.
    """
    written = {m.id for r in cold for m in r.modules if m.outcome == "written"}
    written_keys = {m.key for r in cold for m in r.modules if m.outcome == "written"}
    own_skips = {m.key for r in cold for m in r.modules
                 if m.outcome != "written" and m.reason != NOT_PROCESS_0 and m.key}
    cold_by_rank = {r.rank: r for r in cold}
    out = []
    for r in warm:
        missed = [m for m in r.modules if m.outcome != "hit" and m.id in written
                  and (m.key in written_keys or m.key not in own_skips)]
        if not missed:
            continue
        mine = cold_by_rank.get(r.rank)
        not0 = mine is not None and any(m.reason == NOT_PROCESS_0 for m in mine.modules)
        out.append(RankMiss(r.rank, tuple(sorted({m.id[0] for m in missed})),
                            any(m.key not in written_keys for m in missed), not0))
    return tuple(out)


def label(rank: int | None) -> str:
    return "rank ?" if rank is None else f"rank {rank}"


def names(ranks: list[int | None]) -> str:
    """'rank 1', 'ranks 1 and 3', 'ranks 1, 2 and 3'."""
    shown = ["?" if r is None else str(r) for r in ranks]
    if len(shown) == 1:
        return f"rank {shown[0]}"
    return f"ranks {', '.join(shown[:-1])} and {shown[-1]}"
