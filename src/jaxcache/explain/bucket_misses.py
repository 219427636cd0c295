"""Why a sealed reader found nothing (or nothing it could load) in its bucket, for `explain`
and `run`'s summary: lookups grouped by what the store answered.

Kinds (seal/stores/bucket_backend.py): not-found (hint prefix-empty: nothing under the prefix, so
publisher and reader use different prefixes or nothing was published; hint key-mismatch: the module
is there under another key, so a key component differs), permission-denied, network, error. Rejected
signatures are the record's seal.rejections.
"""

from __future__ import annotations

from jaxcache.text import safe
from jaxcache.trust.rules.target import is_url

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.records.run_document import BucketMiss, SealPart

_WHAT = {
    "prefix-empty": "not found, and the prefix holds no entries",
    "key-mismatch": "not found under this key, but the module is there under another key",
    "not-found": "not found",
    "permission-denied": "permission denied ({grant})",
    "network": "bucket unreachable (network)",
    "error": "the storage service answered with an error",
}


def lines(seal: SealPart | None) -> list[str]:
    """One line per kind of miss, with the first reason given, and rejections by status."""
    if not seal:
        return []
    out = []
    groups: dict[str, list[BucketMiss]] = {}
    for m in seal.bucket_misses:
        groups.setdefault(m.group, []).append(m)
    for kind, misses in groups.items():
        what = _WHAT.get(kind, safe(kind)).replace("{grant}", _read_grant(seal.path))
        out.append(f"bucket {safe(str(seal.path))}: {len(misses)} lookup(s) "
                   f"{what}: {safe(str(misses[0].reason))[:400]}")
    statuses: dict[str, int] = {}
    for r in seal.rejections:
        status = str(r.status or "?")
        statuses[status] = statuses.get(status, 0) + 1
    if statuses and is_url(str(seal.path)):
        out.append(f"bucket {safe(str(seal.path))}: rejected signatures: "
                   + ", ".join(f"{n} {safe(s)}" for s, n in sorted(statuses.items()))
                   + " (`jaxcache verify` on the prefix lists them)")
    return out


def _read_grant(path: str | None) -> str:
    """What the reader lacks, in the terms of the service that denied it (its store module's)."""
    from jaxcache.seal.objects import store_for_url as objects

    return str(objects.service(str(path).partition("://")[0]).READ_GRANT)
