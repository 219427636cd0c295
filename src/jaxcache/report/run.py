"""`jaxcache run`'s format: the one-screen summary it prints after the program ends (on stderr;
the record itself is the JSON, written by the run: docs/reference/run-record.md)."""

from __future__ import annotations

from jaxcache.records.run_document import ModuleOutcome
from jaxcache.report.style import origin_counts
from jaxcache.text import plural, safe, size

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.records.run_document import (
        ModuleEntry,
        OriginPart,
        PrefetchPart,
        ProcessEntry,
        RunRecord,
        SealPart,
    )

_REASONS = {
    "compile-time-below-threshold": "not written: below the {threshold_s:g} s compile-time "
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


def reason_text(m: ModuleEntry) -> str:
    """A module's reason as the summary says it; its details (a directory, a count) are the
    record's raw values, escaped here where they are shown."""
    if not m.reason:
        return ""
    template = _REASONS.get(m.reason, m.reason)
    try:
        text = template.format(**{k: safe(v) if isinstance(v, str) else v
                                  for k, v in m.reason_detail.items()})
    except (KeyError, ValueError):
        return safe(m.reason)
    if m.reason == "write-error":  # the cause, in the row: not only in JAX's warning above
        said = " ".join([m.detail.message or "", *m.error_messages])
        text += next((f": {cause}" for errno_text, cause in _WRITE_CAUSES
                      if errno_text in said), "")
    return text


# what an OSError's text says, and the cause a write-error row names (the rest: JAX's warning)
_WRITE_CAUSES = (("No space left on device", "the disk is full (no space left on device)"),
                 ("Disk quota exceeded", "over the disk quota"),
                 ("Read-only file system", "a read-only filesystem"),
                 ("Permission denied", "permission denied"))


def _secs(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f} s"


def _cut(v: float) -> str:
    """Seconds cut to two decimals (never rounded up to a threshold they are below)."""
    import math

    return f"{math.floor(v * 100 + 1e-9) / 100:.2f}"


def shown_s(m: ModuleEntry) -> float | None:
    """The seconds a module's row shows: its load on a hit, else the compile every report
    shows (ModuleEntry.compile_s, as explain)."""
    return m.compile_or_load_s if m.hit else m.compile_s


def _shown_or_0(m: ModuleEntry) -> float:
    return shown_s(m) or 0.0


def _row(name: str, word: str, group: list[ModuleEntry], width: int, why: str) -> str:
    """A module's row, or one row for modules alike here: the range of their seconds (each,
    beside the reason it is judged by: a threshold compares one compile, never a sum), their
    entries added up, how many, and their seconds added up."""
    first = group[0]
    what = ("load from the local tier" if first.loaded_from == "local" else "load") \
        if first.hit else "compile"
    times = [t for t in map(shown_s, group) if t is not None]
    secs = _secs(sum(times) if times else None)
    total = sum(m.entry_bytes or 0 for m in group)
    entry = f"  {size(total)}" if total else ""
    count = ""
    # below a threshold, a time is cut, not rounded: 0.199 s under 0.2 s reads 0.19, never 0.20
    below = first.reason == "compile-time-below-threshold"
    each = _cut if below else (lambda v: f"{v:.2f}")
    if len(group) > 1:
        low, high = (each(min(times)), each(max(times))) if times else ("-", "-")
        count = f"  (x{len(group)} alike here, {secs} added up; the record has each)"
        secs = f"{low} s each" if low == high else f"{low} to {high} s each"
    elif below and times:
        secs = f"{each(times[0])} s"
    return (f"{safe(name).ljust(width)}  {safe(word):8s} {what} {secs}{entry}  {why}".rstrip()
            + count)


def _other_dirs(record: RunRecord) -> list[str]:
    """What must be read first: JAX used (or was refused) a directory nobody audited, or the
    guard that keeps it from doing so could not be installed."""
    from jaxcache.records import used_dirs

    lines = [f"WARNING: {used_dirs.describe(e)}" for e in used_dirs.unaudited(record)]
    for pid, error in record.guard_errors:
        lines.append(f"WARNING: process {pid}: jaxcache could not guard which "
                     f"directory JAX loads from ({safe(str(error))}); its persistent "
                     "cache was turned off")
    return lines


def _rank_warnings(record: RunRecord) -> list[str]:
    """A rank whose view of the cache differs, or that no probe saw (rank_views.py)."""
    lines = [f"WARNING: {safe(p.text)}" for p in record.ranks.problems]
    if lines:
        lines.append(f"  what to do: {record.ranks.remedy}")
    return lines


def _who(proc: ProcessEntry) -> str:
    launcher = proc.launcher
    where = f"pid {proc.pid}, host {safe(str(proc.host))}"
    if launcher is not None and launcher.kind == "slurm":
        where += f", slurm job {safe(str(launcher.job_id))} step {safe(str(launcher.step_id))}"
    elif launcher is not None and launcher.kind:
        where += f", {launcher.kind} rank {launcher.rank}"
    return f"rank {proc.rank if proc.rank is not None else '?'} ({where})"


SHOWN = 12  # modules listed per process, slowest first, besides those over SIGNIFICANT
SIGNIFICANT = 0.05  # a module with this share of the process's compile and load time is shown


OTHER_BUILD_HIT = "loaded an entry written by another build on this host"
KEPT_LOCALLY = "kept in the local tier (unsigned, trusted as yours)"


def _other_build(record: RunRecord) -> set[str]:
    """The entries (names as the record writes them) of yours that another build wrote,
    as the audit before the job found them (trust/provenance/origin.py's built())."""
    origin = record.cache_dir.origins
    return set(origin.other_build) if origin is not None else set()


def _module_lines(record: RunRecord, verbose: bool = False) -> list[str]:
    """One line per module, slowest first, each with its rank; grouped by rank when there is
    more than one. Every module with SIGNIFICANT of the time is shown, the rest up to SHOWN
    (all with --verbose); where names repeat (five `jit__normal`) its input shapes tell them
    apart."""
    from jaxcache.report import style

    procs = sorted((p for p in record.processes if p.modules),
                   key=lambda p: (p.rank is None, p.rank or 0))
    multi = (record.ranks.expected or 1) > 1  # a single process: no tag
    ranks = {p.rank for p in procs}
    ranked = any(r is not None for r in ranks) and (multi or len(ranks) > 1)
    grouped = len(ranks) > 1 and ranked
    width = max((len(m.name) for p in procs for m in p.modules), default=10)
    lines: list[str] = []
    limit = SHOWN if not grouped else max(4, SHOWN // len(procs))
    pad = "  " if grouped else ""
    other = _other_build(record)
    local = _kept_locally(record)
    for p in procs:
        if grouped:
            lines.append(f"  {_who(p)}: {len(p.modules)} modules")
        mods = sorted(p.modules, key=lambda m: -_shown_or_0(m))  # by the seconds shown
        total = sum(map(_shown_or_0, mods))
        shown = [m for i, m in enumerate(mods) if verbose or i < limit
                 or (total > 0 and _shown_or_0(m) >= SIGNIFICANT * total)]
        names: dict[str, int] = {}
        for m in shown:
            names[m.name] = names.get(m.name, 0) + 1
        # modules alike in every word but their numbers (name, outcome, reason, inputs: five
        # `jit__normal` of one key and several output shapes): one row with the whole count
        alike: dict[tuple[str, ...], list[ModuleEntry]] = {}
        for m in shown:
            why = OTHER_BUILD_HIT if m.hit and m.cache_key and \
                f"{m.cache_key}-cache" in other else \
                KEPT_LOCALLY if not m.hit and m.cache_key in local else reason_text(m)
            inputs = f"  {pad}    inputs: {style.shapes(m.input_shapes)}" \
                if names[m.name] > 1 else ""
            alike.setdefault((m.name, m.outcome_word or "?", why, inputs), []).append(m)
        groups = sorted(alike.items(), key=lambda kv: -sum(map(_shown_or_0, kv[1])))
        for (name, word, why, inputs), group in groups:  # slowest first, as added up
            tag = f"r{p.rank} " if ranked else ""
            lines += [f"  {pad}{tag}{_row(name, word, group, width, why)}",
                      *([inputs] if inputs else [])]
        rest = mods[len(shown):]  # sorted slowest first: what is shown is a prefix
        if rest:
            secs = sum(map(_shown_or_0, rest))
            lines.append(f"  {pad}... {len(rest)} more, {secs:.2f} s in all, each under "
                         f"{SIGNIFICANT:.0%} of the time (-v lists them; the record has all)")
    return lines


def render_text(record: RunRecord, record_path: str, verbose: bool = False) -> str:
    """The summary; `verbose` lists every module, not only the slowest and the significant."""
    p = record.process
    status = f"exit {p.exit_code}" if p.signal is None else f"killed by signal {p.signal}"
    lines = [f"UNVERIFIED: {safe(record.unverified)}"] if record.unverified else []
    if record.sealed and record.sealed.identity_rejected:  # said first, once
        lines.append(f"WARNING: {safe(record.sealed.identity_rejected)}")
    lines += _other_dirs(record)
    lines += _rank_warnings(record)
    lines += [f"jaxcache run: {safe(' '.join(record.argv))} -> {status} in {p.wall_s:.2f} s "
              f"(user {p.user_s:.2f} s, sys {p.sys_s:.2f} s, "
              f"peak RSS {size(p.peak_rss_bytes)})"]
    c = record.cache_dir
    before, after = c.before.entries, c.after.entries
    if before is None or after is None:  # a listing failed: unknown, never 0
        why = c.after.unknown or c.before.unknown or "not listed"
        counted = f"{after} after" if after is not None else "unknown after"
        lines.append(f"cache {safe(c.path)} ({c.verdict}): entries "
                     f"{'unknown' if before is None else before} before, {counted} ({safe(why)})")
    else:
        lines.append(f"cache {safe(c.path)} ({c.verdict}): entries {before} before, {after} "
                     f"after ({after - before:+d}, {size(c.after.bytes or 0)})")
    named = c.namespace
    if named:  # --namespace fingerprint: the path above is <parent>/<id>
        lines.append(f"namespace: {safe(named.kind)} {safe(named.id)} of "
                     f"{safe(named.parent)}: this job read and wrote only there (another "
                     "build or CPU has its own)")
    lines += _origin_lines(c.origins)
    if record.sealed:
        lines += _seal_lines(record.sealed)
    if not record.probe_loaded:
        lines.append(f"probe: {record.probe_note}")
    else:
        modules = record.modules
        t = record.totals
        procs = f" in {len(record.processes)} processes" if len(record.processes) > 1 else ""
        ranks = record.ranks
        seen = ", ".join(map(str, ranks.seen))
        if ranks.expected and ranks.expected > 1 and ranks.per_rank:
            procs += f" (rank {seen} of {ranks.expected}; each rank records itself)"
        elif ranks.expected and ranks.expected > 1:
            procs += f" (ranks {seen or 'none'} of {ranks.expected} seen)"
        o = t.outcome
        lines.append(f"modules compiled: {t.modules}{procs} - hits {o(ModuleOutcome.HIT)}, "
                     f"written {o(ModuleOutcome.WRITTEN)}, skipped {o(ModuleOutcome.SKIPPED)}, "
                     f"uncached {o(ModuleOutcome.UNCACHED)}, errors {o(ModuleOutcome.ERROR)}; "
                     f"compile requests {t.compile_requests}, misses {t.misses}"
                     + (f"; cache entries that could not be read: {t.read_errors}"
                        if t.read_errors else ""))
        lines += _module_lines(record, verbose)
        lines += _threshold_lines(record)
        compiling = sum(m.seconds for m in modules if not m.hit)
        loading = sum(m.seconds for m in modules if m.hit)
        lines.append(f"time: {compiling:.2f} s compiling, {loading:.2f} s loading from the cache")
    lines.append(f"record: {safe(record_path)}")
    return "\n".join(lines) + "\n"


def _seal_lines(seal: SealPart) -> list[str]:
    """A sealed run's signer, rejections, failed writes and evictions (lifecycle/sealing.py's
    summary)."""
    from jaxcache.explain import bucket_misses, seal_builds

    name = seal.signing_key_name
    signer = (f"signing as key {safe(name)} ({seal.signing_key})" if name else
              f"signing as key {seal.signing_key}") if seal.signing_key else \
        "read-only (no signing key)"
    if seal.signing_identity is not None:
        signer = f"signing keyless as identity {safe(seal.signing_identity)}"
    if seal.generation is not None:
        signer = f"reading generation {safe(seal.generation)}"
    elif seal.generation_refused is not None:
        signer = f"no generation read ({safe(seal.generation_refused)})"
    states = [k for k in seal.trusted_keys if k.state != "trusted"]
    shown = "; keys " + ", ".join(
        f"{safe(str(k.name or k.id))} {safe(str(k.state))}" for k in states) if states else ""
    needed = seal.signatures_needed
    shown += f"; {needed} signatures needed per entry" if needed > 1 else ""
    lines = [f"sealed: {signer}; {plural(len(seal.rejections), 'entry')} rejected"
             + shown
             + "".join(f", {w}" for w in _written(seal))
             + (f", {plural(seal.write_errors, 'write')} failed"
                if seal.write_errors else "")
             + (f", {plural(seal.evictions, 'entry')} evicted (max size)"
                if seal.evictions else "")]
    lines += [f"  {line}" for line in bucket_misses.lines(seal)]
    if seal.prefetch is not None:
        lines.append(f"  {_prefetch_line(seal.prefetch)}")
    lines += [f"  {line}" for line in seal_builds.lines(seal)]
    lines += [f"  {line}" for line in _other_keys(seal)]
    for r in seal.rejections[:6]:
        key = safe(str(r.key))
        lines.append(f"  rejected {key[:60] + ('…' if len(key) > 60 else '')}: "
                     f"{safe(str(r.reason))} "
                     f"(owner {safe(str(r.owner))})")
    return lines


def _other_keys(seal: SealPart) -> list[str]:
    """One line when entries were signed by keys this run does not trust: which signed them
    (with whose files those were) and which it trusts. A publisher signing with another key
    than the readers trust looks the same as anyone who can write the directory signing
    with their own, so the line asks for the key's id to be checked, never just trusted."""
    if not seal.rejections:
        return []
    from jaxcache.seal.signing.signature_rule import Status
    from jaxcache.text import some

    signers: dict[str, set[str]] = {}
    for r in seal.rejections:
        if r.status == Status.UNKNOWN_KEY and r.signer:
            signers.setdefault(r.signer, set()).add(r.owner or "?")
    if not signers:
        return []
    signed = some([f"{k} (files of {', '.join(sorted(who))})"
                   for k, who in sorted(signers.items())], 3)  # some() escapes
    trusted = [f"{k.name} ({k.id})" if k.name else str(k.id) for k in seal.trusted_keys
               if k.id and k.state == "trusted"]
    return [f"signed by {'a key' if len(signers) == 1 else 'keys'} this run does not trust: "
            f"{signed}; it trusts "
            + (f"{'key' if len(trusted) == 1 else 'keys'} {some(trusted, 3)}"
               if trusted else "no key")
            + ". If that is your publisher's key, check its id with them before adding it to "
              "your policy; if not, someone else wrote these entries"]


def _prefetch_line(p: PrefetchPart) -> str:
    """What the fetch ahead did, in one line."""
    rest = [f"{p.not_fetched} not fetched" if p.not_fetched else "",
            f"{p.not_found} not found in the cache" if p.not_found else "",
            f"{p.failed} failed" if p.failed else "",
            f"{p.rejected} rejected" if p.rejected else ""]
    return (f"prefetched {p.prefetched} of {plural(p.planned, 'entry')} the last run hit: "
            f"{p.used} used, {p.wasted} wasted" + "".join(f", {r}" for r in rest if r)
            + f"; {p.saved_s:.2f} s of fetching not waited for"
            + (f" (not started with the job's import of JAX: {safe(p.early_error)})"
               if p.early_error else ""))


_TIERS = {"local": "the local tier", "shared": "the sealed cache"}


def _written(seal: SealPart) -> list[str]:
    """What the sealed backend wrote, per tier and directory: how many entries and their
    size as written (an entry rejected in the sealed cache and compiled again is kept in the
    local tier: its size is not the rejected file's)."""
    where: dict[tuple[str, str], list[int]] = {}
    for w in seal.writes:
        tier = _TIERS.get(w.tier or "", "")
        where.setdefault((tier, w.directory or ""), []).append(w.bytes or 0)
    return [f"{plural(len(sizes), 'entry')} written to {tier or 'an unknown tier'} "
            f"{safe(directory)} ({size(sum(sizes))})"
            for (tier, directory), sizes in where.items()]


def _kept_locally(record: RunRecord) -> set[str]:
    """The cache keys the sealed backend wrote to its local tier (--local)."""
    seal = record.sealed
    return {w.key for w in seal.writes if w.tier == "local" and w.key} if seal else set()


def _threshold_lines(record: RunRecord) -> list[str]:
    """What JAX's write thresholds left uncached, its share of start-up, and whether that is
    material by explain's rule (thresholds.py): said whenever one left a compile out."""
    from jaxcache import thresholds
    from jaxcache.text import wrap

    left = thresholds.left_out(record.modules, record.process.wall_s)
    if not left.modules:
        return []
    return wrap(f"thresholds: {left.sentence(list(record.argv))}")


def _whose(origin: OriginPart, other: int) -> str:
    """'2 of yours', or '1 of yours and 1 of teamb's' where a trusted writer's ledger vouched
    for some of the entries another build wrote."""
    from jaxcache.trust.provenance.origin import said_whose

    return said_whose({safe(w): n for w, n in origin.other_whose.items()}) \
        if origin.other_whose else f"{other} of yours"


def _origin_lines(origin: OriginPart | None) -> list[str]:
    """Where the entries before the job came from (trust/provenance/origin.py), when not all
    yours or not all of this build: entries a trusted writer's ledger vouched for are said
    with whose."""
    if not origin or not (origin.count("unknown") or origin.count("changed")
                          or origin.count("vouched") or origin.ledger_problem
                          or origin.other_build):
        return []
    other = len(origin.other_build)
    out = ["origin of the entries before the job: "
           f"{origin_counts(dict(origin.counts), origin.vouched_by)}"
           + (f" ({_whose(origin, other)} written by another build on this host)"
              if other else "")]
    for f in origin.findings:
        if f.effect in ("warning", "unsafe"):
            out.append(f"  warning: {safe(f.message)}")
            if f.remedy:
                out.append(f"  what to do: {safe(f.remedy)}")
    return out
