"""`jaxcache explain` for people: one row per module, then key differences and advice."""

from __future__ import annotations

from jaxcache.display import safe, size
from jaxcache.explain import Explanation


def _rank_lines(e: Explanation) -> list[str]:
    """The ranks' misses, grouped by rank and changed components: one cause list each."""
    groups: dict[tuple, list] = {}
    for d in e.rank_diffs:
        groups.setdefault((d.rank, d.components), []).append(d)
    lines = ["", "why a rank other than 0 missed:"] if groups else []
    for (rank, components), diffs in groups.items():
        names = ", ".join(safe(d.module) for d in diffs[:6])
        more = f" and {len(diffs) - 6} more" if len(diffs) > 6 else ""
        lines.append(f"  rank {rank}: {len(diffs)} module(s) ({names}{more}): key components "
                     f"differ from rank 0's: {', '.join(components)}")
        lines += [f"    - {cause}" for cause in diffs[0].causes]
        lines.append(f"    what you can do: {diffs[0].remedy}")
    return lines


def render(e: Explanation) -> str:
    lines = [f"UNVERIFIED: {safe(u)}" for u in e.unverified]
    lines += [f"WARNING: {d}" for d in e.unaudited_dirs]
    lines.append(f"jaxcache explain: {len(e.records)} record(s)")
    for record in e.records:
        rows = [m for m in e.modules if m.record == record]
        lines.append("")
        lines.append(f"{safe(record)}: {len(rows)} modules")
        width = max((len(m.name) for m in rows), default=8)
        for m in rows:
            secs = "-" if m.compile_s is None else f"{m.compile_s:.2f} s"
            entry = size(m.entry_bytes) if m.entry_bytes else "-"
            mark = "!" if m.missed_chance else " "
            proc = f" [rank {m.rank}]" if m.rank is not None else (
                "" if m.process == "main" else f" [{m.process}]")
            lines.append(f" {mark} {safe(m.name).ljust(width)}  {safe(m.outcome):9s} compile "
                         f"{secs:>8s}  entry {entry:>9s}  {safe(m.reason)}: {m.text}{proc}")
            if m.missed_chance and m.input_shapes:
                lines.append(f"     input shapes {safe(m.input_shapes)}")
    if e.diffs:
        lines += ["", "why a later process missed what an earlier one cached:"]
        for d in e.diffs:
            lines.append(f"  {safe(d.module)}: {safe(d.earlier)} -> {safe(d.later)}: key "
                         f"components changed: {safe(', '.join(d.components))}")
            for cause in d.causes:
                lines.append(f"    - {cause}")
    lines += _rank_lines(e)
    lines += ["", "thresholds:"]
    lines += [f"  {a.text}" for a in e.advice]
    for note in e.notes:
        lines.append(f"note: {note}")
    missed = sum(1 for m in e.modules if m.missed_chance)
    lines.append("")
    if not e.modules:
        lines.append("no JAX compile was recorded, so there is nothing to explain")
    elif e.exit_code == 0:
        lines.append("everything that could be cached was cached")
    else:
        parts = []
        if missed:
            parts.append(f"{missed} expensive module(s) not cached (marked !)")
        if e.diffs:
            parts.append(f"{len(e.diffs)} cross-process miss(es)")
        if e.rank_diffs:
            ranks = sorted({d.rank for d in e.rank_diffs})
            parts.append(f"rank(s) {', '.join(map(str, ranks))} never hit: "
                         f"{len(e.rank_diffs)} module(s) keyed differently from rank 0")
        if any(a.material for a in e.advice):
            parts.append("thresholds leave a material share of start-up uncached")
        if parts:
            lines.append("something expensive was not cached: " + "; ".join(parts))
    if e.unaudited_dirs:
        lines.append(f"JAX was pointed at {len(e.unaudited_dirs)} cache director"
                     f"{'y' if len(e.unaudited_dirs) == 1 else 'ies'} jaxcache did not audit "
                     "(see the first lines)")
    return "\n".join(lines) + "\n"
