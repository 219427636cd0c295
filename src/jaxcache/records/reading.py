"""Reading a run record's processes: which entries it holds, each one's rank, its modules.

For the readers that still hold a record (or the probes' documents it is built from) as
JSON: the parsing itself is run_document.py's, where the typed readers get the same answers
(RunRecord.processes, ProcessEntry.rank).
"""

from __future__ import annotations

from jaxcache.records.run_document import ProcessEntry, rank_of, subprocess_parts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import TypeVar

    Part = TypeVar("Part", bound="Mapping[str, object]")  # a record's part, or a probe's document


def processes(doc: Part) -> list[Part]:
    """The main probed process and every probed subprocess, each as its own record entry."""
    return [doc, *(p for p in subprocess_parts(doc) if isinstance(p, type(doc)))]


def in_record_order(probes: Iterable[Part], main_pid: int | None) -> list[Part]:
    """The probes in the order the record holds them: the job's own process first; without
    one (a launcher such as srun, which is not Python), the lowest rank first, so that
    `identity` at the top is rank 0's."""
    probes = list(probes)
    if probes and ProcessEntry.from_json(probes[0]).entry_pid != main_pid:
        probes.sort(key=lambda p: (rank_of(p) is None, rank_of(p) or 0))
    return probes


__all__ = ["in_record_order", "processes", "rank_of"]
