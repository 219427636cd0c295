"""`jaxcache records list|prune|stats`'s formats. text for people: the answer first, one line
per record, no line over 200 characters (commands are clipped; the directory is said once, then
file names); json (schemas jaxcache.records-list/1, records-prune/1, records-stats/1).
FORMATS maps each --format to its renderer per action."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from dataclasses import asdict

from jaxcache.documents.kinds import envelope
from jaxcache.records.kept.prune import PruneResult
from jaxcache.records.kept.summary import RunSummary, summarize
from jaxcache.records.kept.totals import Stats
from jaxcache.records.record_dir import Scan, Skipped
from jaxcache.report import jsonout
from jaxcache.text import clip, plural, safe, size, wrap

LONGEST = 200
_COMMAND = 60
_HEAD = ("TIME", "EXIT", "HITS", "MISSES", "WRITTEN", "COMPILE", "LOAD", "COMMAND", "FILE")


def _exit(r: RunSummary) -> str:
    if r.exit_code is not None:
        return str(r.exit_code)
    return f"sig{r.signal}" if r.signal is not None else "?"


def _command(r: RunSummary) -> str:
    """The command, its program without its directory (the record keeps the whole argv)."""
    if not r.argv:
        return "-"
    return clip(safe(shlex.join([os.path.basename(r.argv[0]), *r.argv[1:]])), _COMMAND)


def _row(r: RunSummary) -> tuple[str, ...]:
    return (r.when, _exit(r), str(r.hits), str(r.misses), str(r.written),
            f"{r.compile_s:.2f} s", f"{r.load_s:.2f} s", _command(r), safe(r.name))


def _table(runs: list[RunSummary]) -> list[str]:
    rows = [_HEAD, *(_row(r) for r in runs)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEAD))]
    return [clip("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(),
                       LONGEST) for row in rows]


def _skipped(skipped: tuple[Skipped, ...]) -> list[str]:
    if not skipped:
        return []
    lines = [f"left alone: {plural(len(skipped), 'file')} named like a run record that "
             "is not one of jaxcache's:"]
    lines += [clip(f"  {safe(s.name)}: {safe(s.why)}", LONGEST) for s in skipped]
    return lines


def list_text(scan: Scan) -> str:
    where = safe(scan.directory)
    if not scan.exists:
        return f"no run records: {where} does not exist (jaxcache run creates it)\n"
    runs = [summarize(f) for f in scan.records]
    total = sum(r.size for r in runs)
    lines = [f"{plural(len(runs), 'run record')} in {where}, newest first"
             + (f" ({size(total)} in all)" if runs else "")]
    if runs:
        lines += _table(runs)
    lines += _skipped(scan.skipped)
    return "\n".join(lines) + "\n"


def prune_text(p: PruneResult) -> str:
    where = safe(p.directory)
    verb = "would delete" if p.dry_run else "deleted"
    rules = [f"older than {p.older_than_days:g} days"] if p.older_than_days is not None else []
    if p.keep is not None:
        rules.append(f"beyond the newest {p.keep}")
    lines = [f"{verb} {plural(len(p.deleted), 'run record')} ({size(p.freed_bytes)}) "
             f"{' and '.join(rules)} in {where}; {p.kept} kept"
             + (" (dry run: nothing was deleted)" if p.dry_run else "")]
    if p.deleted:
        lines += _table(list(p.deleted))
    if p.changed:
        lines.append(f"left alone: {plural(len(p.changed), 'record')} replaced while "
                     "pruning: " + ", ".join(safe(n) for n in p.changed))
    lines += _skipped(p.skipped)
    return "\n".join(lines) + "\n"


def _pct(part: int, whole: int, of: str = "") -> str:
    return f" ({part / whole:.0%}{of})" if whole else ""


def _counted(s: Stats) -> list[str]:
    """What was counted, first: which records, of which cache, since when."""
    span = f" from {s.first} to {s.last}" if s.records else ""
    named = [f"  and {plural(len(s.record_files), 'file')} named with --record"] \
        if s.record_files else []
    if s.cache is None:
        return [f"{plural(s.records, 'run record')} in {safe(s.directory)}{span}", *named]
    since = f", since {s.since} (zeroed)" if s.since is not None else ""
    return [f"{plural(s.records, 'run')} that used {safe(s.cache)}{since}{span}",
            f"counted from: records in {safe(s.directory)}", *named]


def stats_text(s: Stats) -> str:
    rows = [
        ("runs", str(s.records)),
        ("compile requests", str(s.compile_requests)),
        ("  hits", f"{s.hits}{_pct(s.hits, s.hits + s.cacheable_misses, ' of cacheable')}"),
        ("  misses", f"{s.cacheable_misses}"
                     f"{_pct(s.cacheable_misses, s.hits + s.cacheable_misses, ' of cacheable')}"),
        ("  uncacheable", f"{s.uncacheable} (JAX wrote none of them: its thresholds, or not "
                          "cacheable)"),
        ("entries written", str(s.written)),
        ("seconds compiling", f"{s.compile_s:.2f} s"),
        ("seconds loading from cache", f"{s.load_s:.2f} s"),
        ("estimated seconds saved",
         f"{s.saved_s:.2f} s over {plural(s.hits_estimated, 'hit')}"),
    ]
    if s.cache is not None and s.entries is not None:
        rows.append(("cache entries", f"{s.entries}"
                     + (f" ({size(s.bytes)})" if s.bytes is not None else "")
                     + f" after the run of {s.entries_when}"))
    width = max(len(k) for k, _ in rows)
    lines = _counted(s)
    lines += [f"{k.ljust(width)}  {v}" for k, v in rows]
    lines += wrap(f"saved is estimated: {s.how_saved}"
                        + (f"; {plural(s.hits_unknown, 'hit')} of keys no other record "
                           "compiled are not counted" if s.hits_unknown else ""), "")
    if s.skipped_files:
        lines.append(f"left out: {plural(s.skipped_files, 'file')} named like a run "
                     "record that is not one (jaxcache records list names them)")
    return "\n".join(lines) + "\n"


def _head(kind: str) -> dict[str, object]:
    return envelope(f"records-{kind}")


def _run_json(r: RunSummary) -> dict[str, object]:
    d = asdict(r)
    d["argv"] = list(r.argv)
    return d


def _skipped_json(skipped: tuple[Skipped, ...]) -> list[dict[str, object]]:
    return [{"name": s.name, "why": s.why} for s in skipped]


def list_json(scan: Scan) -> str:
    return jsonout.document({**_head("list"), "directory": scan.directory, "exists": scan.exists,
                  "records": [_run_json(summarize(f)) for f in scan.records],
                  "skipped": _skipped_json(scan.skipped)})


def prune_json(p: PruneResult) -> str:
    return jsonout.document({**_head("prune"), "directory": p.directory, "dry_run": p.dry_run,
                  "older_than_days": p.older_than_days, "keep": p.keep,
                  "deleted": [_run_json(r) for r in p.deleted], "kept": p.kept,
                  "freed_bytes": p.freed_bytes, "changed": list(p.changed),
                  "skipped": _skipped_json(p.skipped)})


def stats_json(s: Stats) -> str:
    d = asdict(s)
    d["record_files"] = list(s.record_files)
    return jsonout.document({**_head("stats"), **d})


FORMATS: dict[str, dict[str, Callable[..., str]]] = {
    "text": {"list": list_text, "prune": prune_text, "stats": stats_text},
    "json": {"list": list_json, "prune": prune_json, "stats": stats_json},
}
