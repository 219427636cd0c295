"""`jaxcache net` for people."""

from __future__ import annotations

from jaxcache.net.assess import NetReport
from jaxcache.trust.findings import NOTE, UNSAFE, UNVERIFIABLE, WARNING

_MARK = {UNSAFE: "EXPOSED", UNVERIFIABLE: "UNVERIFIABLE", WARNING: "warning", NOTE: "note"}


def render(r: NetReport) -> str:
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
