"""`jaxcache ls gs://... --format json` (or s3://) (schema jaxcache.ls-bucket/1)."""

from __future__ import annotations

from jaxcache.documents.kinds import envelope
from jaxcache.report import jsonout


def render(found) -> str:
    from jaxcache.seal import bucket_scan

    return jsonout.document({
        **envelope("ls-bucket"), "url": found.url,
        "entries": [{"name": o.name, "size": o.size, "generation": o.generation,
                     "updated": o.updated, "signature_object": o.name in found.signed}
                    for o in bucket_scan.entries(found)]})
