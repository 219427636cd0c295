"""`jaxcache verify|seal` for people: problems first, then the counts."""

from __future__ import annotations

from jaxcache.display import safe, size
from jaxcache.report import style
from jaxcache.report.seal_json import STATUSES
from jaxcache.seal.scan import ScanResult

_WHAT = {"unsigned": "UNSIGNED", "bad-signature": "BAD SIGNATURE",
         "unknown-key": "UNKNOWN KEY", "not-a-file": "NOT A FILE"}
_FINE = {"valid": "VALID", "signed-now": "SIGNED NOW"}  # listed with --verbose only


def render(result: ScanResult, action: str, *, verbose: bool = False) -> str:
    """Problems first (every entry with `verbose`), then the counts and what they mean."""
    total = style.plural(len(result.entries), "entry")
    if action == "verify":  # the answer first: does a sealed reader load all of it?
        bad = len(result.entries) - result.count("valid")
        lines = [f"{style.verdict('VALID')}: every entry verifies ({total}) in "
                 f"{safe(result.directory)}" if result.all_valid else
                 f"{style.verdict('INVALID')}: {bad} of {total} do not verify, "
                 f"{style.plural(len(result.leftovers), 'leftover')}, in {safe(result.directory)}"]
    else:
        lines = [f"{action} {safe(result.directory)}: {total}"]
    for e in result.entries:
        if e.status in _WHAT:
            lines.append(f"  {_WHAT[e.status]:13s} {safe(e.name)} ({size(e.size)}): "
                         f"{safe(e.reason)}")
        elif verbose:
            lines.append(f"  {_FINE.get(e.status, e.status):13s} {safe(e.name)} "
                         f"({size(e.size)})")
    for name in result.leftovers:
        lines.append(f"  LEFTOVER      {safe(name)} (an interrupted write or a signature "
                     "without its entry; never loaded)")
    counts = ", ".join(f"{result.count(s)} {s}" for s in STATUSES if result.count(s))
    lines.append(f"  {counts or 'no entries'}")
    if result.all_valid:
        lines.append("every entry verifies for a reader trusting these keys")
        if action == "seal":
            lines.append("note: sealed readers run with XLA's sub-caches off, which is part of "
                         "the cache key: entries made by plain runs hit only if those ran with "
                         "JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES=none")
    else:
        lines.append("entries that do not verify are misses for sealed readers (they recompile) "
                     "and are left in place: jaxcache deletes nothing it did not create")
    return "\n".join(lines) + "\n"
