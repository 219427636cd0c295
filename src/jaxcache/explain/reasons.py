"""`jaxcache explain`: why each module was or was not cached, and why a later process missed.

An absent entry is not necessarily a fault: the rule that applied is named with its numbers,
and lowering a threshold is suggested only when what it leaves out is material at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxcache import thresholds
from jaxcache.explain import pairing
from jaxcache.explain.build_mismatch import BuildDiff, build_diffs
from jaxcache.explain.key_causes import CAUSES, compile_options_cause
from jaxcache.explain.rank_misses import RankDiff, rank_diffs
from jaxcache.records import used_dirs
from jaxcache.records.run_document import ModuleEntry, ModuleOutcome, ProcessEntry, RunRecord
from jaxcache.text import safe, size

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from jaxcache.records.run_document import Rejection

THRESHOLD_REASONS = thresholds.REASONS


@dataclass(frozen=True, slots=True)
class ModuleWhy:
    record: str
    process: str  # "main" or "pid N"
    name: str
    input_shapes: str | None
    compile_s: float | None
    entry_bytes: int | None
    outcome: str
    reason: str  # a stable code, documented in docs/reference/explain.md
    text: str
    expensive: bool  # compiled for at least the compile-time threshold
    missed_chance: bool  # expensive, and not cached for a reason other than the thresholds
    rank: int | None = None  # JAX's process index (else the launcher's rank) of the process


@dataclass(frozen=True, slots=True)
class KeyDiff:
    module: str
    earlier: str
    later: str
    components: tuple[str, ...]
    causes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ThresholdAdvice:
    left_out_s: float
    startup_s: float
    modules: int
    material: bool  # beyond the line and its margin: explain exits 1 (thresholds.py)
    text: str
    near: bool = False  # within the margin of the line: said, and no exit code rests on it


@dataclass(frozen=True, slots=True)
class Explanation:
    records: tuple[str, ...]
    modules: tuple[ModuleWhy, ...]
    diffs: tuple[KeyDiff, ...]
    advice: tuple[ThresholdAdvice, ...]
    notes: tuple[str, ...]
    # JAX was pointed at a directory other than the audited one (refused, or untrusted)
    unaudited_dirs: tuple[str, ...] = ()
    # "<record>: <why>" for records of a JAX outside the supported lines (--unverified-jax)
    unverified: tuple[str, ...] = ()
    # a rank other than 0 missed because its key differs from rank 0's (rank_misses.py)
    rank_diffs: tuple[RankDiff, ...] = ()
    # a process ran another build or on another kind of host than the writer (build_mismatch.py)
    build_diffs: tuple[BuildDiff, ...] = ()

    @property
    def exit_code(self) -> int:
        """1 when something expensive was not cached: a missed chance, a cross-process miss,
        or thresholds that leave a material share of start-up uncached (beyond the margin of
        thresholds.py's line: near it, 0, and the text says so); when JAX was pointed at a
        cache directory other than the one jaxcache audited; and when the processes ran
        different builds or hosts (their entries must not serve each other)."""
        bad = any(m.missed_chance for m in self.modules) or self.diffs or \
            any(a.material for a in self.advice) or self.unaudited_dirs or \
            self.rank_diffs or self.build_diffs
        return 1 if bad else 0


def _error_kind(m: ModuleEntry) -> str | None:
    text = " ".join(m.error_messages)
    text += " " + m.detail.message
    if "filelock" in text:
        return "filelock-missing"
    if "Permission denied" in text or "Read-only file system" in text or \
            "PermissionError" in text:
        return "dir-not-writable"
    if "decompress" in text or "Error reading" in text:
        return "corrupt-entry"
    return None


def _why(m: ModuleEntry, proc: ProcessEntry, later_dirs: bool) -> tuple[str, str]:
    """(reason code, sentence) for one module of one process."""
    outcome, reason, detail = m.outcome, m.reason, m.detail
    opts = proc.options
    first_dir, now_dir = opts.directory, m.cache_dir_at_compile
    if outcome in (ModuleOutcome.HIT, ModuleOutcome.WRITTEN) and first_dir and now_dir and \
            now_dir != first_dir:
        return "dir-change-ignored", (
            f"{'loaded from' if m.hit else 'written to'} {safe(first_dir)}, although "
            f"jax_compilation_cache_dir was {safe(now_dir)} by then: JAX creates its cache "
            "once and silently ignores a later change (reset_cache(), or "
            "jaxcache.enable(reset=True))")
    if outcome is ModuleOutcome.IN_PROGRESS:  # the process ended inside this compile
        if reason == "waiting-for-process":
            return reason, (f"the process ended while waiting for process "
                            f"{detail.process_index} to publish its executable "
                            "(jax_share_binary_between_hosts); on CPU that key is never "
                            "published and the job hangs")
        return "compile-unfinished", "the process ended while this module was compiling"
    if outcome is ModuleOutcome.HIT:
        return "hit", f"loaded from the cache in {m.seconds:.2f} s"
    if outcome is ModuleOutcome.WRITTEN:
        return "written", f"written ({size(m.entry_bytes or 0)})"
    if m.dir_known:  # what was really set, whatever JAX's log said
        if m.cache_enabled_at_compile is False:
            return "cache-disabled", "compiled with jax_enable_compilation_cache = False"
        if m.cache_dir_at_compile is None:
            if later_dirs:
                return "compiled-before-enabled", (
                    "compiled before the cache was enabled in this process; JAX does not "
                    "write programs it compiled earlier")
            env = proc.env_cache_dir
            if env and not opts.directory:
                return "env-after-import", (
                    f"JAX_COMPILATION_CACHE_DIR={safe(env)} was set after `import jax`, which "
                    "reads it only once: JAX had no cache dir")
            return "dir-unset", "no cache directory was set when it compiled"
    if reason == "compile-time-below-threshold":
        return reason, (f"below the {detail.threshold_s:g} s compile-time threshold "
                        "(jax_persistent_cache_min_compile_time_secs)")
    if reason == "entry-size-below-threshold":
        return reason, (f"entry of {detail.entry_bytes} B, below the "
                        f"{detail.threshold_bytes} B size threshold "
                        "(jax_persistent_cache_min_entry_size_bytes)")
    if reason == "not-process-0":
        index = proc.rank
        return reason, (f"only process 0 writes; this was process {index}" if index is not None
                        else "only process 0 writes, and this was not it")
    if reason == "host-callbacks":
        return reason, ("uses host callbacks (jax.debug.print, breakpoint, io_callback): "
                        "JAX <= 0.10 never writes such modules (0.11 and later cache them)")
    if reason == "max-size":
        limit = opts.max_size
        return reason, (f"jax_compilation_cache_max_size = {limit}: " +
                        ("0 disables every write" if limit == 0 else
                         "the entry is larger than the whole cache may be"))
    if reason == "file-exists-at-key":
        if _error_kind(m) == "corrupt-entry":
            return "corrupt-entry", (
                "a corrupt entry already sits at this key: JAX could not read it, compiled "
                "again, and will never replace it (the first writer wins), so every start pays "
                "the compile. Check who wrote it (jaxcache ls), then remove it yourself")
        return reason, ("a file already existed at this key and was not loaded; JAX never "
                        "replaces it (first writer wins)")
    if reason == "dir-refused":
        return reason, (f"JAX was pointed at {safe(str(detail.cache_dir))}, not the "
                        "audited cache: jaxcache refused it, so nothing was loaded from or "
                        "written there (see the record's jax_cache_dirs)")
    rejected = _seal_rejection(m, proc)
    if reason == "sealed-rejected":
        if rejected is not None:
            return reason, (f"the sealed cache rejected the entry at this key "
                            f"({safe(str(rejected.status))}: "
                            f"{safe(str(rejected.reason)[:400])}); compiled instead")
        return reason, ("the sealed cache rejected the entry at this key (see the record's "
                        "seal.rejections: unsigned, bad signature or unknown key); compiled "
                        "instead")
    if reason == "sealed-blocked":
        if rejected is not None and rejected.status == "other-build":
            return reason, ("this publisher could not write its signed entry: another "
                            "build's entry holds the key (first writer wins) "
                            f"({safe(str(rejected.reason)[:400])})")
        return reason, ("this publisher could not write its signed entry: a rejected file "
                        "occupies the key and is never replaced (jaxcache deletes nothing); "
                        "check it with `jaxcache verify`, then remove it")
    if reason == "sealed-read-only":
        return reason, ("a read-only consumer of a sealed cache writes nothing (no signing "
                        "key and no local directory)")
    kind = _error_kind(m)
    if kind == "filelock-missing" or (reason == "cache-disabled-or-uninitialized" and
                                      opts.max_size_set):
        return "filelock-missing", ("jax_compilation_cache_max_size is set but the 'filelock' "
                                    "package is missing, so JAX could not open the cache")
    if kind == "dir-not-writable":
        first = m.error_messages[0] if m.error_messages else ""
        return kind, ("the cache directory could not be created or written "
                      f"({safe(first[:160])})")
    if outcome is ModuleOutcome.ERROR:
        return reason or "error", f"cache error: {safe(detail.message[:200])}"
    if outcome is ModuleOutcome.UNCACHED:
        if proc.disabled_first:
            return "first-compile-disabled", (
                "the first compile of the process ran with the cache disabled, and JAX "
                "remembers that for the whole process (jax._src.compilation_cache.reset_cache "
                "or jaxcache.enable(reset=True))")
        return "uncached", "JAX did not consult the cache for this compile"
    if reason == "cache-disabled-or-uninitialized":
        return reason, "the cache was disabled or not initialized when JAX tried to write"
    word = m.outcome_word
    return reason or word or "unknown", safe(f"{word}: {reason}")


def _seal_rejection(m: ModuleEntry, proc: ProcessEntry) -> Rejection | None:
    """The sealed backend's rejection of this module's key (the record's seal.rejections)."""
    return next((r for r in proc.sealed_rejections if m.cache_key and r.key == m.cache_key),
                None)


def explain_records(records: Sequence[tuple[str, RunRecord | Mapping[str, object]]]
                    ) -> Explanation:
    """The records (path, record), each read once into its typed form where it is not yet
    (records/run_document.py), explained."""
    typed = [(path, doc if isinstance(doc, RunRecord) else RunRecord.from_json(doc))
             for path, doc in records]
    modules: list[ModuleWhy] = []
    advice: list[ThresholdAdvice] = []
    notes: list[str] = []
    unaudited: list[str] = []
    for path, record in typed:
        threshold = record.processes[0].options.min_compile_time_s
        threshold = 1.0 if threshold is None else threshold
        labels = ["main"] + [f"pid {p.pid}" for p in record.processes[1:]]
        procs = sorted(zip(labels, record.processes, strict=True),
                       key=lambda lp: (lp[1].rank is None, lp[1].rank or 0))
        for label, proc in procs:
            mods = proc.modules
            for i, m in enumerate(mods):
                later_dirs = any(x.cache_dir_at_compile for x in mods[i + 1:])
                code, text = _why(m, proc, later_dirs)
                compile_s = m.compile_s  # the one run's summary shows
                limit = m.min_compile_time_at_compile
                limit = threshold if limit is None else limit  # as it was at that compile
                expensive = compile_s is not None and compile_s >= limit
                missed = expensive and code not in ("hit", "written", "dir-change-ignored",
                                                    *THRESHOLD_REASONS)
                modules.append(ModuleWhy(path, label, m.name or "?", m.input_shapes,
                                         compile_s, m.entry_bytes, m.outcome_word or "?", code,
                                         text, expensive, missed, proc.rank))
        advice.append(_advice(path, record))
        unaudited += [f"{safe(path)}: {used_dirs.describe(e)}"
                      for e in used_dirs.failing(record)]
        if not record.probe_loaded and record.probe_said:
            notes.append(f"{safe(path)}: {safe(str(record.probe_note))}")
        from jaxcache.explain import bucket_misses, seal_builds

        notes += [f"{safe(path)}: {line}" for line in bucket_misses.lines(record.sealed)]
        notes += [f"{safe(path)}: {line}" for line in seal_builds.lines(record.sealed)]
    return Explanation(tuple(p for p, _ in records), tuple(modules),
                       tuple(_key_diffs(typed)), tuple(advice), tuple(notes),
                       tuple(unaudited), tuple(f"{path}: {r.unverified}"
                                               for path, r in typed if r.unverified),
                       tuple(rank_diffs(typed)), tuple(build_diffs(typed)))


def _advice(path: str, record: RunRecord) -> ThresholdAdvice:
    """thresholds.py's rule and sentence (the same run's summary says), for this record."""
    left = thresholds.left_out(record.modules, record.process.wall_s)
    return ThresholdAdvice(left.seconds, left.startup_s, left.modules, left.material,
                           f"{safe(path)}: {left.sentence(list(record.argv))}", left.near)


def _key_diffs(records: list[tuple[str, RunRecord]]) -> list[KeyDiff]:
    """Each module of a later record that did not hit what an earlier record cached, paired
    by pairing.py's rule (name and input shapes; equal keys first): the components that
    changed, and why."""
    out = []
    earlier: dict[tuple[int | None, str, str | None],
                  list[tuple[str, ProcessEntry, ModuleEntry]]] = {}
    for path, record in records:
        main = record.processes[0]
        rank = main.rank  # another rank's miss is rank_misses.py's, not a later run's
        groups: dict[tuple[int | None, str, str | None],
                      list[tuple[str, ProcessEntry, ModuleEntry]]] = {}
        for m in main.modules:
            if m.key_components:
                groups.setdefault((rank, m.name, m.input_shapes), []).append((path, main, m))
        for ident, mods in groups.items():
            for before, (_, _, m) in pairing.pair(earlier.get(ident, []), mods, lambda s: s[2]):
                if before is None or not pairing.missed(before[2], m):
                    continue
                earlier_path, earlier_proc, was = before
                comps, prior = m.key_components or {}, was.key_components or {}
                changed = {k for k in set(comps) | set(prior) if comps.get(k) != prior.get(k)}
                if changed:
                    causes = []
                    for k in sorted(changed):
                        if k == "compile_options":
                            causes.append("compile_options: " + compile_options_cause(
                                earlier_proc, main, changed))
                        else:
                            causes.append(f"{safe(k)}: {CAUSES.get(k, 'changed')}"
                                          + _evidence(k, earlier_proc, main))
                    out.append(KeyDiff(m.name or "?", earlier_path, path,
                                       tuple(sorted(safe(k) for k in changed)), tuple(causes)))
        for ident, mods in groups.items():
            earlier.setdefault(ident, []).extend(mods)
    return out


def _evidence(component: str, a: ProcessEntry, b: ProcessEntry) -> str:
    """What the two records say of the component that changed (their words, escaped)."""
    if component == "XLA flags":
        return f" (XLA_FLAGS {safe(repr(a.xla_flags))} vs {safe(repr(b.xla_flags))})"
    if component == "jax_lib version":
        return f" ({safe(str(a.jaxlib))} vs {safe(str(b.jaxlib))})"
    if component == "accelerator_config":
        return (f" ({safe(str(a.device_kind))} x{safe(str(a.device_count))} "
                f"vs {safe(str(b.device_kind))} x{safe(str(b.device_count))})")
    return ""


def run_twice(argv: list[str]) -> list[tuple[str, RunRecord]]:
    """`explain -- CMD`: run the job twice against a fresh private cache (what it writes, and
    whether a second process hits it); the records stay in the user's state dir. The job's
    stdout goes to our stderr: our stdout is the explanation (a JSON document with --format
    json), and the job's lines must not land in it."""
    import shutil
    import sys
    import tempfile

    from jaxcache.errors import JaxcacheError
    from jaxcache.run import command as runmod

    work = tempfile.mkdtemp(prefix="jaxcache-explain-")
    try:
        out = []
        for label in ("first", "second"):
            sys.stdout.flush()
            result = runmod.run_job(argv, cache_dir=f"{work}/cache", stdout=sys.stderr)
            if result.outcome.status != 0:
                raise JaxcacheError(f"the {label} run of the job exited with status "
                                    f"{result.outcome.status}; its record: "
                                    f"{result.record_path}")
            out.append((result.record_path, result.record))
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)
