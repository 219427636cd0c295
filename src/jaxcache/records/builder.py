"""The run record (records/run_document.py's RunRecord), built from the probes' documents (read
once into ProbeOutput) and what jaxcache saw of the cache directory before and after the job.

Schema `jaxcache.run/1` is documented in docs/reference/run-record.md. Honest numbers: misses are
compile requests minus hits (JAX's own `cache_misses` event fires only right before a write); on a
hit the compile-or-load time is the load time; JAX's `compile_time_saved_sec` rests on compile time
stored in whole seconds, so it is kept under its own name and never shown as the saving.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, replace

from jaxcache.records import fingerprints, rank_views, used_dirs
from jaxcache.records.probe_output import ProbeOutput
from jaxcache.records.run_document import (
    NO_RANKS,
    SUB_COPIED,
    CacheDirPart,
    CacheOptions,
    Counts,
    Host,
    ModuleEntry,
    Namespace,
    OriginPart,
    ProcessEntry,
    ProcessOutcome,
    RunRecord,
    SealPart,
    StartTimes,
    in_record_order,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from jaxcache.probe.runner import Outcome
    from jaxcache.records.dir_snapshot import DirSnapshot
    from jaxcache.records.probe_output import ProbeModule, ProbeSeal
    from jaxcache.records.run_document import Rejection

    # what each process entry reads from the record as a whole: ProcessEntry's options,
    # env_cache_dir, xla_flags, cache_path and sealed_rejections
    Shared = tuple[CacheOptions, str | None, object, str | None, tuple[Rejection, ...]]



@dataclass(frozen=True, slots=True)
class RunAudit:
    """What `jaxcache run` adds to its record beyond the probes' documents: its audit's word on
    where the entries before the job came from, the cache's namespace, the policy every other
    directory JAX used is audited by after the job, and whether the user allowed a JAX outside
    the supported lines (--unverified-jax)."""

    origin: Mapping[str, object] | None
    namespace: Namespace | None
    policy: str | None
    unverified_allowed: bool


def env_snapshot(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in sorted(env.items())
            if k.startswith(("JAX_", "XLA_PYTHON_CLIENT"))
            or k in ("XLA_FLAGS", "LIBTPU_INIT_ARGS", "TF_CPP_MIN_LOG_LEVEL")}


def _counts(probe: ProbeOutput, outcomes_judged: list[str | None]) -> Counts:
    """Counts from the modules as finally judged (a 'written' JAX logged may be a kept file)."""
    raw = probe.counts
    outcomes: dict[str, int] = {}
    for word in outcomes_judged:
        key = word or "unknown"
        outcomes[key] = outcomes.get(key, 0) + 1
    read_errors = sum(1 for m in probe.modules if m.read_error)
    return Counts(len(probe.modules), raw.compile_requests, raw.hits,
                  raw.compile_requests - raw.hits, read_errors, tuple(outcomes.items()),
                  raw.writes, raw.task_disabled_cache)


def _judged(m: ProbeModule, seal: ProbeSeal | None, before: DirSnapshot,
            after: DirSnapshot) -> dict[str, object]:
    """The record's module (ModuleEntry.raw): the probe's, verbatim, with what JAX's word
    turned out to mean once the sealed backend and the directory are known."""
    out = dict(m.raw)
    key = m.cache_key
    if m.in_progress:  # the process ended (killed, hung) inside this compile
        out["outcome"] = "in-progress"
        out["reason"] = "waiting-for-process" if m.waiting else "compile-unfinished"
        out["reason_detail"] = {"process_index": m.waiting_process_index} \
            if m.waiting else None
        return out
    outcome = m.outcome
    if outcome == "miss":  # JAX said miss, then neither wrote nor said why not
        outcome = out["outcome"] = "skipped"
        out["reason"] = "not-written-unexplained"
    if m.dir_refused:  # the guard's cache: no read, no write
        out["outcome"] = "skipped"
        out["reason"] = "dir-refused"
        out["reason_detail"] = {"cache_dir": m.cache_dir}
        return out
    sealed_writes = {k: (d, n) for k, d, n in seal.writes} if seal is not None else {}
    written = sealed_writes.get(key) if key is not None else None
    if written is not None:  # the sealed backend wrote it, maybe to the local tier: its size
        outcome = out["outcome"] = "written"  # is what it wrote there, whatever the shared
        out["written_to"] = written[0]  # directory holds at that key
        if written[1] is not None:
            out["entry_bytes"] = written[1]
            return out
    elif seal is not None and outcome == "written":  # JAX tried; the sealed backend did not
        outcome = out["outcome"] = "skipped"
        rejected = key is not None and key in seal.rejected
        if seal.publisher:  # a publisher: something already holds the name
            out["reason"] = "sealed-blocked" if rejected else "file-exists-at-key"
        else:
            out["reason"] = "sealed-rejected" if rejected else "sealed-read-only"
    elif outcome == "written" and key and before.holds(f"{key}-cache"):
        # JAX said it wrote, but LRUCache.put returns silently when the file exists
        outcome = out["outcome"] = "skipped"
        out["reason"] = "file-exists-at-key"
    loaded = seal.loads.get(key) if seal is not None and key is not None else None
    if loaded is not None and outcome == "hit":  # what was loaded, from the tier it came from
        out["loaded_from"] = loaded[0]
        out["entry_bytes"] = loaded[1]
    elif key and (size := after.size(f"{key}-cache")) is not None:
        out["entry_bytes"] = size
    return out


def _process(p: ProbeOutput, before: DirSnapshot, after: DirSnapshot, shared: Shared, *,
             main: int | None = None, record: ProcessEntry | None = None) -> ProcessEntry:
    """One process's entry: its probe's words, its modules judged, its counts, what it reads
    from the record as a whole (`shared`); `main`: the job's pid, for the main process;
    `record`: for a subprocess, the main process's entry."""
    seal = p.seal if p.seal is not None and p.seal.raw else None
    modules = tuple(ModuleEntry.from_json(_judged(m, seal, before, after)) for m in p.modules)
    copied: dict[str, object] = {
        "versions": p.versions, **fingerprints.record_fields(p), "identity": p.identity,
        "cache_view": p.cache_view, "platform": p.platform}
    counts = _counts(p, [m.outcome_word for m in modules])
    if record is not None:  # a subprocess: its own entry, in the record's (`record`: its main)
        return ProcessEntry(p.pid, p.pid, True, p.argv, copied, modules, counts, *shared,
                            {k: v for k, v in record.copied.items() if k in SUB_COPIED})
    copied["cache_options_at_first_compile"] = p.cache_options
    copied["env_cache_dir_at_first_compile"] = p.env_cache_dir
    return ProcessEntry(main, None, False, None, copied, modules, counts, *shared)


def _unverified(versions: Iterable[str | None]) -> str | None:
    """`unverified`: why jaxcache cannot vouch for a record whose processes ran these JAX
    versions (one outside the supported lines), or None."""
    from jaxcache.jaxcompat.versions import why_unverified

    return next((r for r in map(why_unverified, versions) if r), None)


NO_PROBE_NOTE = ("no probe data: the program never imported jax, is not Python, ran Python "
                 "with -S/-I, was killed before its first compile, or its probe could not "
                 "write (a full or removed temporary folder?)")


def build(outcome: Outcome, *, cache_dir: str, verdict: str, before: DirSnapshot,
          after: DirSnapshot, env: dict[str, str], cwd: str,
          run: RunAudit | None = None) -> RunRecord:
    """The record. `run`: what `jaxcache run` adds (the other directories JAX used are
    audited then, and `unverified` is said); without it, a record as bench and explain make
    it."""
    parsed = {id(p): ProbeOutput.from_json(p) for p in outcome.probes}  # each read once
    probes = [parsed[id(p)] for p in in_record_order(outcome.probes, outcome.pid)]
    main = probes[0] if probes else ProbeOutput.from_json({})  # no probe: nothing said
    new_files = [] if before.unknown or after.unknown or after is before else \
        sorted(set(after.entries) - set(before.entries))
    seal = main.seal.raw if main.seal else None
    sealed = SealPart.from_json(seal) if seal else None
    kept = env_snapshot(env)
    shared: Shared = (CacheOptions.from_json(main.cache_options or {}), main.env_cache_dir,
                      kept.get("XLA_FLAGS"), cache_dir, sealed.rejections if sealed else ())
    first = _process(main, before, after, shared, main=outcome.pid)
    uname = os.uname()
    origin = run.origin if run is not None else None
    record = RunRecord(
        tuple(outcome.argv), None,
        ProcessOutcome(outcome.exit_code, outcome.signal, round(outcome.wall_s, 6),
                       round(outcome.user_s, 6), round(outcome.sys_s, 6),
                       outcome.peak_rss_bytes, outcome.pid),
        CacheDirPart(cache_dir, verdict, before.summary(), after.summary(),
                     run.namespace if run is not None else None, origin, cache_dir,
                     OriginPart.from_json(origin) if origin is not None else None,
                     tuple((n, after.entries[n]) for n in new_files)),
        bool(probes), None if probes else NO_PROBE_NOTE, NO_RANKS,
        (first, *(_process(p, before, after, shared, record=first) for p in probes[1:])),
        tuple((p.pid, p.guard_error) for p in parsed.values() if p.guard_failed),
        seal, sealed, True,
        used_dirs.collect(parsed.values(), cache_dir), kept, False,
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), cwd,
        Host(uname.sysname, uname.release, uname.machine, uname.nodename, sys.executable,
             ".".join(map(str, sys.version_info[:3]))),
        StartTimes(None, None, main.started, main.import_jax_started, main.import_jax_s,
                   main.now, main.final), main.warnings)
    record = replace(record, ranks=rank_views.check(record, env))
    if run is None:
        return record
    return replace(record, jax_cache_dirs=used_dirs.judge(record.jax_cache_dirs, run.policy),
                   unverified=_unverified([main.jax] + [p.jax for p in probes[1:]]),
                   unverified_allowed=run.unverified_allowed, by_run=True)
