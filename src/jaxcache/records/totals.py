"""Cumulative numbers over the kept records, like `ccache -s`, with the saving estimated.

The saving is estimated, never read off JAX (its compile_time_saved_sec rests on compile times
stored in whole seconds): for each hit, the cold compile time of the same cache key as another
record measured it (the median over the records that compiled it), minus what the hit spent
loading. Hits whose key no other record compiled are counted apart, not guessed.
"""

from __future__ import annotations

import statistics

from jaxcache.records.record_dir import Scan
from jaxcache.records.run_document import ModuleOutcome, RunRecord
from jaxcache.records.summary import summarize
from jaxcache.values import frozen

HOW_SAVED = ("for each hit, the compile time of the same cache key measured by another record "
             "that compiled it (median), minus the hit's load time")


@frozen
class Stats:
    directory: str
    records: int
    first: str | None  # oldest record's time
    last: str | None  # newest record's time
    compile_requests: int
    hits: int
    misses: int
    written: int
    skipped: int
    compile_s: float
    load_s: float
    saved_s: float  # estimated, see HOW_SAVED
    hits_estimated: int  # hits whose cold compile time another record measured
    hits_unknown: int  # hits of keys no other record compiled: not in saved_s
    skipped_files: int  # files named like records that are not (never counted)
    how_saved: str = HOW_SAVED


COLD = (ModuleOutcome.WRITTEN, ModuleOutcome.SKIPPED, ModuleOutcome.UNCACHED)


def _cold_times(records: list[RunRecord]) -> dict[str, list[tuple[int, float]]]:
    """cache key -> (record index, seconds) for every compile of it that was not a hit."""
    out: dict[str, list[tuple[int, float]]] = {}
    for i, record in enumerate(records):
        for m in record.modules:
            key = m.cache_key
            if key and m.outcome in COLD and m.seconds > 0:
                out.setdefault(key, []).append((i, m.seconds))
    return out


def compute(scan: Scan) -> Stats:
    records = [RunRecord.from_json(f.doc) for f in scan.records]  # each read once
    runs = [summarize(f, r) for f, r in zip(scan.records, records, strict=True)]
    cold = _cold_times(records)
    saved, known, unknown = 0.0, 0, 0
    for i, record in enumerate(records):
        for m in record.modules:
            if not m.hit:
                continue
            others = [s for j, s in cold.get(m.cache_key or "", []) if j != i]
            if others:
                saved += statistics.median(others) - m.seconds
                known += 1
            else:
                unknown += 1
    return Stats(
        scan.directory, len(runs), runs[-1].when if runs else None,
        runs[0].when if runs else None, sum(r.compile_requests for r in runs),
        sum(r.hits for r in runs), sum(r.misses for r in runs), sum(r.written for r in runs),
        sum(r.skipped for r in runs), sum(r.compile_s for r in runs),
        sum(r.load_s for r in runs), saved, known, unknown, len(scan.skipped))
