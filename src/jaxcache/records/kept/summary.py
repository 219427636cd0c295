"""One run record in a line's worth of numbers: when, what, how it ended, what the cache did."""

from __future__ import annotations

import time
from dataclasses import dataclass

from jaxcache.records.record_dir import Found
from jaxcache.records.run_document import ModuleOutcome, RunRecord


@dataclass(frozen=True, slots=True)
class RunSummary:
    name: str
    path: str
    when: str  # UTC, ISO 8601, from the file name (ns precision there)
    argv: tuple[str, ...]
    exit_code: int | None
    signal: int | None
    compile_requests: int
    hits: int
    misses: int  # compile requests minus hits (record.py: JAX's own miss event misleads)
    written: int
    skipped: int
    compile_s: float  # compile-or-load seconds of the modules that were not hits
    load_s: float  # compile-or-load seconds of the hits: loading from the cache
    size: int
    # modules JAX did not write whatever the cache held (its thresholds, host callbacks, the
    # cache off): counted apart from the misses a cache could serve, as `ccache -s` does
    uncacheable: int = 0


def summarize(found: Found, record: RunRecord | None = None) -> RunSummary:
    """One record in numbers; `record`: the record already read from `found.doc`."""
    record = RunRecord.from_json(found.doc) if record is None else record
    mods = record.modules
    totals = record.totals
    requests, hits = totals.compile_requests, totals.hits
    process = record.process
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(found.when_ns / 1e9))
    return RunSummary(
        found.name, found.path, stamp, record.argv, process.exit_code, process.signal,
        requests, hits, max(0, requests - hits),
        sum(1 for m in mods if m.outcome is ModuleOutcome.WRITTEN),
        sum(1 for m in mods if m.outcome is ModuleOutcome.SKIPPED),
        sum(m.seconds for m in mods if not m.hit),
        sum(m.seconds for m in mods if m.hit), found.size,
        sum(1 for m in mods if m.outcome in UNCACHEABLE))


UNCACHEABLE = (ModuleOutcome.SKIPPED, ModuleOutcome.UNCACHED)
