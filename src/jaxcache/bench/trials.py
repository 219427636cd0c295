"""Trials: a fresh private cache, one cold process, K warm ones; checked, not assumed.

Trials follow one another (cold always precedes its warm runs), so slow drift of the machine
lands on both arms. A discarded priming run first warms the OS file cache, never the JAX cache.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from jaxcache import jobenv, thresholds
from jaxcache.bench import analysis as analysismod
from jaxcache.bench import bench_prefixes, noticeable, per_rank
from jaxcache.bench.sample import ProcessSample, from_record
from jaxcache.documents import claim as outputs
from jaxcache.errors import JaxcacheError
from jaxcache.records import run_record as recordmod
from jaxcache.records.run_document import StartTimes, in_record_order
from jaxcache.text import safe


class BenchCommandError(JaxcacheError):
    """The job failed or hung in a run the bench needs; carries the tail of its stderr."""


@dataclass(frozen=True)
class BenchConfig:
    """One bench's settings; its field defaults are bench's defaults everywhere (the CLI's
    flags, decide's bench, the demo read them here)."""

    argv: tuple[str, ...]
    trials: int = 6
    warm: int = 1
    prime: bool = True
    timeout_s: float | None = None
    confidence: float = 0.95
    noise_s: float = 0.1
    max_trials: int | None = None  # adaptive: keep going up to this many trials...
    target_width_s: float | None = None  # ...until the saving's interval is this narrow
    time_budget_s: float | None = None  # ...or this much time was spent
    thresholds: dict[str, str] = field(default_factory=dict)  # env var -> value, if set
    sealed: bool = False  # each trial's cache sealed with a throwaway key: verification counted
    bucket: str | None = None  # sealed trials in fresh prefixes under this gs:// or s3:// URL
    min_saving_s: float = noticeable.MIN_SAVING_S  # the noticeable bar (bench/noticeable.py)
    min_fraction: float = noticeable.MIN_FRACTION
    # adaptive: also stop as soon as the verdict is decided (not inconclusive): a loaded
    # machine gets the trials it needs, a quiet one no more (the demo; bench --until-decided)
    until_decided: bool = False
    # the cache directory this bench measures a job of (decide PATH -- CMD): decide's chooser
    # takes a kept bench for PATH only when its job used PATH (decide/bench_choice.py)
    for_cache: str | None = None
    # the folder bench ran the job from (absolute, escaped as a run record's `cwd`; None: not
    # known): a job is its command and its folder (decide/bench_choice.py)
    cwd: str | None = None


@dataclass(frozen=True)
class BenchResult:
    config: BenchConfig
    samples: tuple[ProcessSample, ...]
    excluded: tuple[tuple[ProcessSample, tuple[str, ...]], ...]  # not comparable, and why
    analysis: analysismod.Analysis
    stop_reason: str | None  # nothing-cached | warm-missed | interrupted | budget | width
    #                          | decided
    detail: str | None
    workdir: str
    elapsed_s: float
    env: dict[str, str]
    bucket_prefix: str | None = None  # --bucket: where this bench's objects are


@dataclass(frozen=True, slots=True)
class RunEvent:
    """A run about to start, as progress is told of it (report/bench/progress.py)."""

    phase: str  # prime | cold | warm
    trial: int  # 0 for the priming run
    trials: int  # planned
    warm: int = 0  # the warm run's number within its trial
    warms: int = 0  # warm runs per trial


Progress = Callable[[RunEvent], None]  # told of each run (report/bench/progress.py)


def _throwaway_key(work: str) -> str:
    """A signing key for this bench only, in its private work dir, outside every cache."""
    from jaxcache.seal.signing import key_pair_files
    from jaxcache.trust.inputs import signing_keys as keys

    return key_pair_files.save(keys.generate(), os.path.join(work, "keys", "bench.key"))


def _tail(path: str, lines: int = 15) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:]).rstrip()
    except OSError:
        return ""


def _one(cfg: BenchConfig, env: dict[str, str], cache: str, out_dir: str, name: str,
         trial: int, kind: str, index: int, signing_key: str | None = None) -> ProcessSample:
    if signing_key is not None:  # the probe enables the sealed cache; no plain cache dir
        from jaxcache.lifecycle.sealing import SealOptions

        child_env = dict(env)
        child_env.update(SealOptions(signing_key=signing_key).job_env(cache, None))
    else:
        from jaxcache.run.command import audited_env

        # the guard refuses any other directory; bench's own caches go with its workdir, so
        # no origin ledger line is written for them
        child_env = dict(env, **audited_env(cache, witness=False))
    stdout_path = os.path.join(out_dir, f"{name}.stdout")
    stderr_path = os.path.join(out_dir, f"{name}.stderr")
    launched_at = time.time()  # where each rank's start is placed (probes use this clock)
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        verdict = "SEALED" if cfg.bucket else "PRIVATE"
        record, outcome = recordmod.capture(list(cfg.argv), child_env, cache, verdict=verdict,
                                            missing_ok=False, stdout=out, stderr=err,
                                            timeout=cfg.timeout_s, interactive=False)
    path = os.path.join(out_dir, f"{name}.json")
    recordmod.write(record, outputs.claim(path, "record"))  # a new name in our own workdir
    if outcome.timed_out:
        raise BenchCommandError(f"the {kind} run of trial {trial} did not finish within "
                                f"{cfg.timeout_s:g} s and was killed")
    if outcome.status != 0:
        tail = _tail(stderr_path)
        raise BenchCommandError(
            f"the {kind} run of trial {trial} failed with exit status {outcome.status}"
            + (f"; the end of its stderr:\n{tail}" if tail else ""))
    probes = in_record_order(outcome.probes, outcome.pid)  # as the record holds them
    return from_record(record, trial=trial, kind=kind, index=index,
                       path=path, probes=tuple(StartTimes.from_probe(p) for p in probes),
                       launched_at=launched_at)


def run_bench(cfg: BenchConfig, *, workdir: str | None = None,
              progress: Progress | None = None) -> BenchResult:
    """Run the trials; on Ctrl-C returns what was measured, with stop_reason 'interrupted'."""
    progress = progress or (lambda event: None)
    work = tempfile.mkdtemp(prefix="jaxcache-bench-") if workdir is None else workdir
    env = dict(os.environ)
    env.update(cfg.thresholds)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    for name in jobenv.PER_RUN:  # bench's trials get their own caches, never an outer run's
        env.pop(name, None)
    key = _throwaway_key(work) if cfg.sealed else None
    fresh = bench_prefixes.Fresh(cfg.bucket) if cfg.bucket else None
    started = time.monotonic()
    samples: list[ProcessSample] = []
    stop, detail = None, None
    planned = cfg.max_trials or cfg.trials
    try:
        if cfg.prime:
            progress(RunEvent("prime", 0, planned))
            prime_dir = os.path.join(work, "prime")
            os.mkdir(prime_dir, 0o700)
            if fresh is None:
                os.mkdir(os.path.join(prime_dir, "cache"), 0o700)
            _one(cfg, env, fresh.take("prime") if fresh else os.path.join(prime_dir, "cache"),
                 prime_dir, "prime", 0, "prime", 0, key)
            if fresh is None:  # only the OS file cache stays warm
                shutil.rmtree(os.path.join(prime_dir, "cache"))
        trial = 0
        while True:
            trial += 1
            tdir = os.path.join(work, f"trial-{trial}")
            cache = fresh.take(f"trial-{trial}") if fresh else os.path.join(tdir, "cache")
            os.mkdir(tdir, 0o700)
            if fresh is None:
                os.mkdir(cache, 0o700)
            if fresh is None and recordmod.DirSnapshot.at(cache, missing_ok=False).entries:
                raise JaxcacheError(f"internal: fresh cache {safe(cache)} is not empty")
            progress(RunEvent("cold", trial, planned))
            cold = _one(cfg, env, cache, tdir, "cold", trial, "cold", 0, key)
            samples.append(cold)
            for k in range(1, cfg.warm + 1):
                progress(RunEvent("warm", trial, planned, k, cfg.warm))
                run = _one(cfg, env, cache, tdir, f"warm-{k}", trial, "warm", k, key)
                samples.append(replace(run, missed=per_rank.misses(cold.ranks, run.ranks)))
            warm = [s for s in samples if s.trial == trial and s.kind == "warm"]
            if cold.entries_after == 0:
                stop = "nothing-cached"
                detail = _why_nothing(cold, cfg)
                break
            if not any(s.hits for s in warm):
                stop = "warm-missed"
                wrote = "wrote" if cold.entries_after is None else \
                    f"left {cold.entries_after}"
                detail = (f"the cold run {wrote} entries but no warm run hit "
                          "any: the cache keys differ between processes (run `jaxcache explain` "
                          f"on {cold.record_path} and {warm[0].record_path})")
                break
            if any(s.missed for s in warm):
                stop, detail = "warm-missed", _why_ranks_missed(cold, warm)
                break
            if trial >= cfg.trials:  # also on the last trial allowed: its stop reason is
                # then what decided it, not that the trials ran out
                current = _analyse(samples, cfg, None)
                s = current.saving
                if cfg.target_width_s is not None and s is not None and s.resolved and \
                        s.high - s.low <= cfg.target_width_s:
                    stop = "width"
                    break
                if cfg.until_decided and current.verdict.decided:
                    stop = "decided"
                    break
                if cfg.time_budget_s is not None and \
                        time.monotonic() - started >= cfg.time_budget_s:
                    stop = "budget"
                    break
                if cfg.target_width_s is None and cfg.time_budget_s is None \
                        and not cfg.until_decided:
                    break
            if trial >= planned:
                break
    except KeyboardInterrupt:
        stop = "interrupted"
        done = sum(1 for s in samples)
        detail = (f"interrupted after {done} completed run(s); the results cover those"
                  if done else "interrupted before any run completed: nothing to report")
    return BenchResult(cfg, tuple(samples), _excluded(samples),
                       _analyse(samples, cfg, stop), stop, detail, work,
                       time.monotonic() - started, {k: v for k, v in cfg.thresholds.items()},
                       fresh.base if fresh else None)


def _excluded(samples: list[ProcessSample]
              ) -> tuple[tuple[ProcessSample, tuple[str, ...]], ...]:
    """Processes that differ from the first one in what makes timings comparable (versions,
    the build, devices, flags, shapes: bench/comparable.py): never compared, and why."""
    if not samples:
        return ()
    ref = samples[0].comparable
    return tuple((s, tuple(ref.diff(s.comparable))) for s in samples
                 if ref.diff(s.comparable))


def _analyse(samples: list[ProcessSample], cfg: BenchConfig, stop: str | None
             ) -> analysismod.Analysis:
    excluded = {id(s) for s, _ in _excluded(list(samples))}
    comparable = [s for s in samples if id(s) not in excluded]
    cold = [s for s in comparable if s.kind == "cold"]
    warm = [s for s in comparable if s.kind == "warm"]
    return analysismod.analyse(cold, warm, confidence=cfg.confidence, noise_s=cfg.noise_s,
                               bar=noticeable.Bar(cfg.min_saving_s, cfg.min_fraction),
                               stop_reason=stop if stop in ("nothing-cached", "warm-missed")
                               else None)


def _why_nothing(cold: ProcessSample, cfg: BenchConfig) -> str:
    if not cold.skipped:
        return ("the cold run compiled nothing through JAX's cache (did the job use jax.jit, "
                "and is jax_enable_compilation_cache on?)")
    total = sum(c for _, _, c in cold.skipped)
    reasons: dict[str, int] = {}
    for _, reason, _ in cold.skipped:
        reasons[reason] = reasons.get(reason, 0) + 1
    listed = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items(), key=lambda x: -x[1]))
    why = "so there is nothing for the cache to save"
    if set(reasons) == {thresholds.COMPILE_TIME}:
        # the job inherits this environment: a threshold bench did not set may come from it
        name = thresholds.FLAGS["--min-compile-time"]
        threshold = cfg.thresholds.get(name) or (
            f"{safe(os.environ[name])} (from the environment)" if os.environ.get(name)
            else "1.0 (default)")
        why = f"each below the {threshold} s compile-time threshold, {why}"
    return (f"the cold run wrote no entry: all {len(cold.skipped)} compiled modules were skipped "
            f"({listed}); together they compiled in {total:.2f} s, {why}")


def _why_ranks_missed(cold: ProcessSample, warm: list[ProcessSample]) -> str:
    """Which ranks missed, in how many warm runs, and what the records say about why."""
    by_rank: dict[int | None, list[per_rank.RankMiss]] = {}
    for s in warm:
        for miss in s.missed:
            by_rank.setdefault(miss.rank, []).append(miss)
    missed = sorted(by_rank, key=lambda r: (r is None, r or 0))
    parts = []
    for rank in missed:
        found = by_rank[rank]
        mods = sorted({m for miss in found for m in miss.modules})
        shown = ", ".join(mods[:3]) + (f" and {len(mods) - 3} more" if len(mods) > 3 else "")
        why = []
        if any(m.keys_differ for m in found):
            why.append("its cache keys differ from the entries written")
        if any(m.not_process_0 for m in found):
            why.append("in the cold run it wrote nothing because JAX writes only from "
                       "process 0")
        parts.append(f"{per_rank.label(rank)} missed in {len(found)} of {len(warm)} warm runs "
                     f"of trial {cold.trial}, compiling again {shown}"
                     + (f" ({'; '.join(why)})" if why else ""))
    hit = sorted({r.rank for s in warm for r in s.ranks if r.rank not in by_rank and r.hits},
                 key=lambda r: (r is None, r or 0))
    tail = f"; {per_rank.names(list(hit))} hit" if hit else ""
    return ("; ".join(parts) + tail + ": the job waits for its slowest rank, and that rank "
            f"compiles again on every start (run `jaxcache explain` on {cold.record_path} and "
            f"{warm[0].record_path})")
