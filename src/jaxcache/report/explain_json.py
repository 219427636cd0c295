"""`jaxcache explain --format json` (schema jaxcache.explain/1)."""

from __future__ import annotations

from dataclasses import asdict

from jaxcache.documents.kinds import envelope
from jaxcache.explain.reasons import Explanation
from jaxcache.report import jsonout


def render(e: Explanation) -> str:
    doc = {**envelope("explain"),
           "records": list(e.records), "modules": [asdict(m) for m in e.modules],
           "key_diffs": [asdict(d) for d in e.diffs],
           "rank_diffs": [asdict(d) for d in e.rank_diffs],
           "thresholds": [asdict(a) for a in e.advice],
           "notes": list(e.notes), "unaudited_dirs": list(e.unaudited_dirs),
           "unverified": list(e.unverified),
           "exit_code": e.exit_code}
    return jsonout.document(doc)
