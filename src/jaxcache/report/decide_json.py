"""`jaxcache decide --format json` (schema jaxcache.decide/1)."""

from __future__ import annotations

from dataclasses import asdict

from jaxcache._package import __version__
from jaxcache.decide import Decision
from jaxcache.report import jsonout


def render(d: Decision) -> str:
    doc = {"schema": "jaxcache.decide/1", "tool": {"name": "jaxcache", "version": __version__},
           **asdict(d), "exit_code": d.exit_code}
    return jsonout.document(doc)
