"""`jaxcache ls gs://...` (or s3://) as a table: size, age, signature object present, module,
name."""

from __future__ import annotations

import time

from jaxcache.text import safe, size


def _age(updated: float | None) -> str:
    if updated is None:
        return "-"
    secs = max(0.0, time.time() - updated)
    for unit, span in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= span:
            return f"{int(secs // span)}{unit}"
    return f"{int(secs)}s"


def render(found) -> str:
    from jaxcache.seal import bucket_scan

    # every name is a bucket writer's: escaped, in each column it reaches (a raw escape
    # sequence in MODULE could repaint the line and hide UNSIGNED)
    rows = [(size(o.size), _age(o.updated), "signed" if o.name in found.signed else "UNSIGNED",
             safe(o.name.rsplit("-", 2)[0]), safe(o.name)) for o in bucket_scan.entries(found)]
    head = ("SIZE", "AGE", "SIGNATURE", "MODULE", "NAME")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + "  " + r[4]
             for r in [head, *rows]]
    total = sum(o.size for o in bucket_scan.entries(found))
    lines.append(f"{len(rows)} entr{'y' if len(rows) == 1 else 'ies'}, {size(total)} in "
                 f"{safe(found.url)}; a signature object is not a valid signature: "
                 "`jaxcache verify` checks them")
    return "\n".join(lines) + "\n"
