"""One process of a job per rank: ranks run in parallel, so the job waits for the slowest.

A multi-rank job (jax.distributed, srun, mpirun) is one measured command but several JAX
processes. Their compile times are not added up (13 s of "compile" in a 10 s run): each phase
of the job is the maximum over its ranks, and processes of one rank (a parent and the child
it hands the JAX work to) are added, as they run one after the other. Hits are judged per
rank: on CPU rank 1's keys differ from rank 0's and only process 0 writes, so rank 1 misses
on every start, whatever rank 0 does.
"""

from __future__ import annotations

from jaxcache.records.reading import in_record_order, rank_of
from jaxcache.values import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

RANK_PHASES = ("startup", "import_jax", "trace", "lower", "compile_or_load")
NOT_PROCESS_0 = "not-process-0"  # the cold rank skipped only because it is not process 0

ModuleId = tuple[str, str]  # (module name, input shapes): the same program on every rank


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _host(process_doc: dict[str, Any]) -> str | None:
    host = (process_doc.get("identity") or {}).get("host")
    return host if isinstance(host, str) else None


@frozen
class Module:
    id: ModuleId
    key: str | None
    outcome: str | None
    reason: str | None


@frozen
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


@frozen
class RankMiss:
    """A warm rank that compiled again what its trial's cold run wrote (or, for a rank that
    is not process 0, what it would have written had it been)."""

    rank: int | None
    modules: tuple[str, ...]
    keys_differ: bool  # its keys are not the ones written: a lookup of another entry
    not_process_0: bool  # in the cold run this rank skipped writing only for not being 0


def _num(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else 0.0


def _times(probe: dict[str, Any] | None, fallback: dict[str, Any] | None
           ) -> tuple[float | None, float, float]:
    """(probe start, start-up before import jax, import jax) of one process."""
    if probe is not None:
        started, imp_started = probe.get("started"), probe.get("import_jax_started")
        imp = probe.get("import_jax_s")
    elif fallback is not None:  # a record alone: only the main process has its times
        times = fallback.get("probe_times") or {}
        started, imp_started = times.get("started"), times.get("import_jax_started")
        imp = fallback.get("import_jax_s")
    else:
        return None, 0.0, 0.0
    startup = max(0.0, _num(imp_started) - _num(started)) if imp_started and started else 0.0
    return (float(started) if isinstance(started, (int, float)) else None), startup, _num(imp)


def ranks_of(record: dict[str, Any], probes: tuple[dict[str, Any], ...] | None = None,
             launched_at: float | None = None) -> tuple[RankSample, ...]:
    """The record's JAX processes grouped by rank (launchers that never imported jax left
    out), in rank order. `probes` (the raw probe documents, main first, as the record was
    built from them) add each process's start-up times; `launched_at` (time.time() when the
    job was started) places each rank's start."""
    parts = [record] + list(record.get("subprocesses") or [])
    main_pid = (record.get("process") or {}).get("pid")
    aligned: list[dict[str, Any] | None] = list(in_record_order(probes or (), main_pid))
    aligned += [None] * (len(parts) - len(aligned))
    groups: dict[int | None, list[tuple[dict[str, Any], dict[str, Any] | None]]] = {}
    for i, part in enumerate(parts):
        probe = aligned[i]
        view = {"identity": (probe or {}).get("identity") or part.get("identity"),
                "platform": part.get("platform") or (probe or {}).get("platform")}
        imported = (probe or {}).get("import_jax_s") if probe else (
            record.get("import_jax_s") if i == 0 else None)
        if not part.get("modules") and imported is None:
            continue  # a launcher that never imported jax, not a rank
        groups.setdefault(rank_of(view), []).append((part, probe))
    out = []
    for rank, members in groups.items():
        phases = dict.fromkeys(RANK_PHASES, 0.0)
        starts, pids, modules = [], [], []
        host = None
        for part, probe in members:
            started, startup, imp = _times(probe, record if part is record else None)
            if started is not None:
                starts.append(started)
            phases["startup"] += startup
            phases["import_jax"] += imp
            for m in part.get("modules") or []:
                phases["trace"] += _num(m.get("trace_s"))
                phases["lower"] += _num(m.get("lower_s"))
                phases["compile_or_load"] += _num(m.get("compile_or_load_s"))
                modules.append(Module((m.get("name") or "?", m.get("input_shapes") or "?"),
                                      m.get("cache_key"), m.get("outcome"), m.get("reason")))
            pid = (probe or {}).get("pid") or part.get("pid")
            if isinstance(pid, int):
                pids.append(pid)
            host = host or _host(probe or {}) or _host(part)
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
