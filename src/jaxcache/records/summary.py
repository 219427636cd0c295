"""One run record in a line's worth of numbers: when, what, how it ended, what the cache did."""

from __future__ import annotations

import time

from jaxcache.records.reading import all_modules
from jaxcache.records.record_dir import Found
from jaxcache.values import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.values import JsonObject


@frozen
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


def modules(doc: JsonObject) -> list[JsonObject]:
    """Every probed process's modules: the main one's and its subprocesses' (other ranks)."""
    return [m for _, m in all_modules(doc)]


def _counts(doc: JsonObject) -> tuple[int, int]:
    requests = hits = 0
    for c in [doc.get("counts") or {}] + [sp.get("counts") or {}
                                          for sp in doc.get("subprocesses") or []]:
        requests += int(c.get("compile_requests") or 0)
        hits += int(c.get("hits") or 0)
    return requests, hits


def seconds(m: JsonObject) -> float:
    value = m.get("compile_or_load_s")
    return float(value) if isinstance(value, (int, float)) else 0.0


def summarize(found: Found) -> RunSummary:
    doc = found.doc
    mods = modules(doc)
    requests, hits = _counts(doc)
    process = doc.get("process") or {}
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(found.when_ns / 1e9))
    return RunSummary(
        found.name, found.path, stamp, tuple(str(a) for a in doc.get("argv") or ()),
        process.get("exit_code"), process.get("signal"), requests, hits,
        max(0, requests - hits), sum(1 for m in mods if m.get("outcome") == "written"),
        sum(1 for m in mods if m.get("outcome") == "skipped"),
        sum(seconds(m) for m in mods if m.get("outcome") != "hit"),
        sum(seconds(m) for m in mods if m.get("outcome") == "hit"), found.size)
