"""`jaxcache explain`'s formats; its text: the answer, the modules that matter (the rest
grouped by outcome and reason), then key differences and advice.

FORMATS maps each --format to its renderer: text for people, json (jaxcache.explain/1).
"""

from __future__ import annotations

from dataclasses import asdict

from jaxcache.documents.kinds import envelope
from jaxcache.explain.rank_misses import RankDiff
from jaxcache.explain.reasons import Explanation, ModuleWhy
from jaxcache.report import jsonout, style
from jaxcache.text import Tone, plural, safe, size, some, width, wrap


def render_json(e: Explanation) -> str:
    doc = {**envelope("explain"),
           "records": list(e.records),
           "build_diffs": [asdict(d) for d in e.build_diffs],
           "modules": [asdict(m) for m in e.modules],
           "key_diffs": [asdict(d) for d in e.diffs],
           "rank_diffs": [asdict(d) for d in e.rank_diffs],
           "thresholds": [asdict(a) for a in e.advice],
           "notes": list(e.notes), "unaudited_dirs": list(e.unaudited_dirs),
           "unverified": list(e.unverified),
           "exit_code": e.exit_code}
    return jsonout.document(doc)


def _rank_lines(e: Explanation) -> list[str]:
    """The ranks' misses, grouped by rank and changed components: one cause list each."""
    groups: dict[tuple[int | None, tuple[str, ...]], list[RankDiff]] = {}
    for d in e.rank_diffs:
        groups.setdefault((d.rank, d.components), []).append(d)
    lines = ["", "why a rank other than 0 missed:"] if groups else []
    for (rank, components), diffs in groups.items():
        names = ", ".join(safe(d.module) for d in diffs[:6])
        more = f" and {len(diffs) - 6} more" if len(diffs) > 6 else ""
        lines.append(f"  rank {rank}: {plural(len(diffs), 'module')} ({names}{more}): key "
                     "components "
                     f"differ from rank 0's: {', '.join(safe(c) for c in components)}")
        lines += [w for cause in diffs[0].causes for w in wrap(cause, "    - ")]
        lines += wrap(f"what you can do: {diffs[0].remedy}", "    ")
    return lines


GROUP_FROM = 5  # this many modules sharing an outcome and a reason: the top few, then one line
SHOWN = 2  # of such a group, the modules shown one by one (the slowest, else the largest)


def _row(m: ModuleWhy, name_width: int, ranks: bool) -> list[str]:
    secs = "-" if m.compile_s is None else f"{m.compile_s:.2f} s"
    entry = size(m.entry_bytes) if m.entry_bytes else "-"
    mark = "!" if m.missed_chance else " "
    proc = f" [rank {m.rank}]" if m.rank is not None and ranks else (
        "" if m.process == "main" or m.rank is not None else f" [{m.process}]")
    out = wrap(f" {mark} {safe(m.name).ljust(name_width)}  {safe(m.outcome):9s} compile "
                     f"{secs:>8s}  entry {entry:>9s}  {m.text}{proc}",
                     hang="    ", limit=max(width(), 160))
    if m.missed_chance and m.input_shapes:
        out.append(f"     inputs: {style.shapes(m.input_shapes)}")
    return out


def _rest(rows: list[ModuleWhy]) -> str:
    """The rest of a group in one line: how many, their compile time and entry size."""
    total_s = sum(m.compile_s or 0.0 for m in rows)
    total_b = sum(m.entry_bytes or 0 for m in rows)
    shown = some(sorted({m.name for m in rows}))  # escaped by some()
    return (f"   ... and {plural(len(rows), 'more module')} {safe(rows[0].outcome)} "
            f"({safe(rows[0].reason)}): compile {total_s:.2f} s, entries {size(total_b)} "
            f"in all ({shown})")


def _modules(e: Explanation, record: str, ranks: bool) -> list[str]:
    """The rows that matter one by one: every expensive module not cached, and the slowest
    of each outcome and reason; the rest of a large group in one line."""
    rows = [m for m in e.modules if m.record == record]
    kinds: dict[tuple[str, str], list[ModuleWhy]] = {}
    for m in rows:
        if not m.missed_chance:
            kinds.setdefault((m.outcome, m.reason), []).append(m)
    rest: list[list[ModuleWhy]] = []
    hidden: set[int] = set()
    for ms in kinds.values():
        if len(ms) >= GROUP_FROM:
            tail = sorted(ms, key=lambda m: (-(m.compile_s or 0.0), -(m.entry_bytes or 0)))
            rest.append(tail[SHOWN:])
            hidden |= {id(m) for m in tail[SHOWN:]}
    single = [m for m in rows if id(m) not in hidden]
    name_width = max((len(safe(m.name)) for m in single), default=8)
    lines = ["", f"{safe(record)}: {plural(len(rows), 'module')}"]
    for m in sorted(single, key=lambda m: (not m.missed_chance, -(m.compile_s or 0.0))):
        lines += _row(m, name_width, ranks)
    return lines + [_rest(ms) for ms in rest]


def findings(e: Explanation) -> list[str]:
    """Why explain exits 1, each in a few words (none when it exits 0): what its first line
    says after UNCACHED, and what the demo's story says beside its exit code."""
    parts = []
    if e.build_diffs:
        parts.append(f"{plural(len(e.build_diffs), 'process', 'processes')} ran another build "
                     "or host than the writer")
    if e.exit_code == 0:
        return []
    missed = sum(1 for m in e.modules if m.missed_chance)
    if missed:
        parts.append(f"{plural(missed, 'expensive module')} not cached (marked !)")
    if e.diffs:
        parts.append(f"{plural(len(e.diffs), 'cross-process miss', 'cross-process misses')}")
    if e.rank_diffs:
        ranks = sorted({d.rank for d in e.rank_diffs})
        parts.append(f"{plural(len(ranks), 'rank')} ({', '.join(map(str, ranks))}) never "
                     f"hit: {plural(len(e.rank_diffs), 'module')} keyed differently "
                     "from rank 0")
    if any(a.material for a in e.advice):
        parts.append(MATERIAL)
    return parts


MATERIAL = "thresholds leave a material share of start-up uncached"


def _answer(e: Explanation) -> str:
    """The first line: cached or not, and why not in one breath."""
    if not e.modules:
        return "NOTHING TO EXPLAIN: no JAX compile was recorded"
    if e.exit_code == 0:
        near = (" (what JAX's thresholds left out is near the line: see thresholds below)"
                if any(a.near for a in e.advice) else "")
        return (f"{style.verdict('CACHED', Tone.GOOD)}: everything that could be cached was "
                f"cached{near}")
    parts = findings(e)
    if e.build_diffs and len(parts) == 1:  # nothing else to act on: the builds are the news
        return f"{style.verdict('MIXED BUILDS', Tone.BAD)}: {parts[0]} (named above)"
    return (f"{style.verdict('UNCACHED', Tone.BAD)}: something expensive was not cached"
            + (": " + "; ".join(parts) if parts else ""))


def render_text(e: Explanation) -> str:
    # another build or host than the writer's, a directory JAX was pointed at without an
    # audit, or a record from a JAX jaxcache has not verified, outranks any caching answer:
    # first, the build (its entries can crash the other)
    lines = [w for d in e.build_diffs for w in wrap(f"BUILD: {d.text}", hang="    ")]
    lines += [f"WARNING: {d}" for d in e.unaudited_dirs]
    lines += [f"UNVERIFIED: {safe(u)}" for u in e.unverified]
    lines += [_answer(e)]
    lines.append(f"from {plural(len(e.records), 'record')}")
    ranks = len({m.rank for m in e.modules}) > 1
    for record in e.records:
        lines += _modules(e, record, ranks)
    if e.diffs:
        lines += ["", "why a later process missed what an earlier one cached:"]
        for d in e.diffs:
            lines.append(f"  {safe(d.module)}: {safe(d.earlier)} -> {safe(d.later)}: key "
                         f"components changed: {safe(', '.join(d.components))}")
            for cause in d.causes:
                lines += wrap(cause, "    - ")
    lines += _rank_lines(e)
    lines += ["", "thresholds:"]
    lines += [w for a in e.advice for w in wrap(a.text, "  ")]
    for note in e.notes:
        lines += wrap(note, "note: ")
    if e.unaudited_dirs:
        lines.append(f"JAX was pointed at {plural(len(e.unaudited_dirs), 'cache directory')}"
                     " other than the audited cache (see the first lines)")
    return "\n".join(lines) + "\n"


FORMATS = {"text": render_text, "json": render_json}
