"""`jaxcache net --format json` (schema jaxcache.net/1)."""

from __future__ import annotations

from dataclasses import asdict

from jaxcache.documents.kinds import envelope
from jaxcache.net.assess import NetReport
from jaxcache.report import jsonout


def net_dict(r: NetReport) -> dict:
    return {**envelope("net"),
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
