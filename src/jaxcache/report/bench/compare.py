"""`jaxcache bench --compare A B`: two bench results side by side, as text.

What makes timings comparable (versions, builds, devices, flags, shapes: bench/comparable.py)
is named first where it differs (the timings are then not directly comparable),
then the medians, the savings with their intervals and the verdicts.
"""

from __future__ import annotations

from jaxcache.report import style
from jaxcache.text import clip, plural, safe, width

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.bench.bench_document import Arms, BenchDocument, Interval


def render(a: BenchDocument, b: BenchDocument, a_path: str, b_path: str) -> str:
    """Two bench results side by side, each already read and checked (documents.BENCH)."""
    lines = [f"jaxcache bench --compare {safe(a_path)} {safe(b_path)}"]
    ca, cb = " ".join(a.command), " ".join(b.command)
    lines.append(f"A: {safe(ca)}" if ca == cb else f"A: {safe(ca)}\nB: {safe(cb)} (a "
                 "different command)")
    fa, fb = a.comparable, b.comparable
    diffs = [line for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)
             for line in (_shapes(a.shapes, b.shapes)
                          if k == "shapes" and a.shapes is not None and b.shapes is not None
                          else _differ(k, fa.get(k), fb.get(k)))]
    lines.append("comparable: the same versions, builds, devices, flags and shapes"
                 if not diffs else "not comparable (the timings are not directly comparable):")
    lines += diffs
    rows = [("", "A", "B")]
    for arm in ("cold", "warm"):
        rows.append((f"{arm} wall median (s)", _f(_median(a.wall, arm)),
                     _f(_median(b.wall, arm))))
    b_phases = dict(b.phases)
    for phase, arms in a.phases:
        for arm in ("cold", "warm"):
            rows.append((f"{arm} {safe(phase)} (s)", _f(_median(arms, arm)),
                         _f(_median(b_phases.get(phase), arm))))
    rows.append(("saving s", _ci(a.saving), _ci(b.saving)))
    rows.append(("compile saving s", _ci(a.compile_saving), _ci(b.compile_saving)))
    rows.append(("verdict", a.verdict, b.verdict))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines.append("")
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
              for r in rows]
    return "\n".join(lines) + "\n"


def _median(arms: Arms | None, arm: str) -> float | None:
    if arms is None:
        return None
    return arms.cold if arm == "cold" else arms.warm


def _shapes(a: tuple[tuple[str, str], ...], b: tuple[tuple[str, str], ...]) -> list[str]:
    """The modules whose inputs changed (summaries and digests, not 2,000-character reprs)."""
    ma, mb = dict(a), dict(b)
    names = sorted(n for n in set(ma) | set(mb) if ma.get(n) != mb.get(n))
    out = [f"  shapes: {plural(len(names), 'module')} differ"]
    out += [clip(f"    {safe(n)}: {style.shapes(ma.get(n)) if n in ma else 'absent'} "
                 f"vs {style.shapes(mb.get(n)) if n in mb else 'absent'}",
                 width()) for n in names[:5]]
    return out + ([f"    ... and {len(names) - 5} more"] if len(names) > 5 else [])


def _differ(key: str, a: object, b: object) -> list[str]:
    """One comparable field that differs, short: a digest for a long value."""
    def brief(v: object) -> str:
        text = safe(repr(v))
        return text if len(text) <= 60 else f"{text[:40]}... (digest {style.digest(text)})"
    return [f"  {safe(key)}: {brief(a)} vs {brief(b)}"]


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _ci(s: Interval | None) -> str:
    if s is None or s.estimate is None:
        return "-"
    if s.low is None:
        return f"{s.estimate:.2f} [no interval]"
    label = f" ({s.confidence:.1%} CI)" if s.confidence is not None else ""
    return f"{s.estimate:.2f} [{s.low:.2f} - {s.high:.2f}]{label}"
