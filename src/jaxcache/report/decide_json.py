"""`jaxcache decide --format json` (schema jaxcache.decide/1)."""

from __future__ import annotations

from dataclasses import asdict

from jaxcache.decide import Decision
from jaxcache.documents.kinds import envelope
from jaxcache.report import jsonout


def render(d: Decision) -> str:
    doc = {**envelope("decide"), **asdict(d), "exit_code": d.exit_code}
    return jsonout.document(doc)
