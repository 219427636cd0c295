"""What the build binding of a sealed cache did in one run, for `explain` and `run`'s summary
(docs/reference/sealed-cache.md, build binding): entries missed because their signatures claim
another build or host (seal.rejections with status other-build or build-unknown), and entries loaded
though no signature said which build made them (seal.build.unknown_loaded).
"""

from __future__ import annotations

from jaxcache.text import plural, safe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.records.run_document import SealPart

_SHOWN = 400  # characters of a reason: it names both sides and what to do


def lines(seal: SealPart | None) -> list[str]:
    """One line per kind: misses of another build (with the first reason), misses of an
    unknown build under require_build, and loads of an unknown build."""
    if not seal:
        return []
    out = []
    for status in ("other-build", "build-unknown"):  # each reason says what and what to do
        found = [r for r in seal.rejections if r.status == status]
        if found:
            out.append(f"sealed: {plural(len(found), 'entry')} missed, never loaded "
                       f"({status}): {safe(str(found[0].reason))[:_SHOWN]}")
    unknown = seal.unknown_builds_loaded
    if unknown:
        out.append(f"sealed: {plural(unknown, 'entry')} loaded with build unknown (signed "
                   "before build binding, or stripped of its build claim); require_build = "
                   "true in the policy makes them misses")
    return out
