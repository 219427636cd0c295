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
    from jaxcache.values import JsonObject


def render(a: JsonObject, b: JsonObject, a_path: str, b_path: str) -> str:
    """Two bench results side by side, each already read and checked (documents.BENCH)."""
    lines = [f"jaxcache bench --compare {safe(a_path)} {safe(b_path)}"]
    ca, cb = " ".join(a.get("command") or []), " ".join(b.get("command") or [])
    lines.append(f"A: {safe(ca)}" if ca == cb else f"A: {safe(ca)}\nB: {safe(cb)} (a "
                 "different command)")
    fa, fb = a.get("comparable") or {}, b.get("comparable") or {}
    diffs = [line for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)
             for line in _differ(k, fa.get(k), fb.get(k))]
    lines.append("comparable: the same versions, builds, devices, flags and shapes"
                 if not diffs else "not comparable (the timings are not directly comparable):")
    lines += diffs
    rows = [("", "A", "B")]
    for name in ("wall",):
        for arm in ("cold", "warm"):
            va = ((a["summary"].get(name) or {}).get(arm) or {}).get("median")
            vb = ((b["summary"].get(name) or {}).get(arm) or {}).get("median")
            rows.append((f"{arm} wall median (s)", _f(va), _f(vb)))
    for phase in (a["summary"].get("phases") or {}):
        for arm in ("cold", "warm"):
            va = a["summary"]["phases"][phase][arm]["median"]
            vb = ((b["summary"].get("phases") or {}).get(phase) or {}).get(arm, {}).get("median")
            rows.append((f"{arm} {safe(phase)} (s)", _f(va), _f(vb)))
    for key in ("saving_s", "compile_saving_s"):
        sa, sb = a["summary"].get(key), b["summary"].get(key)
        rows.append((key.replace("_", " "), _ci(sa), _ci(sb)))
    rows.append(("verdict", a["summary"]["verdict"], b["summary"]["verdict"]))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines.append("")
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
              for r in rows]
    return "\n".join(lines) + "\n"


def _differ(key: str, a: object, b: object) -> list[str]:
    """One comparable field that differs, short: the modules whose inputs changed (summaries
    and digests, not 2,000-character reprs), a digest for any other long value."""
    if key == "shapes" and isinstance(a, list) and isinstance(b, list):
        def by_module(v: list[object]) -> dict[str, str]:
            return {str(d.get("module")): str(d.get("input_shapes")) for d in v
                    if isinstance(d, dict)}
        ma, mb = by_module(a), by_module(b)
        names = sorted(n for n in set(ma) | set(mb) if ma.get(n) != mb.get(n))
        out = [f"  shapes: {plural(len(names), 'module')} differ"]
        out += [clip(f"    {safe(n)}: {style.shapes(ma.get(n)) if n in ma else 'absent'} "
                           f"vs {style.shapes(mb.get(n)) if n in mb else 'absent'}",
                           width()) for n in names[:5]]
        return out + ([f"    ... and {len(names) - 5} more"] if len(names) > 5 else [])

    def brief(v: object) -> str:
        text = safe(repr(v))
        return text if len(text) <= 60 else f"{text[:40]}... (digest {style.digest(text)})"
    return [f"  {safe(key)}: {brief(a)} vs {brief(b)}"]


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _ci(s: JsonObject | None) -> str:
    if not s or s.get("estimate") is None:
        return "-"
    if s.get("low") is None:
        return f"{s['estimate']:.2f} [no interval]"
    level = s.get("confidence")
    label = f" ({level:.1%} CI)" if isinstance(level, float) else ""
    return f"{s['estimate']:.2f} [{s['low']:.2f} - {s['high']:.2f}]{label}"
