"""Which bench `jaxcache decide PATH` judges when given none (issue 44): the newest kept bench
(bench/kept.py) of a job that used PATH. A job used PATH when a run record in the state
directory (records/record_dir.py) names PATH as its cache directory and the bench measured
the same command, or when decide itself benched it for PATH (`decide PATH -- CMD`: the bench's
config.for_cache). Another job's bench is never judged in its place: without one, decide says
so and names the commands the records show, with how to bench them.
"""

from __future__ import annotations

from enum import Enum

from jaxcache.bench import kept
from jaxcache.bench.bench_document import BenchDocument
from jaxcache.records.used_dirs import jobs_of, same_dir
from jaxcache.values import frozen


class How(str, Enum):
    """How decide came by the bench it judged."""

    GIVEN = "given"  # --bench FILE
    RUN = "run"  # decide PATH -- CMD: benched now
    KEPT = "kept"  # the newest kept bench of a job that used PATH

    def __str__(self) -> str:
        return self.value


@frozen
class BenchUsed:
    """A bench decide judged, as its report names it."""

    how: How
    command: tuple[str, ...]
    path: str | None  # the result's file (None: the state directory could not keep it)


@frozen
class Pick:
    """What the chooser found for PATH."""

    used: BenchUsed | None
    bench: BenchDocument | None
    jobs: tuple[tuple[str, ...], ...]  # the commands run records show used PATH, newest first
    others: int  # kept benches of other jobs passed over


def pick(cache: str) -> Pick:
    """The newest kept bench of a job that used `cache`, or none and why."""
    jobs = jobs_of(cache)
    others = 0
    for path, doc in kept.newest_first():
        bench = BenchDocument.from_json(doc)
        if bench.command in jobs or (bench.for_cache is not None
                                     and same_dir(bench.for_cache, cache)):
            return Pick(BenchUsed(How.KEPT, bench.command, path), bench, jobs, others)
        others += 1
    return Pick(None, None, jobs, others)
