"""`jaxcache gc`: text for people, JSON (jaxcache.gc/1) for scripts.

The answer comes first (what was freed, what is left, whether the limit holds); then each
evicted entry with its last use, then what gc left alone and why.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from jaxcache.documents.kinds import envelope
from jaxcache.gc.collect import GcResult
from jaxcache.gc.compaction import Compaction
from jaxcache.gc.units import Clock
from jaxcache.report import jsonout
from jaxcache.text import age, plural, safe, size
from jaxcache.trust.rules.target import BucketUrl, is_url


def _answer(r: GcResult) -> str:
    verb = "would free" if r.dry_run else "freed"
    head = (f"gc {safe(r.directory)}: {verb} {size(r.freed_bytes)} "
            f"({plural(len(r.evicted), 'entry', 'entries')}); "
            f"{size(r.after_bytes)} left in {plural(r.kept_units, 'entry', 'entries')} "
            f"gc may delete and {plural(len(r.left), 'file')} it may not")
    if r.evicted and r.recompile_s:
        head += (f"; the next start of the jobs that used them recompiles ~{r.recompile_s:.1f} s"
                 + (f" (and {plural(r.unpriced, 'entry', 'entries')} no run record here shows "
                    "compiled)" if r.unpriced else ""))
    elif r.evicted:
        head += "; no run record here shows what they took to compile"
    if r.over_by:
        head += (f"; still {size(r.over_by)} over --max-size: the rest is not gc's to delete "
                 "(see below)")
    return head


def render_text(r: GcResult, now_ns: int, verbose: bool) -> str:
    out = [_answer(r)]
    limits = []
    if r.max_size is not None:
        limits.append(f"max size {size(r.max_size)}")
    if r.max_age_s is not None:
        limits.append(f"max age {age(r.max_age_s)}")
    where = ("; a sealed bucket: only entries with their signature were candidates"
             if is_url(r.directory) else
             "; a directory others write: only entries your jobs wrote were candidates"
             if r.shared else "")
    out.append(f"  limits: {', '.join(limits)}; order: {r.order.words}{where}")
    if r.clocks:
        out.append(f"  {_clocks_line(r)}")
    shown = r.evicted if verbose else r.evicted[:20]
    for u in shown:
        out.append(f"  {'would delete' if r.dry_run else 'deleted'}  {size(u.size):>9}  "
                   f"last {_used(u.clock)} {age(max(0.0, (now_ns - u.last_used_ns) / 1e9))} "
                   f"ago  {safe(u.name)}" + (f" (+{len(u.sidecars)})" if u.sidecars else ""))
    if len(r.evicted) > len(shown):
        out.append(f"  ... and {len(r.evicted) - len(shown)} more (-v lists all)")
    for name in r.orphans:
        out.append(f"  {'would remove' if r.dry_run else 'removed'} (its entry was gone): "
                   f"{safe(name)}")
    for name in r.changed:
        out.append(f"  changed meanwhile, left alone: {safe(name)}")
    for f in r.left:
        out.append(f"  left: {safe(f.name)}: {safe(f.why)}")
    if r.ledger is not None and (r.ledger.lines or r.ledger.problem):
        out.append(f"  {ledger_line(r.ledger)}")
    return "\n".join(out) + "\n"


def _used(clock: Clock) -> str:
    """The verb of an evicted row: a load or read it knows of, or only the write."""
    return {Clock.WRITTEN: "written", Clock.READ: "read"}.get(clock, "loaded")


def _clocks_line(r: GcResult) -> str:
    """Which clock gave the candidates their last use: a write time is never called a use."""
    said = ", ".join(f"{n} {c.words}" for c, n in r.clocks)
    if Clock.WRITTEN in dict(r.clocks) and not r.read_times:
        if is_url(r.directory):
            said += ("; a bucket keeps no read times: those are judged by their upload time and "
                     "the hits this machine's run records show")
        else:
            why = ("a directory others write is judged from its audit, which reads no read "
                   "times" if r.shared else "this filesystem is not known to keep read times "
                   "(mounted noatime, or its mount not found)")
            said += (f"; {why}: those are judged by their write time (plain JAX leaves no "
                     "other trace of a load unless jax_compilation_cache_max_size is set)")
    return f"last use: {said}"


def ledger_line(c: Compaction) -> str:
    """One line on the origin ledger's compaction."""
    if c.problem:
        return f"origin ledger {safe(c.path)} not compacted: {safe(c.problem)}"
    verb = "would drop" if c.dry_run else "dropped"
    return (f"origin ledger: {verb} {c.dropped} of {plural(c.lines, 'line')} ({c.gone} for "
            f"entries gone, {c.changed} changed, {c.repeated} repeated, {c.torn} torn)"
            + (f" and {plural(c.descriptions, 'build description')} (repeated, or of builds "
               "no kept line names)" if c.descriptions else "")
            + f", {size(c.bytes_before)} -> {size(c.bytes_after)}"
            + (f"; {c.unjudged} kept unjudged (their folder could not be looked into)"
               if c.unjudged else ""))


def _ledger_json(c: Compaction | None) -> dict[str, object] | None:
    if c is None:
        return None
    return {"path": safe(c.path), "lines": c.lines, "kept": c.kept, "gone": c.gone,
            "changed": c.changed, "repeated": c.repeated, "torn": c.torn,
            "build_descriptions_dropped": c.descriptions,
            "unjudged": c.unjudged, "bytes_before": c.bytes_before,
            "bytes_after": c.bytes_after, "problem": c.problem and safe(c.problem)}


def render_json(r: GcResult, now_ns: int, verbose: bool) -> str:
    return jsonout.document({
        **envelope("gc"), "directory": safe(r.directory), "dry_run": r.dry_run,
        "max_size_bytes": r.max_size, "max_age_s": r.max_age_s, "order": r.order.value,
        "recompile_s": round(r.recompile_s, 3), "unpriced_entries": r.unpriced,
        "shared": r.shared, "before_bytes": r.before_bytes, "after_bytes": r.after_bytes,
        "freed_bytes": r.freed_bytes, "over_by_bytes": r.over_by, "kept_entries": r.kept_units,
        "evicted": jsonout.Rows(
            {"entry": safe(u.name), "bytes": u.size, "last_used_ns": u.last_used_ns,
             "last_used_by": u.clock.value,
             "files": [safe(f.name) for f in u.files]} for u in r.evicted),
        "last_used_by": {c.value: n for c, n in r.clocks}, "read_times": r.read_times,
        "changed": [safe(n) for n in r.changed],
        "orphans_removed": [safe(n) for n in r.orphans],
        "left": jsonout.Rows({"name": safe(f.name), "why": safe(f.why)} for f in r.left),
        "ledger": _ledger_json(r.ledger)})


def lifecycle_json(url: BucketUrl, max_age_s: float) -> str:
    """The rule alone, to save and apply as it is."""
    from jaxcache.gc import lifecycle_rule

    return json.dumps(lifecycle_rule.rule(url, max_age_s), indent=2) + "\n"


def lifecycle_text(url: BucketUrl, max_age_s: float) -> str:
    from jaxcache.gc import lifecycle_rule

    n = lifecycle_rule.days(max_age_s)
    file = "jaxcache-lifecycle.json"
    return "\n".join([
        f"# {url.text}: the bucket deletes every object under the prefix {plural(n, 'day')} "
        "after its upload (entries and signatures alike)",
        f"# save the JSON below as {file} (or use --format json > {file}), then:",
        f"#   {lifecycle_rule.apply_command(url, file)}",
        "# (this replaces the bucket's lifecycle configuration: merge any rules it has)",
        "# what a bucket rule cannot do, which `jaxcache gc` does:",
        "#  - it counts from the upload, not the last use: an entry every job loads goes too,",
        "#    and is compiled and published again at the next miss;",
        "#  - it deletes without judging: no unit, no condition, so an entry may for a while",
        "#    be left without its signature (a reader rejects it: a miss, never a load);",
        "#  - it deletes every object under the prefix, also those gc leaves (unsigned",
        "#    entries, foreign objects, anything in folders below);",
        "#  - it knows no size limit.",
        lifecycle_json(url, max_age_s).rstrip("\n")]) + "\n"


FORMATS: dict[str, Callable[[GcResult, int, bool], str]] = {"text": render_text,
                                                           "json": render_json}
