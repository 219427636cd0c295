"""The run record: one JSON document per `jaxcache run`, the data every later step reads.

Schema `jaxcache.run/1` is documented in docs/run-record.md. Honest numbers: misses are compile
requests minus hits (JAX's own `cache_misses` event fires only right before a write); on a hit
the compile-or-load time is the load time; JAX's `compile_time_saved_sec` rests on compile time
stored in whole seconds, so it is kept under its own name and never shown as the saving.
"""

from __future__ import annotations

import os
import sys
import time

from jaxcache.documents.kinds import envelope
from jaxcache.probe.runner import Outcome
from jaxcache.records import fingerprints, rank_views, used_dirs
from jaxcache.records.reading import in_record_order
from jaxcache.text import safe
from jaxcache.trust.kernel.entries import Inventory
from jaxcache.trust.rules.target import is_url
from jaxcache.values import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.documents.claim import Output, Unclaimed
    from jaxcache.values import JsonObject


@frozen
class DirSnapshot:
    path: str
    entries: dict[str, int]  # name -> size (empty when unknown)
    unknown: str | None = None  # why the listing failed: its counts are unknown, never 0
    absent: str | None = None  # why it could not be listed, where that reads as empty (before
    # a job, the directory JAX has yet to make)

    @classmethod
    def of(cls, path: str, inv: Inventory | None) -> DirSnapshot:
        if inv is None:
            return cls(path, {})
        return cls(path, {e.name: e.size for e in inv.entries if e.type == "file"})

    @classmethod
    def at(cls, path: str, *, missing_ok: bool = True) -> DirSnapshot:
        """The directory's files now, through the fd walk; empty if it cannot be listed and
        `missing_ok` (a job may be refused or fail before its cache exists)."""
        from jaxcache.errors import JaxcacheError
        from jaxcache.trust import listing

        if is_url(path):  # a sealed bucket prefix: its objects, or why they are unknown
            objects, why = _bucket_objects(path)
            return cls(path, objects, why)
        try:
            inv, resolved = listing.list_dir(path)
        except JaxcacheError as exc:
            if not missing_ok:
                raise
            return cls(path, {}, absent=str(exc))
        return cls.of(resolved, inv)

    def since(self, before: DirSnapshot) -> DirSnapshot:
        """This listing, taken after a job: a directory that was there before and cannot be
        listed now (removed, renamed or unreadable while the job ran) is unknown, not 0."""
        if self.absent is not None and before.absent is None and before.unknown is None:
            return DirSnapshot(self.path, {}, f"gone or unreadable after the job: "
                                              f"{self.absent}")
        return self

    def summary(self) -> JsonObject:
        if self.unknown is not None:
            return {"entries": None, "files": None, "bytes": None, "unknown": self.unknown}
        return {"entries": sum(1 for n in self.entries if n.endswith("-cache")),
                "files": len(self.entries), "bytes": sum(self.entries.values())}


def _bucket_objects(url: str) -> tuple[dict[str, int], str | None]:
    from jaxcache.errors import JaxcacheError
    from jaxcache.seal.stores import store_for_url as objects
    from jaxcache.trust.rules import target

    try:
        return {o.name: o.size for o in objects.open_store(target.parse_bucket(url)).list()}, None
    except (JaxcacheError, objects.StoreError) as exc:
        return {}, f"the bucket could not be listed: {str(exc)[:300]}"  # shown escaped


def env_snapshot(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in sorted(env.items())
            if k.startswith(("JAX_", "XLA_PYTHON_CLIENT"))
            or k in ("XLA_FLAGS", "LIBTPU_INIT_ARGS", "TF_CPP_MIN_LOG_LEVEL")}


def _counts(probe: JsonObject, modules: list[JsonObject]) -> JsonObject:
    """Counts from the modules as finally judged (a 'written' JAX logged may be a kept file)."""
    raw = probe.get("counts", {})
    requests, hits = raw.get("compile_requests", 0), raw.get("hits", 0)
    outcomes: dict[str, int] = {}
    for m in modules:
        key = m.get("outcome") or "unknown"
        outcomes[key] = outcomes.get(key, 0) + 1
    read_errors = sum(1 for m in modules
                      if any(e.get("kind") == "read-error" for e in m.get("errors") or []))
    return {"modules": len(modules), "compile_requests": requests, "hits": hits,
            "misses": requests - hits, "writes_event": raw.get("writes", 0),
            "task_disabled_cache": raw.get("task_disabled_cache", 0),
            "read_errors": read_errors, "outcomes": outcomes}


def _modules(probe: JsonObject, before: DirSnapshot, after: DirSnapshot) -> list[JsonObject]:
    out = []
    seal = probe.get("seal") or {}
    sealed_writes = {w["key"]: w["directory"] for w in seal.get("writes", [])}
    rejected = {r["key"] for r in seal.get("rejections", [])}
    for m in probe.get("modules", []):
        m = dict(m)
        key = m.get("cache_key")
        if m.get("in_progress"):  # the process ended (killed, hung) inside this compile
            waiting = m.get("waiting_for") or {}
            m["outcome"] = "in-progress"
            m["reason"] = "waiting-for-process" if waiting else "compile-unfinished"
            m["reason_detail"] = {"process_index": waiting.get("process_index")} \
                if waiting else None
            out.append(m)
            continue
        if m.get("outcome") == "miss":  # JAX said miss, then neither wrote nor said why not
            m["outcome"], m["reason"] = "skipped", "not-written-unexplained"
        if m.get("cache_dir_status") == "refused":  # the guard's cache: no read, no write
            m["outcome"], m["reason"] = "skipped", "dir-refused"
            m["reason_detail"] = {"cache_dir": m.get("cache_dir")}
            out.append(m)
            continue
        if key in sealed_writes:  # the sealed backend wrote it, maybe to the local tier
            m["outcome"], m["written_to"] = "written", sealed_writes[key]
        elif seal and m.get("outcome") == "written":  # JAX tried; the sealed backend did not
            m["outcome"] = "skipped"
            if seal.get("signing_key"):  # a publisher: something already holds the name
                m["reason"] = "sealed-blocked" if key in rejected else "file-exists-at-key"
            else:
                m["reason"] = "sealed-rejected" if key in rejected else "sealed-read-only"
        elif m.get("outcome") == "written" and key and f"{key}-cache" in before.entries:
            # JAX said it wrote, but LRUCache.put returns silently when the file exists
            m["outcome"], m["reason"] = "skipped", "file-exists-at-key"
        if key and f"{key}-cache" in after.entries:
            m["entry_bytes"] = after.entries[f"{key}-cache"]
        out.append(m)
    return out


def _by_rank(outcome: Outcome) -> list[JsonObject]:
    return in_record_order(outcome.probes, outcome.pid)


def build(outcome: Outcome, *, cache_dir: str, verdict: str, before: DirSnapshot,
          after: DirSnapshot, env: dict[str, str], cwd: str) -> JsonObject:
    probes = _by_rank(outcome)
    main = probes[0] if probes else None
    main_modules = _modules(main, before, after) if main else []
    new_files = [] if before.unknown or after.unknown else \
        sorted(set(after.entries) - set(before.entries))
    doc: JsonObject = {
        **envelope("run"),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "argv": list(outcome.argv),
        "cwd": safe(cwd),
        "host": {"system": os.uname().sysname, "release": os.uname().release,
                 "machine": os.uname().machine, "node": os.uname().nodename,
                 "runner_python": sys.executable,
                 "runner_python_version": ".".join(map(str, sys.version_info[:3]))},
        "probe": {"loaded": main is not None,
                  "note": None if main is not None else
                  "no probe data: the program never imported jax, is not Python, ran Python "
                  "with -S/-I, or was killed before its first compile"},
        "versions": main.get("jax", {}) if main else {},
        **fingerprints.record_fields(main),
        "identity": (main or {}).get("identity"),
        "cache_view": (main or {}).get("cache_view"),
        "platform": (main or {}).get("platform", {}),
        "cache_options_at_first_compile": (main or {}).get("cache_options_at_first_compile"),
        "env_cache_dir_at_first_compile": (main or {}).get("env_cache_dir_at_first_compile"),
        "env": env_snapshot(env),
        "import_jax_s": (main or {}).get("import_jax_s"),
        "probe_times": {k: (main or {}).get(v) for k, v in (
            ("started", "started"), ("import_jax_started", "import_jax_started"),
            ("last_write", "now"))} | {"final": bool((main or {}).get("final"))},
        "modules": main_modules,
        "counts": _counts(main, main_modules) if main else None,
        "jax_warnings": (main or {}).get("warnings", []),
        "cache_dir": {
            "path": safe(cache_dir), "verdict": verdict,
            "before": before.summary(), "after": after.summary(),
            "new_files": [{"name": safe(n), "bytes": after.entries[n]} for n in new_files],
        },
        "process": {"pid": outcome.pid, "exit_code": outcome.exit_code, "signal": outcome.signal,
                    "wall_s": round(outcome.wall_s, 6), "user_s": round(outcome.user_s, 6),
                    "sys_s": round(outcome.sys_s, 6), "peak_rss_bytes": outcome.peak_rss_bytes},
        "subprocesses": [_subprocess(p, before, after) for p in probes[1:]],
        "seal": main.get("seal") if main else None,
        "jax_cache_dirs": used_dirs.collect(outcome.probes, cache_dir),
        "cache_guard_errors": [{"pid": p.get("pid"), "error": (p.get("cache_guard") or {}).get(
            "error")} for p in outcome.probes if (p.get("cache_guard") or {}).get(
                "installed") is False],
    }
    doc["ranks"] = rank_views.check(doc, env)
    return doc


def mark_unverified(doc: JsonObject, *, allowed: bool) -> None:
    """`unverified`: why jaxcache cannot vouch for this record (the job's JAX is outside the
    supported lines), or None; `unverified_allowed`: the user asked for it (--unverified-jax).
    """
    from jaxcache.jaxcompat.versions import why_unverified

    versions = [doc.get("versions") or {}] + [s.get("versions") or {} for s in
                                               doc.get("subprocesses") or []]
    reasons = [why_unverified(v.get("jax")) for v in versions]
    doc["unverified"] = next((r for r in reasons if r), None)
    doc["unverified_allowed"] = bool(allowed)


def _subprocess(p: JsonObject, before: DirSnapshot, after: DirSnapshot) -> JsonObject:
    modules = _modules(p, before, after)
    return {"pid": p.get("pid"), "argv": p.get("argv"), "identity": p.get("identity"),
            "cache_view": p.get("cache_view"), "versions": p.get("jax", {}),
            **fingerprints.record_fields(p), "counts": _counts(p, modules),
            "platform": p.get("platform", {}),
            "modules": modules}


def capture(argv: list[str], env: dict[str, str], cache_dir: str, *, verdict: str,
            before: DirSnapshot | None = None, missing_ok: bool = True,
            **run_options: object) -> tuple[JsonObject, Outcome]:
    """Run a job with the probe against `cache_dir` and build its record (not yet written):
    the cache directory before, the run itself, the directory after."""
    from jaxcache.probe import runner

    if before is None:
        before = DirSnapshot.at(cache_dir, missing_ok=missing_ok)
    outcome = runner.run(argv, env, **run_options)
    return finish(outcome, cache_dir, verdict=verdict, before=before, env=env,
                  missing_ok=missing_ok), outcome


def finish(outcome: Outcome, cache_dir: str, *, verdict: str, before: DirSnapshot,
           env: dict[str, str], missing_ok: bool = True) -> JsonObject:
    """The record of a run that has ended: the directory after, and everything else."""
    after = DirSnapshot.at(cache_dir, missing_ok=missing_ok).since(before)
    return build(outcome, cache_dir=cache_dir, verdict=verdict, before=before, after=after,
                 env=env, cwd=os.getcwd())


@frozen
class RunResult:
    record: JsonObject
    record_path: str
    outcome: Outcome
    record_error: str | None = None  # the job ran, but its record could not be written

    @property
    def exit_code(self) -> int:
        """`jaxcache run`'s status: the job's own, except that a job which exited 0 after
        JAX was pointed at a directory jaxcache refused or does not trust exits 1, and one
        whose JAX turned out unsupported (without --unverified-jax) exits 2. So does (1) one
        where a rank's view of the cache differs or a rank went unseen (rank_views)."""
        status = self.outcome.status
        if self.record.get("unverified") and not self.record.get("unverified_allowed"):
            return status or 2
        if status == 0 and (used_dirs.failing(self.record) or
                            (self.record.get("ranks") or {}).get("problems")):
            return 1
        return status


def write(doc: JsonObject, out: Output | Unclaimed) -> None:
    """Write the record into its claimed target (an outputs.Output): whole, atomically, never
    over a file that is not ours."""
    import json

    out.write(json.dumps(doc, indent=2) + "\n")


def load(path: str) -> JsonObject:
    """Read a record (through the trusted-input loader), refusing what this version cannot
    understand or what explain could not use."""
    from jaxcache.documents.read import load_record

    return load_record(path)


def load_all(paths: list[str],
             skipped: list[tuple[str, str]] | None = None) -> list[tuple[str, JsonObject]]:
    """Records named on the command line; a directory stands for the records in it (the
    per-rank records of one job: `r.rank0.json`, `r.rank1.json`...), in name order.
    A file named on the command line that cannot be read ends it (exit 2); one found in a
    directory is skipped, (path, why) appended to `skipped`, unless none there can be read."""
    import os

    from jaxcache.errors import JaxcacheError
    from jaxcache.text import safe

    out = []
    for path in paths:
        if os.path.isdir(path):
            names = sorted(n for n in os.listdir(path) if n.endswith(".json"))
            if not names:
                raise JaxcacheError(f"{safe(path)}: a directory with no .json run records in it")
            here, refused = [], []
            for n in names:
                full = os.path.join(path, n)
                try:
                    here.append((full, load(full)))
                except JaxcacheError as exc:
                    refused.append((full, str(exc).splitlines()[0]))
            if not here:
                raise JaxcacheError(f"{safe(path)}: none of its {len(names)} .json files is a "
                                    f"run record jaxcache can read (first: {refused[0][1]})")
            out += here
            if skipped is not None:
                skipped += refused
        else:
            out.append((path, load(path)))
    return out
