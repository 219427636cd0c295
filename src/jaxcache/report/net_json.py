"""`jaxcache net --format json` (schema jaxcache.net/1)."""

from __future__ import annotations

from dataclasses import asdict

from jaxcache._package import __version__
from jaxcache.net.assess import SCHEMA, NetReport
from jaxcache.report import jsonout


def net_dict(r: NetReport) -> dict:
    return {"schema": SCHEMA, "tool": {"name": "jaxcache", "version": __version__},
            "exposed": r.exposed, "unverifiable": r.unverifiable,
            "plan": asdict(r.plan) if r.plan else None,
            "live": None if r.scan is None else {
                "processes": list(r.scan.processes), "uninspected": r.scan.uninspected,
                "uninspected_by_user": dict(r.scan.uninspected_by_user),
                "hidden": r.scan.hidden, "partial": r.scan.partial,
                "listeners": [asdict(li) for li in r.scan.listeners]},
            "findings": [asdict(f) for f in r.findings]}


def render(r: NetReport) -> str:
    return jsonout.document(net_dict(r))
