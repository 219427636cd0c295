"""`jaxcache net`'s formats (text, json, sarif).

FORMATS maps each --format to its renderer: text for people, json (jaxcache.net/1), sarif.
"""

from __future__ import annotations

from dataclasses import asdict

from jaxcache.documents.kinds import envelope
from jaxcache.net.assess import NetReport
from jaxcache.report import jsonout
from jaxcache.trust.findings import NOTE, UNSAFE, UNVERIFIABLE, WARNING


def net_dict(r: NetReport) -> dict[str, object]:
    return {**envelope("net"),
            "exposed": r.exposed, "unverifiable": r.unverifiable,
            "plan": asdict(r.plan) if r.plan else None,
            "live": None if r.scan is None else {
                "processes": list(r.scan.processes), "uninspected": r.scan.uninspected,
                "uninspected_by_user": dict(r.scan.uninspected_by_user),
                "hidden": r.scan.hidden, "partial": r.scan.partial,
                "listeners": [asdict(li) for li in r.scan.listeners]},
            "findings": [f._asdict() for f in r.findings]}


def render_json(r: NetReport) -> str:
    return jsonout.document(net_dict(r))


_MARK = {UNSAFE: "EXPOSED", UNVERIFIABLE: "UNVERIFIABLE", WARNING: "warning", NOTE: "note"}


def render_text(r: NetReport) -> str:
    if r.exposed:
        head = "a JAX network service is (or will be) reachable beyond loopback without " \
               "authentication"
    elif r.unverifiable:
        head = "UNVERIFIABLE: some processes could not be inspected (see below)"
    else:
        head = "no JAX service reachable beyond loopback without protection"
        if r.scan is not None and r.scan.partial and not r.scan.complete:
            head += " among the processes inspected (a partial answer)"
    lines = ["jaxcache net: " + head]
    if r.plan is not None and r.plan.source is not None:
        p = r.plan
        lines.append(f"environment: coordinator {p.coordinator} ({p.source}), bind {p.bind} "
                     f"({p.bind_class}), mTLS {'configured' if p.mtls_configured else 'no'}, "
                     f"executables over it: {'yes' if p.share_binary else 'no'}, "
                     f"JAX {p.jax_version}")
    if r.scan is not None:
        lines.append(f"live: {len(r.scan.processes)} JAX process(es), "
                     f"{len(r.scan.listeners)} listening socket(s)")
    lines.append("")
    for f in r.findings:
        lines.append(f"[{_MARK.get(f.effect, f.effect)}] {f.message}")
        if f.remedy:
            lines.append(f"    what to do: {f.remedy}")
    return "\n".join(lines) + "\n"


def render_sarif(r: NetReport) -> str:
    """The findings for code-scanning tools (no file locations: they are about the network)."""
    from jaxcache.report import sarif

    return sarif.render_findings(r.findings, {"exposed": r.exposed}, files=False)


FORMATS = {"text": render_text, "json": render_json, "sarif": render_sarif}
