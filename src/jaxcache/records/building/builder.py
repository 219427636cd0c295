"""The run record's JSON, built from the probes' documents (read once into ProbeOutput) and
what jaxcache saw of the cache directory before and after the job.

Schema `jaxcache.run/1` is documented in docs/run-record.md. Honest numbers: misses are compile
requests minus hits (JAX's own `cache_misses` event fires only right before a write); on a hit
the compile-or-load time is the load time; JAX's `compile_time_saved_sec` rests on compile time
stored in whole seconds, so it is kept under its own name and never shown as the saving.
"""

from __future__ import annotations

import os
import stat
import sys
import time
from dataclasses import dataclass

from jaxcache.documents.kinds import envelope
from jaxcache.records import fingerprints, rank_views, used_dirs
from jaxcache.records.building.probe_output import ProbeOutput
from jaxcache.records.reading import in_record_order
from jaxcache.trust.rules.target import is_url

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from collections.abc import Iterable

    from jaxcache.probe.runner import Outcome
    from jaxcache.records.building.probe_output import ProbeModule, ProbeSeal
    from jaxcache.trust.kernel.entries import Elided, Inventory


@dataclass(frozen=True, slots=True)
class DirSnapshot:
    path: str
    entries: dict[str, int]  # name -> size (empty when unknown)
    unknown: str | None = None  # why the listing failed: its counts are unknown, never 0
    absent: str | None = None  # why it could not be listed, where that reads as empty (before
    # a job, the directory JAX has yet to make)
    # a directory the audit found unchanged since it judged every entry: `entries` holds the
    # entries it named, the rest are counted here and listed only when asked (listed())
    elided: Elided | None = None

    @classmethod
    def of(cls, path: str, inv: Inventory | None) -> DirSnapshot:
        if inv is None:
            return cls(path, {})
        return cls(path, {e.name: e.size for e in inv.entries if e.type == "file"},
                   elided=inv.elided)

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

    def unchanged(self) -> bool:
        """Is the directory of a snapshot that counted entries without listing them still in
        that state (no name added, removed or renamed since: its mtime and ctime say)?"""
        if self.elided is None:
            return False
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except OSError:
            return False
        return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_nlink) == \
            self.elided.stamp

    def listed(self) -> DirSnapshot:
        """This snapshot with every entry named (the remembered names read now), or unknown
        where they are no longer known."""
        if self.elided is None:
            return self
        names = self.elided.names()
        if names is None:
            return DirSnapshot(self.path, {}, "the listing the audit remembered before the job "
                                              "could not be read again")
        return DirSnapshot(self.path, names)

    def holds(self, name: str) -> bool:
        """Is `name` a file of this snapshot? (Counted entries are looked up in the directory,
        which a snapshot only asks while it is unchanged.)"""
        return self.size(name) is not None

    def size(self, name: str) -> int | None:
        if name in self.entries or self.elided is None:
            return self.entries.get(name)
        try:
            st = os.stat(os.path.join(self.path, name), follow_symlinks=False)
        except (OSError, ValueError):
            return None
        return st.st_size if stat.S_ISREG(st.st_mode) else None

    def since(self, before: DirSnapshot) -> DirSnapshot:
        """This listing, taken after a job: a directory that was there before and cannot be
        listed now (removed, renamed or unreadable while the job ran) is unknown, not 0."""
        if self.absent is not None and before.absent is None and before.unknown is None:
            return DirSnapshot(self.path, {}, f"gone or unreadable after the job: "
                                              f"{self.absent}")
        return self

    def summary(self) -> dict[str, object]:
        if self.unknown is not None:
            return {"entries": None, "files": None, "bytes": None, "unknown": self.unknown}
        more = self.elided
        return {"entries": sum(1 for n in self.entries if n.endswith("-cache")) + (
                    more.compiled if more else 0),
                "files": len(self.entries) + (more.files if more else 0),
                "bytes": sum(self.entries.values()) + (more.bytes if more else 0)}


class ListingBeside:
    """A sealed reader's bucket, listed on a thread while its job runs: what its record counts
    as the cache before the job. Only for a reader, whose job writes nothing to the bucket, so
    the listing sees what one before the job would have (others' writes race either), and the
    job does not wait for its round trips (one per 1,000 objects) and the client's import."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._got: list[DirSnapshot] = []
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Started just before the job: nothing else in this process imports meanwhile."""
        def list_now() -> None:
            try:
                self._got.append(DirSnapshot.at(self.url))
            except Exception as exc:  # noqa: BLE001 - never a thread's traceback: unknown
                self._got.append(DirSnapshot(self.url, {}, "the bucket could not be listed: "
                                             f"{type(exc).__name__}: {str(exc)[:300]}"))

        import threading  # only a sealed reader's bucket: ~3 ms no other run pays

        self._thread = threading.Thread(target=list_now, name="jaxcache-listing", daemon=True)
        self._thread.start()

    def result(self) -> DirSnapshot:
        """The listing (waited for; taken now if it was never started)."""
        if self._thread is None:
            self.start()
        assert self._thread is not None
        self._thread.join()
        return self._got[0] if self._got else DirSnapshot(
            self.url, {}, "the bucket could not be listed (the listing failed)")


def _bucket_objects(url: str) -> tuple[dict[str, int], str | None]:
    from jaxcache.errors import JaxcacheError
    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.trust.rules import target

    try:
        return {o.name: o.size for o in objects.open_store(target.parse_bucket(url)).list()}, None
    except (JaxcacheError, objects.StoreError) as exc:
        return {}, f"the bucket could not be listed: {str(exc)[:300]}"  # shown escaped


@dataclass(frozen=True, slots=True)
class RunAudit:
    """What `jaxcache run` adds to its record beyond the probes' documents: its audit's word on
    where the entries before the job came from, the cache's namespace, the policy every other
    directory JAX used is audited by after the job, and whether the user allowed a JAX outside
    the supported lines (--unverified-jax)."""

    origin: dict[str, object] | None
    namespace: dict[str, str] | None
    policy: str | None
    unverified_allowed: bool


def env_snapshot(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in sorted(env.items())
            if k.startswith(("JAX_", "XLA_PYTHON_CLIENT"))
            or k in ("XLA_FLAGS", "LIBTPU_INIT_ARGS", "TF_CPP_MIN_LOG_LEVEL")}


def _counts(probe: ProbeOutput, outcomes_judged: list[str | None]) -> dict[str, object]:
    """Counts from the modules as finally judged (a 'written' JAX logged may be a kept file)."""
    raw = probe.counts
    outcomes: dict[str, int] = {}
    for word in outcomes_judged:
        key = word or "unknown"
        outcomes[key] = outcomes.get(key, 0) + 1
    read_errors = sum(1 for m in probe.modules if m.read_error)
    return {"modules": len(probe.modules), "compile_requests": raw.compile_requests,
            "hits": raw.hits, "misses": raw.compile_requests - raw.hits,
            "writes_event": raw.writes, "task_disabled_cache": raw.task_disabled_cache,
            "read_errors": read_errors, "outcomes": outcomes}


def _judged(m: ProbeModule, seal: ProbeSeal | None, before: DirSnapshot,
            after: DirSnapshot) -> tuple[str | None, dict[str, object]]:
    """(its outcome, the record's module): the probe's, with what JAX's word turned out to
    mean once the sealed backend and the directory are known."""
    out = dict(m.raw)
    key = m.cache_key
    if m.in_progress:  # the process ended (killed, hung) inside this compile
        out["outcome"] = "in-progress"
        out["reason"] = "waiting-for-process" if m.waiting else "compile-unfinished"
        out["reason_detail"] = {"process_index": m.waiting_process_index} \
            if m.waiting else None
        return "in-progress", out
    outcome = m.outcome
    if outcome == "miss":  # JAX said miss, then neither wrote nor said why not
        outcome = out["outcome"] = "skipped"
        out["reason"] = "not-written-unexplained"
    if m.dir_refused:  # the guard's cache: no read, no write
        outcome = out["outcome"] = "skipped"
        out["reason"] = "dir-refused"
        out["reason_detail"] = {"cache_dir": m.cache_dir}
        return outcome, out
    sealed_writes = {k: (d, n) for k, d, n in seal.writes} if seal is not None else {}
    written = sealed_writes.get(key) if key is not None else None
    if written is not None:  # the sealed backend wrote it, maybe to the local tier: its size
        outcome = out["outcome"] = "written"  # is what it wrote there, whatever the shared
        out["written_to"] = written[0]  # directory holds at that key
        if written[1] is not None:
            out["entry_bytes"] = written[1]
            return outcome, out
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
    return outcome, out


def _modules(probe: ProbeOutput, before: DirSnapshot, after: DirSnapshot
             ) -> tuple[list[dict[str, object]], dict[str, object]]:
    """The record's modules of one process, and its counts."""
    seal = probe.seal if probe.seal is not None and probe.seal.raw else None
    judged = [_judged(m, seal, before, after) for m in probe.modules]
    return [doc for _, doc in judged], _counts(probe, [word for word, _ in judged])


def _unverified(versions: Iterable[str | None]) -> str | None:
    """`unverified`: why jaxcache cannot vouch for a record whose processes ran these JAX
    versions (one outside the supported lines), or None."""
    from jaxcache.jaxcompat.versions import why_unverified

    return next((r for r in map(why_unverified, versions) if r), None)


def build(outcome: Outcome, *, cache_dir: str, verdict: str, before: DirSnapshot,
          after: DirSnapshot, env: dict[str, str], cwd: str,
          run: RunAudit | None = None) -> dict[str, object]:
    """The record. `run`: what `jaxcache run` adds (the other directories JAX used are
    audited then, and `unverified` is said); without it, a record as bench and explain make
    it."""
    parsed = {id(p): ProbeOutput.from_json(p) for p in outcome.probes}  # each read once
    probes = [parsed[id(p)] for p in in_record_order(outcome.probes, outcome.pid)]
    main = probes[0] if probes else None
    main_modules, main_counts = _modules(main, before, after) if main else ([], None)
    new_files = [] if before.unknown or after.unknown or after is before else \
        sorted(set(after.entries) - set(before.entries))
    cache_part: dict[str, object] = {
        "path": cache_dir, "verdict": verdict,
        "before": before.summary(), "after": after.summary(),
        "new_files": [{"name": n, "bytes": after.entries[n]} for n in new_files],
    }
    used = used_dirs.collect(outcome.probes, cache_dir)
    doc: dict[str, object] = {
        **envelope("run"),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "argv": list(outcome.argv),
        "cwd": cwd,
        "host": {"system": os.uname().sysname, "release": os.uname().release,
                 "machine": os.uname().machine, "node": os.uname().nodename,
                 "runner_python": sys.executable,
                 "runner_python_version": ".".join(map(str, sys.version_info[:3]))},
        "probe": {"loaded": main is not None,
                  "note": None if main is not None else
                  "no probe data: the program never imported jax, is not Python, ran Python "
                  "with -S/-I, was killed before its first compile, or its probe could not "
                  "write (a full or removed temporary folder?)"},
        "versions": main.versions if main else {},
        **fingerprints.record_fields(main),
        "identity": main.identity if main else None,
        "cache_view": main.cache_view if main else None,
        "platform": main.platform if main else {},
        "cache_options_at_first_compile": main.cache_options if main else None,
        "env_cache_dir_at_first_compile": main.env_cache_dir if main else None,
        "env": env_snapshot(env),
        "import_jax_s": main.import_jax_s if main else None,
        "probe_times": {"started": main.started if main else None,
                        "import_jax_started": main.import_jax_started if main else None,
                        "last_write": main.now if main else None,
                        "final": bool(main and main.final)},
        "modules": main_modules,
        "counts": main_counts,
        "jax_warnings": list(main.warnings) if main else [],
        "cache_dir": cache_part,
        "process": {"pid": outcome.pid, "exit_code": outcome.exit_code, "signal": outcome.signal,
                    "wall_s": round(outcome.wall_s, 6), "user_s": round(outcome.user_s, 6),
                    "sys_s": round(outcome.sys_s, 6), "peak_rss_bytes": outcome.peak_rss_bytes},
        "subprocesses": [_subprocess(p, before, after) for p in probes[1:]],
        "seal": main.seal.raw if main and main.seal else None,
        "jax_cache_dirs": used,
        "cache_guard_errors": [{"pid": p.pid, "error": p.guard_error}
                               for p in parsed.values() if p.guard_failed],
    }
    doc["ranks"] = rank_views.check(doc, env)
    if run is not None:
        used_dirs.judge(used, run.policy)  # each other directory's own verdict
        cache_part["origin"] = run.origin
        cache_part["namespace"] = run.namespace
        doc["unverified"] = _unverified(
            [main.jax if main else None] + [p.jax for p in probes[1:]])
        doc["unverified_allowed"] = run.unverified_allowed
    return doc


def _subprocess(p: ProbeOutput, before: DirSnapshot, after: DirSnapshot) -> dict[str, object]:
    modules, counts = _modules(p, before, after)
    return {"pid": p.pid, "argv": list(p.argv) if p.argv is not None else None,
            "identity": p.identity, "cache_view": p.cache_view, "versions": p.versions,
            **fingerprints.record_fields(p), "counts": counts, "platform": p.platform,
            "modules": modules}

