"""`jaxcache run`'s format: the one-screen summary it prints after the program ends (on stderr;
the record itself is the JSON, written by the run: docs/run-record.md)."""

from __future__ import annotations

from jaxcache.report.style import origin_counts
from jaxcache.text import plural, safe, size

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.values import JsonObject

_REASONS = {
    "compile-time-below-threshold": "not written: below the {threshold_s:.2f} s compile-time "
                                    "threshold",
    "entry-size-below-threshold": "entry {entry_bytes} B < {threshold_bytes} B threshold",
    "not-process-0": "only process 0 writes",
    "host-callbacks": "uses host callbacks (never written on JAX <= 0.10; 0.11 caches them)",
    "cache-disabled-or-uninitialized": "cache disabled or not initialized",
    "no-cache-key": "JAX did not consult the cache (dir unset or cache disabled)",
    "not-written-unexplained": "missed and not written; JAX logged no reason",
    "read-error": "error reading the entry",
    "file-exists-at-key": "a file already sits at this key and JAX keeps it (first writer "
                          "wins); if it could not be read, it blocks this key: jaxcache explain",
    "max-size": "larger than jax_compilation_cache_max_size",
    "write-error": "error writing the entry",
    "sealed-read-only": "not written: a read-only consumer of a sealed cache (no signing key, "
                        "no --local directory)",
    "sealed-rejected": "the entry at this key was rejected (see above) and compiled again; "
                       "a read-only consumer keeps it nowhere",
    "dir-refused": "JAX was pointed at {cache_dir}, which jaxcache refused: nothing loaded "
                   "or written there",
    "compile-unfinished": "still compiling when the process ended",
    "waiting-for-process": "waiting for process {process_index} to publish its executable "
                           "(jax_share_binary_between_hosts) when the process ended",
    "sealed-blocked": "cannot publish: a rejected file occupies this key and is never "
                      "replaced; check it with `jaxcache verify`, then remove it yourself",
}


def reason_text(m: JsonObject) -> str:
    reason = m.get("reason")
    if not reason:
        return ""
    reason = str(reason)
    template = _REASONS.get(reason, reason)
    try:
        return template.format(**(m.get("reason_detail") or {}))
    except (KeyError, ValueError):
        return reason


def _secs(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f} s"


def _other_dirs(doc: JsonObject) -> list[str]:
    """What must be read first: JAX used (or was refused) a directory nobody audited, or the
    guard that keeps it from doing so could not be installed."""
    from jaxcache.records import used_dirs

    lines = [f"WARNING: {used_dirs.describe(e)}" for e in used_dirs.unaudited(doc)]
    for g in doc.get("cache_guard_errors") or []:
        lines.append(f"WARNING: process {g.get('pid')}: jaxcache could not guard which "
                     f"directory JAX loads from ({safe(str(g.get('error')))}); its persistent "
                     "cache was turned off")
    return lines


def _rank_warnings(doc: JsonObject) -> list[str]:
    """A rank whose view of the cache differs, or that no probe saw (rank_views.py)."""
    ranks = doc.get("ranks") or {}
    lines = [f"WARNING: {safe(p['text'])}" for p in ranks.get("problems") or []]
    if lines:
        lines.append(f"  what to do: {ranks.get('remedy')}")
    return lines


def _who(proc: JsonObject, rank: int | None) -> str:
    ident = proc.get("identity") or {}
    launcher = ident.get("launcher") or {}
    where = f"pid {proc.get('pid') or (proc.get('process') or {}).get('pid')}, host " \
            f"{safe(str(ident.get('host')))}"
    if launcher.get("kind") == "slurm":
        where += f", slurm job {safe(str(launcher.get('job_id')))} step " \
                 f"{safe(str(launcher.get('step_id')))}"
    elif launcher.get("kind"):
        where += f", {launcher['kind']} rank {launcher.get('rank')}"
    return f"rank {rank if rank is not None else '?'} ({where})"


SHOWN = 12  # modules listed per process, slowest first, besides those over SIGNIFICANT
SIGNIFICANT = 0.05  # a module with this share of the process's compile and load time is shown


OTHER_BUILD_HIT = "loaded an entry written by another build on this host"


def _other_build(doc: JsonObject) -> set[str]:
    """The entries (names as the record writes them) of yours that another build wrote,
    as the audit before the job found them (trust/provenance/origin.py's built())."""
    origin = (doc.get("cache_dir") or {}).get("origin") or {}
    return {str(e.get("name")) for e in origin.get("other_build") or []}


def _module_lines(doc: JsonObject, verbose: bool = False) -> list[str]:
    """One line per module, slowest first, each with its rank; grouped by rank when there is
    more than one. Every module with SIGNIFICANT of the time is shown, the rest up to SHOWN
    (all with --verbose); where names repeat (five `jit__normal`) its input shapes tell them
    apart."""
    from jaxcache.records.reading import processes, rank_of
    from jaxcache.report import style

    procs = [(rank_of(p), p) for p in processes(doc) if p.get("modules")]
    procs.sort(key=lambda rp: (rp[0] is None, rp[0] or 0))
    multi = ((doc.get("ranks") or {}).get("expected") or 1) > 1  # a single process: no tag
    ranked = any(r is not None for r, _ in procs) and (multi or len({r for r, _ in procs}) > 1)
    grouped = len({r for r, _ in procs}) > 1 and ranked
    width = max((len(m["name"]) for _, p in procs for m in p["modules"]), default=10)
    lines: list[str] = []
    limit = SHOWN if not grouped else max(4, SHOWN // len(procs))
    pad = "  " if grouped else ""
    for rank, p in procs:
        if grouped:
            lines.append(f"  {_who(p, rank)}: {len(p['modules'])} modules")
        mods = sorted(p["modules"], key=lambda m: -(m.get("compile_or_load_s") or 0.0))
        total = sum(m.get("compile_or_load_s") or 0.0 for m in mods)
        shown = [m for i, m in enumerate(mods) if verbose or i < limit
                 or (total > 0 and (m.get("compile_or_load_s") or 0.0) >= SIGNIFICANT * total)]
        names: dict[str, int] = {}
        for m in shown:
            names[m["name"]] = names.get(m["name"], 0) + 1
        other = _other_build(doc)
        for m in shown:
            entry = f"  {size(m['entry_bytes'])}" if m.get("entry_bytes") else ""
            what = "load" if m["outcome"] == "hit" else "compile"
            tag = f"r{rank} " if ranked else ""
            why = OTHER_BUILD_HIT if m["outcome"] == "hit" and m.get("cache_key") and \
                safe(f"{m['cache_key']}-cache") in other else reason_text(m)
            lines.append(f"  {pad}{tag}{safe(m['name']).ljust(width)}  "
                         f"{(m['outcome'] or '?'):8s} {what} {_secs(m['compile_or_load_s'])}"
                         f"{entry}  {why}".rstrip())
            if names[m["name"]] > 1:
                lines.append(f"  {pad}    inputs: {style.shapes(m.get('input_shapes'))}")
        rest = mods[len(shown):]  # sorted slowest first: what is shown is a prefix
        if rest:
            secs = sum(m.get("compile_or_load_s") or 0.0 for m in rest)
            lines.append(f"  {pad}... {len(rest)} more, {secs:.2f} s in all, each under "
                         f"{SIGNIFICANT:.0%} of the time (-v lists them; the record has all)")
    return lines


def render_text(doc: JsonObject, record_path: str, verbose: bool = False) -> str:
    """The summary; `verbose` lists every module, not only the slowest and the significant."""
    p = doc["process"]
    status = f"exit {p['exit_code']}" if p["signal"] is None else f"killed by signal {p['signal']}"
    lines = [f"UNVERIFIED: {safe(doc['unverified'])}"] if doc.get("unverified") else []
    lines += _other_dirs(doc)
    lines += _rank_warnings(doc)
    lines += [f"jaxcache run: {safe(' '.join(doc['argv']))} -> {status} in {p['wall_s']:.2f} s "
             f"(user {p['user_s']:.2f} s, sys {p['sys_s']:.2f} s, "
             f"peak RSS {size(p['peak_rss_bytes'])})"]
    c = doc["cache_dir"]
    before, after = c["before"]["entries"], c["after"]["entries"]
    if before is None or after is None:  # a listing failed: unknown, never 0
        why = c["after"].get("unknown") or c["before"].get("unknown") or "not listed"
        counted = f"{after} after" if after is not None else "unknown after"
        lines.append(f"cache {c['path']} ({c['verdict']}): entries "
                     f"{'unknown' if before is None else before} before, {counted} ({safe(why)})")
    else:
        lines.append(f"cache {c['path']} ({c['verdict']}): entries {before} before, {after} "
                     f"after ({after - before:+d}, {size(c['after']['bytes'])})")
    named = c.get("namespace")
    if named:  # --namespace fingerprint: the path above is <parent>/<id>
        lines.append(f"namespace: {safe(named['kind'])} {safe(named['id'])} of "
                     f"{safe(named['parent'])}: this job read and wrote only there (another "
                     "build or CPU has its own)")
    lines += _origin_lines(c.get("origin"))
    seal = doc.get("seal")
    if seal:
        name = seal.get("signing_key_name")
        signer = (f"signing as key {safe(name)} ({seal['signing_key']})" if name else
                  f"signing as key {seal['signing_key']}") if seal["signing_key"] else \
            "read-only (no signing key)"
        states = [k for k in seal.get("trusted_keys") or [] if k.get("state") != "trusted"]
        shown = "; keys " + ", ".join(
            f"{safe(k['name'] or k['id'])} {safe(k['state'])}" for k in states) if states else ""
        needed = seal.get("signatures_needed") or 1
        shown += f"; {needed} signatures needed per entry" if needed > 1 else ""
        lines.append(f"sealed: {signer}; {plural(len(seal['rejections']), 'entry')} rejected"
                     + shown
                     + (f", {plural(len(seal['write_errors']), 'write')} failed"
                        if seal["write_errors"] else "")
                     + (f", {plural(len(seal['evictions']), 'entry')} evicted (max size)"
                        if seal.get("evictions") else ""))
        from jaxcache.explain import bucket_misses, seal_builds

        lines += [f"  {line}" for line in bucket_misses.lines(seal)]
        lines += [f"  {line}" for line in seal_builds.lines(seal)]
        for r in seal["rejections"][:6]:
            key = safe(r["key"])
            lines.append(f"  rejected {key[:60] + ('…' if len(key) > 60 else '')}: "
                         f"{safe(r['reason'])} "
                         f"(owner {safe(r['owner'])})")
    if not doc["probe"]["loaded"]:
        lines.append(f"probe: {doc['probe']['note']}")
    else:
        from jaxcache.records.reading import all_modules, totals

        modules = [m for _, m in all_modules(doc)]
        t = totals(doc)
        o = t["outcomes"]
        procs = f" in {t['processes']} processes" if t["processes"] > 1 else ""
        ranks = doc.get("ranks") or {}
        if ranks.get("expected") and ranks["expected"] > 1 and ranks.get("per_rank"):
            procs += (f" (rank {', '.join(map(str, ranks.get('seen') or []))} of "
                      f"{ranks['expected']}; each rank records itself)")
        elif ranks.get("expected") and ranks["expected"] > 1:
            procs += (f" (ranks {', '.join(map(str, ranks.get('seen') or [])) or 'none'} of "
                      f"{ranks['expected']} seen)")
        lines.append(f"modules compiled: {t['modules']}{procs} - hits {o.get('hit', 0)}, "
                     f"written {o.get('written', 0)}, skipped {o.get('skipped', 0)}, "
                     f"uncached {o.get('uncached', 0)}, errors {o.get('error', 0)}; "
                     f"compile requests {t['compile_requests']}, misses {t['misses']}"
                     + (f"; cache entries that could not be read: {t['read_errors']}"
                        if t["read_errors"] else ""))
        lines += _module_lines(doc, verbose)
        lines += _threshold_lines(doc, modules)
        compiling = sum(m["compile_or_load_s"] or 0 for m in modules if m["outcome"] != "hit")
        loading = sum(m["compile_or_load_s"] or 0 for m in modules if m["outcome"] == "hit")
        lines.append(f"time: {compiling:.2f} s compiling, {loading:.2f} s loading from the cache")
    lines.append(f"record: {record_path}")
    return "\n".join(lines) + "\n"


def _threshold_lines(doc: JsonObject, modules: list[JsonObject]) -> list[str]:
    """What JAX's write thresholds left uncached, its share of start-up, and whether that is
    material by explain's rule (thresholds.py): said whenever one left a compile out."""
    from jaxcache import thresholds
    from jaxcache.text import wrap

    left = thresholds.of_modules(modules, (doc.get("process") or {}).get("wall_s") or 0.0)
    if not left.modules:
        return []
    return wrap(f"thresholds: {left.sentence(doc.get('argv'))}")


def _origin_lines(origin: JsonObject | None) -> list[str]:
    """Where the entries before the job came from (trust/provenance/origin.py), when not all yours
    or not all of this build."""
    if not origin or not (origin.get("unknown") or origin.get("changed")
                          or origin.get("ledger_problem") or origin.get("other_build")):
        return []
    other = len(origin.get("other_build") or [])
    out = [f"origin of the entries before the job: {origin_counts(origin)}"
           + (f" ({other} of yours written by another build on this host)" if other else "")]
    for f in origin.get("findings") or []:
        if f.get("effect") in ("warning", "unsafe"):
            out.append(f"  warning: {safe(f['message'])}")
            if f.get("remedy"):
                out.append(f"  what to do: {safe(f['remedy'])}")
    return out
