"""`jaxcache records ... --format json` (schemas jaxcache.records-list/1, records-prune/1,
records-stats/1 in src/jaxcache/schemas/)."""

from __future__ import annotations

import json
from dataclasses import asdict

from jaxcache.documents.kinds import envelope
from jaxcache.records.prune import PruneResult
from jaxcache.records.stats import Stats
from jaxcache.records.store import Scan, Skipped
from jaxcache.records.summary import RunSummary, summarize


def _head(kind: str) -> dict:
    return envelope(f"records-{kind}")


def _run(r: RunSummary) -> dict:
    d = asdict(r)
    d["argv"] = list(r.argv)
    return d


def _skipped(skipped: tuple[Skipped, ...]) -> list[dict]:
    return [{"name": s.name, "why": s.why} for s in skipped]


def _dump(doc: dict) -> str:
    return json.dumps(doc, indent=2) + "\n"


def render_list(scan: Scan) -> str:
    return _dump({**_head("list"), "directory": scan.directory, "exists": scan.exists,
                  "records": [_run(summarize(f)) for f in scan.records],
                  "skipped": _skipped(scan.skipped)})


def render_prune(p: PruneResult) -> str:
    return _dump({**_head("prune"), "directory": p.directory, "dry_run": p.dry_run,
                  "older_than_days": p.older_than_days, "keep": p.keep,
                  "deleted": [_run(r) for r in p.deleted], "kept": p.kept,
                  "freed_bytes": p.freed_bytes, "changed": list(p.changed),
                  "skipped": _skipped(p.skipped)})


def render_stats(s: Stats) -> str:
    return _dump({**_head("stats"), **asdict(s)})
