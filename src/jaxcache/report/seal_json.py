"""`jaxcache verify|seal --format json` (schema jaxcache.seal-scan/1)."""

from __future__ import annotations

from dataclasses import asdict

from jaxcache.documents.kinds import envelope
from jaxcache.report import jsonout
from jaxcache.seal.scan import ScanResult
from jaxcache.text import safe

STATUSES = ("valid", "signed-now", "co-signed", "unsigned", "bad-signature", "unknown-key",
            "revoked-key", "expired-key", "not-yet-valid-key", "too-few-signatures",
            "not-co-signed", "not-a-file", "never-hit")


def render(result: ScanResult, action: str) -> str:
    doc = {**envelope("seal-scan"),
           "action": action, "directory": result.directory,
           "counts": {s: result.count(s) for s in STATUSES},
           "entries": [asdict(e) for e in result.entries],
           "leftovers": list(result.leftovers), "others": [safe(n) for n in result.others],
           "all_valid": result.all_valid, "strict_ok": result.strict_ok,
           "never_hit": result.unhittable,
           "unhittable_allowed": None if action == "verify" else not result.refuse_unhittable,
           "keys": [asdict(k) for k in result.keys], "signatures_needed": result.needed,
           "signing_key": result.signer, "ok": result.ok}
    return jsonout.document(doc)
