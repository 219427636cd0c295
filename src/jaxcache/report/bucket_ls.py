"""`jaxcache ls gs://...` (or s3://)'s formats; its text, a table: size, age, signature
object present, module, name.

FORMATS maps each --format to its renderer: text for people, json (jaxcache.ls-bucket/1).
"""

from __future__ import annotations

import time

from jaxcache.documents.kinds import envelope
from jaxcache.report import jsonout
from jaxcache.text import safe, size

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.seal.sweep.bucket_sweep import BucketListing


def render_json(found: BucketListing) -> str:
    from jaxcache.seal.sweep import bucket_sweep as bucket_scan

    return jsonout.document({
        **envelope("ls-bucket"), "url": found.url,
        "entries": [{"name": o.name, "size": o.size, "generation": o.generation,
                     "updated": o.updated, "signature_object": o.name in found.signed}
                    for o in bucket_scan.entries(found)]})


def _age(updated: float | None) -> str:
    if updated is None:
        return "-"
    secs = max(0.0, time.time() - updated)
    for unit, span in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= span:
            return f"{int(secs // span)}{unit}"
    return f"{int(secs)}s"


def render_text(found: BucketListing) -> str:
    from jaxcache.seal.sweep import bucket_sweep as bucket_scan

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


FORMATS = {"text": render_text, "json": render_json}
