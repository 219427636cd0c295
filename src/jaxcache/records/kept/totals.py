"""Cumulative numbers over the kept records, like `ccache -s`, with the saving estimated.

The saving is estimated, never read off JAX (its compile_time_saved_sec rests on compile times
stored in whole seconds): for each hit, the cold compile time of the same cache key as another
record measured it (the median over the records that compiled it), minus what the hit spent
loading. Hits whose key no other record compiled are counted apart, not guessed.

For one cache (`records stats CACHE`, as `ccache -s` for one cache directory): only the runs
whose record says they used it (records/used_dirs.py: the audited directory, or one JAX was
pointed at and the guard served), in the state dir and in the files named with --record
(what `run --record FILE` wrote, wherever). With a zero mark (`--zero`,
documents/zero_mark.py) only the records made after it count; the cold compile times the
saving is estimated from are still taken from every record read.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass

from jaxcache.records.kept.summary import summarize
from jaxcache.records.record_dir import Found, Scan
from jaxcache.records.run_document import ModuleOutcome, RunRecord
from jaxcache.records.used_dirs import same_dir, used

HOW_SAVED = ("for each hit, the compile time of the same cache key measured by another record "
             "that compiled it (median), minus the hit's load time")


@dataclass(frozen=True, slots=True)
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
    cache: str | None = None  # only the runs that used this cache directory (None: every run)
    record_files: tuple[str, ...] = ()  # records named on the command line (run --record)
    since: str | None = None  # zeroed at this time (UTC, ISO 8601): only later records count
    since_ns: int | None = None
    entries: int | None = None  # in the cache after the newest counted run (its record)
    bytes: int | None = None
    entries_when: str | None = None  # that run's time
    # of the compile requests, those JAX did not write whatever the cache held (skipped by its
    # thresholds, or not cacheable), and the misses a cache could have served (misses minus
    # those): the hit rate of the cacheable, as `ccache -s` counts uncacheable calls apart
    uncacheable: int = 0
    cacheable_misses: int = 0


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


def _stamp(ns: int) -> str:
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ns / 1e9))


def compute(scan: Scan, files: tuple[Found, ...] = (), *, cache: str | None = None,
            since_ns: int | None = None) -> Stats:
    """The records of `scan` and `files` (each counted once), or of them those that used
    `cache`, made after `since_ns`."""
    seen = {(f.dev, f.ino) for f in scan.records}
    by_size: dict[int, list[object]] = {}  # a record kept as a copy of a --record FILE too
    for f in scan.records:
        by_size.setdefault(f.size, []).append(f.doc)
    named = [f for f in files
             if (f.dev, f.ino) not in seen and f.doc not in by_size.get(f.size, ())]
    found = sorted([*scan.records, *named],
                   key=lambda f: (f.when_ns, f.name), reverse=True)  # newest first
    read = [RunRecord.from_json(f.doc) for f in found]  # each read once
    cold = _cold_times(read)
    counted = [i for i, (f, r) in enumerate(zip(found, read, strict=True))
               if (cache is None or used(r, cache))
               and (since_ns is None or f.when_ns > since_ns)]
    runs = [summarize(found[i], read[i]) for i in counted]
    saved, known, unknown = 0.0, 0, 0
    for i in counted:
        for m in read[i].modules:
            if not m.hit:
                continue
            others = [s for j, s in cold.get(m.cache_key or "", []) if j != i]
            if others:
                saved += statistics.median(others) - m.seconds
                known += 1
            else:
                unknown += 1
    newest = next((read[i] for i in counted if cache is not None
                   and same_dir(read[i].cache_dir.path_given, cache)), None)
    after = newest.cache_dir.after if newest is not None else None
    uncacheable = sum(r.uncacheable for r in runs)
    return Stats(
        scan.directory, len(runs), runs[-1].when if runs else None,
        runs[0].when if runs else None, sum(r.compile_requests for r in runs),
        sum(r.hits for r in runs), sum(r.misses for r in runs), sum(r.written for r in runs),
        sum(r.skipped for r in runs), sum(r.compile_s for r in runs),
        sum(r.load_s for r in runs), saved, known, unknown, len(scan.skipped), HOW_SAVED,
        cache, tuple(f.path for f in files), None if since_ns is None else _stamp(since_ns),
        since_ns, after.entries if after else None, after.bytes if after else None,
        next((r.when for i, r in zip(counted, runs, strict=True)
              if read[i] is newest), None), uncacheable,
        sum(max(0, r.misses - r.uncacheable) for r in runs))


_MARK = "zero mark"


def mark_path(cache: str) -> str:
    """Where `records stats CACHE --zero` keeps the mark of `cache` (canonical), in the
    state dir."""
    from jaxcache.documents.zero_mark import path_for
    from jaxcache.userdirs import user_dir

    return path_for(user_dir("state"), cache)


def zeroed_since(cache: str) -> int | None:
    """When counting for `cache` (canonical) was last zeroed; None: never. A mark that is not
    jaxcache's, or names another cache, is refused with one line (fail closed)."""
    from jaxcache import validate
    from jaxcache.documents.zero_mark import ZeroMark
    from jaxcache.errors import JaxcacheError
    from jaxcache.text import safe
    from jaxcache.trust.inputs import trusted_file as inputs

    path = mark_path(cache)
    found = inputs.read(path, inputs.Kind(_MARK, 1 << 20, "decides which runs are counted"),
                        missing_ok=True)
    if found is None:
        return None
    try:
        doc = validate.parse_json(found.data)
    except validate.Unreadable as exc:
        doc = str(exc)
    mark = ZeroMark.from_json(doc) if isinstance(doc, dict) else None
    if mark is None or not mark.of(cache) or mark.since_ns is None:
        raise JaxcacheError(f"{safe(path)} is not the zero mark of {safe(cache)}: remove it "
                            "(records stats counts nothing for this cache until then)")
    return mark.since_ns


def write_mark(cache: str, document: str) -> str:
    """Keep `document` (the stats as they stand once zeroed) as the zero mark of `cache`;
    claimed as every output (documents/claim.py): a file there that is not jaxcache's own
    zero mark is never written over. Returns its path."""
    from jaxcache.documents import claim
    from jaxcache.documents.kinds import prefix

    path = mark_path(cache)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    claim.claim(path, _MARK, recognize=claim.json_schema(prefix("records-stats"))).write(document)
    return path
