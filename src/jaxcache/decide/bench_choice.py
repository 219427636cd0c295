"""Which bench `jaxcache decide PATH` judges when given none (issue 44): a kept bench
(bench/kept.py) of a job of PATH, and of those the newest measured as PATH's runs run.

A job is its command and the folder it runs from: two folders' `python job.py` are two jobs.
A bench is of a job of PATH when a run record in the state directory (records/record_dir.py)
names PATH as its cache directory and the bench measured the same command from the same folder
(`config.cwd`; a bench from before it was recorded never matches by its command alone: it can
still be judged with --bench FILE), or when the bench
says PATH is its cache (`config.for_cache`: `decide PATH -- CMD` benched it, `bench
--for-cache PATH`, or bench ran where the project file's, or JAX's variable's, cache directory
is PATH: there `jaxcache run` and enable() put the job's entries; a bench that names another
directory so is that one's, never PATH's by its command and folder). Another job's bench is
never judged in its place: without one, decide says so and names the newest kept benches, with
the line that judges each, and the commands the records show.

Of the benches of PATH's jobs, the newest measured with JAX's write thresholds as the runs on
PATH use them wins: as the newest run record of PATH that saw a compile says, else as the
settings say (JAX's variables, the project file, JAX's defaults). A saving measured at a lower
threshold is not the one the runs get. Without such a bench the newest is judged, and decide
says it was measured otherwise; either way it names the benches it passed over.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from jaxcache.bench import kept
from jaxcache.bench.bench_document import BenchDocument
from jaxcache.records.used_dirs import runs_of, same_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.records.run_document import RunRecord

RECENT = 3  # the kept benches named when none is of PATH's jobs


class How(StrEnum):
    """How decide came by the bench it judged."""

    GIVEN = "given"  # --bench FILE
    RUN = "run"  # decide PATH -- CMD: benched now
    KEPT = "kept"  # a kept bench of a job of PATH

    def __str__(self) -> str:
        return self.value


class RunsFrom(StrEnum):
    """What says how the runs on PATH set JAX's write thresholds."""

    RECORD = "run-record"  # the newest run record of PATH that saw a compile
    SETTINGS = "settings"  # JAX's variables here, else the project file, else JAX's defaults

    def __str__(self) -> str:
        return self.value

    @property
    def words(self) -> str:
        return ("as their newest run record says" if self is RunsFrom.RECORD else
                "as the settings say: JAX's variables, the project file, else JAX's defaults")


@dataclass(frozen=True, slots=True)
class Thresholds:
    """JAX's write thresholds (None: not known, not compared)."""

    min_compile_time_s: float | None
    min_entry_size_bytes: int | None

    def same(self, other: Thresholds) -> bool:
        """Equal where both are known."""
        return not self._differ(other)

    def _differ(self, unlike: Thresholds | None) -> list[str]:
        out = []
        time_s, size = self.min_compile_time_s, self.min_entry_size_bytes
        if time_s is not None and (unlike is None or unlike.min_compile_time_s is not None
                                   and abs(time_s - unlike.min_compile_time_s) >= 1e-9):
            out.append(f"--min-compile-time {time_s:g}")
        if size is not None and (unlike is None or unlike.min_entry_size_bytes is not None
                                 and size != unlike.min_entry_size_bytes):
            out.append(f"--min-entry-size {size}")
        return out

    def flags(self, unlike: Thresholds | None = None) -> str:
        """As run and bench take them ('--min-compile-time 0 --min-entry-size 0'); with
        `unlike`, only those known in both that differ from it."""
        return " ".join(self._differ(unlike)) or "the same thresholds"


@dataclass(frozen=True, slots=True)
class RunsUse:
    """How the runs on PATH set the thresholds, and what says so."""

    min_compile_time_s: float | None
    min_entry_size_bytes: int | None
    source: RunsFrom

    @property
    def thresholds(self) -> Thresholds:
        return Thresholds(self.min_compile_time_s, self.min_entry_size_bytes)


@dataclass(frozen=True, slots=True)
class BenchUsed:
    """A bench decide judged, as its report names it."""

    how: How
    command: tuple[str, ...]
    path: str | None  # the result's file (None: the state directory could not keep it)


@dataclass(frozen=True, slots=True)
class KeptBench:
    """A kept bench, as decide names it: its job, its file, when, its thresholds."""

    command: tuple[str, ...]
    path: str
    when: str | None  # UTC, from the file's name
    thresholds: Thresholds
    cwd: str | None = None  # the folder it ran the job from (None: not recorded)


@dataclass(frozen=True, slots=True)
class KeptChoice:
    """What the chooser found among the kept benches (decide's JSON `kept`)."""

    runs_use: RunsUse
    judged: KeptBench | None  # the kept bench judged (None: none)
    judged_as_runs: bool | None  # it was measured as the runs run (None: none judged)
    passed_over: tuple[KeptBench, ...]  # benches of PATH's jobs not judged, measured otherwise
    jobs: tuple[tuple[str, ...], ...]  # the commands run records show used PATH, newest first
    others: int  # kept benches of other jobs passed over
    # the newest kept benches of other jobs, newer than the one judged (none judged: the
    # newest, any job): a newer bench of the job you meant is never passed over unsaid
    recent: tuple[KeptBench, ...] = ()
    newer: int = 0  # how many kept benches of other jobs are newer than the one judged


@dataclass(frozen=True, slots=True)
class Pick:
    """What the chooser found for PATH: the bench to judge (None: none) and why."""

    used: BenchUsed | None
    bench: BenchDocument | None
    kept: KeptChoice


def _thresholds(bench: BenchDocument) -> Thresholds:
    return Thresholds(bench.min_compile_time_s, bench.min_entry_size_bytes)


def _named(path: str, bench: BenchDocument) -> KeptBench:
    return KeptBench(bench.command, path, kept.when(path), _thresholds(bench), bench.cwd)


def _of_job(bench: BenchDocument, jobs: tuple[tuple[tuple[str, ...], str | None], ...]) -> bool:
    """The bench measured one of `jobs` (command, folder): the same command from the same
    folder; a bench or record with no folder is no job's."""
    return bench.cwd is not None and any(
        bench.command == command and same_dir(bench.cwd, cwd) for command, cwd in jobs)


def runs_use(runs: tuple[RunRecord, ...]) -> RunsUse:
    """The thresholds the runs on a cache use: the newest run record that saw a compile, else
    the settings (jaxcache/project/effective.py's order; JAX's defaults)."""
    for record in runs:
        options = record.processes[0].options
        if options.min_compile_time_s is not None:
            return RunsUse(options.min_compile_time_s, options.min_entry_size_bytes,
                           RunsFrom.RECORD)
    import os

    from jaxcache.jaxcompat.internals import (
        DEFAULT_MIN_COMPILE_TIME_SECS,
        DEFAULT_MIN_ENTRY_SIZE_BYTES,
    )
    from jaxcache.project import effective

    compile_s = next((c for c in effective.compile_time_candidates(os.environ)
                      if c is not None), DEFAULT_MIN_COMPILE_TIME_SECS)  # the first set wins
    size = next((c for c in effective.entry_size_candidates(os.environ) if c is not None),
                DEFAULT_MIN_ENTRY_SIZE_BYTES)
    return RunsUse(None if isinstance(compile_s, str) else float(compile_s),  # no number:
                   None if isinstance(size, str) else size, RunsFrom.SETTINGS)  # unknown


def pick(cache: str) -> Pick:
    """The bench to judge for `cache`, or none and why (the module's docstring)."""
    runs = runs_of(cache)
    jobs = tuple(dict.fromkeys(record.argv for record in runs))
    ran = tuple(dict.fromkeys((record.argv, record.cwd) for record in runs))
    use = runs_use(runs)
    mine: list[tuple[int, str, BenchDocument]] = []  # of cache's jobs, measured otherwise
    recent: list[tuple[int, KeptBench]] = []  # the newest of other jobs, by position
    other_at: list[int] = []  # every other job's bench, by position

    def newer(than: int) -> tuple[tuple[KeptBench, ...], int]:
        """KeptChoice's recent and newer for the bench at position `than`."""
        return tuple(b for i, b in recent if i < than), sum(1 for i in other_at if i < than)

    for i, (path, doc) in enumerate(kept.newest_first()):
        bench = BenchDocument.from_json(doc)
        # a bench that names its cache (for_cache) measured that cache's job, not another's
        if same_dir(bench.for_cache, cache) or (bench.for_cache is None and _of_job(bench, ran)):
            if use.thresholds.same(_thresholds(bench)):  # the newest measured as they run
                passed = tuple(_named(p, b) for _, p, b in mine[:RECENT])
                return Pick(BenchUsed(How.KEPT, bench.command, path), bench,
                            KeptChoice(use, _named(path, bench), True, passed, jobs,
                                       len(other_at), *newer(i)))
            mine.append((i, path, bench))
        else:
            other_at.append(i)
            if len(recent) < RECENT:
                recent.append((i, _named(path, bench)))
    if not mine:
        return Pick(None, None, KeptChoice(use, None, None, (), jobs, len(other_at),
                                           tuple(b for _, b in recent)))
    at, path, bench = mine[0]  # none measured as they run: the newest, said so
    judged = _thresholds(bench)
    passed = tuple(_named(p, b) for _, p, b in mine[1:] if not judged.same(_thresholds(b)))
    return Pick(BenchUsed(How.KEPT, bench.command, path), bench,
                KeptChoice(use, _named(path, bench), False, passed[:RECENT], jobs,
                           len(other_at), *newer(at)))
