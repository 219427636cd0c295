"""`jaxcache bench --json`: raw samples, what makes them comparable, the fingerprints of the
builds they ran, and conclusions (schema jaxcache.bench/1); and `bench --compare --format
json`, two results as an A/B result (jaxcache.bench-compare/1)."""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from jaxcache.bench import noticeable
from jaxcache.bench.adjust import COVARIATE, METHOD, Adjusted
from jaxcache.bench.analysis import RankSummary
from jaxcache.bench.estimates import Shift, Spread
from jaxcache.bench.per_rank import RankMiss, RankSample
from jaxcache.bench.trials import BenchResult
from jaxcache.documents.kinds import envelope
from jaxcache.jaxcompat import DEFAULT_MIN_COMPILE_TIME_SECS, DEFAULT_MIN_ENTRY_SIZE_BYTES
from jaxcache.report import jsonout
from jaxcache.thresholds import LeftOut

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.bench.bench_document import BenchDocument
    from jaxcache.bench.comparable import AB


def _num(v: float) -> float | None:
    return v if math.isfinite(v) else None


def _shift(s: Shift | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {"estimate": _num(s.estimate), "low": _num(s.low), "high": _num(s.high),
            "confidence": s.confidence, "asked_confidence": s.asked, "min_p": s.min_p,
            "n": s.n, "m": s.m}


def _adjustment(a: Adjusted | None) -> dict[str, Any] | None:
    """How the adjusted saving was made and checked, and whether the verdict used it."""
    if a is None:
        return None
    return {"method": METHOD, "covariate": COVARIATE, "used": a.used, "why": a.why,
            "slope": a.slope, "df": a.df, "se": a.se, "cold_covariate_s": a.cold_x,
            "warm_covariate_s": a.warm_x, "balance_p": a.balance_p,
            "uncached_modules": a.modules, "correlation": a.correlation}


def _spread(s: Spread | None) -> dict[str, Any] | None:
    return None if s is None else {"median": s.median, "min": s.low, "max": s.high, "n": s.n}


def _rank(r: RankSample) -> dict[str, Any]:
    return {"rank": r.rank, "pids": list(r.pids), "host": r.host, "started_s": r.started_s,
            "phases": r.phases, "first_step_s": r.first_step_s, "modules": len(r.modules),
            "hits": r.hits, "written": r.written}


def _miss(m: RankMiss) -> dict[str, Any]:
    return {"rank": m.rank, "modules": list(m.modules), "keys_differ": m.keys_differ,
            "not_process_0": m.not_process_0}


def _rank_summary(r: RankSummary) -> dict[str, Any]:
    return {"rank": r.rank,
            "first_step_s": {"cold": _spread(r.first_step[0]), "warm": _spread(r.first_step[1])},
            "compile_or_load_s": {"cold": _spread(r.compile_or_load[0]),
                                  "warm": _spread(r.compile_or_load[1])},
            "warm_runs": r.warm_runs, "warm_missed": r.warm_missed, "missed": list(r.missed)}


def thresholds(result: BenchResult) -> dict[str, object]:
    """The thresholds in effect (from the cold run's record), marked when below JAX's defaults."""
    opts = {}
    sample = next(iter(result.samples), None)
    if sample is not None:
        opts = dict(sample.comparable.cache_options)
    time_s = float(opts.get("jax_persistent_cache_min_compile_time_secs",
                            repr(DEFAULT_MIN_COMPILE_TIME_SECS)))
    size_b = int(float(opts.get("jax_persistent_cache_min_entry_size_bytes",
                                repr(DEFAULT_MIN_ENTRY_SIZE_BYTES))))
    return {"min_compile_time_secs": time_s,
            "min_compile_time_below_default": time_s < DEFAULT_MIN_COMPILE_TIME_SECS,
            "min_entry_size_bytes": size_b,
            "set_by_bench": dict(result.env)}


def left_out(result: BenchResult) -> LeftOut | None:
    """What JAX's write thresholds kept out of the cache in the cold runs: the median run by
    seconds left out (the same rule and sentence as run's summary: thresholds.py)."""

    cold = sorted((s.left_out for s in result.samples if s.kind == "cold" and s.left_out),
                  key=lambda left: left.seconds)
    if not cold:
        return None
    wall = result.analysis.wall  # the start-up as the table shows it: the cold median
    middle = cold[len(cold) // 2]
    return middle._replace(startup_s=wall[0].median) if wall is not None else middle


def _left_out(result: BenchResult) -> dict[str, Any] | None:
    left = left_out(result)
    if left is None:
        return None
    return {"modules": left.modules, "seconds": left.seconds, "startup_s": left.startup_s,
            "share": left.share, "material": left.material, "near": left.near,
            "written": left.written,
            "suggestion": left.suggestion() if left.modules else None}


def bench_dict(result: BenchResult) -> dict[str, object]:
    a = result.analysis
    return {
        **envelope("bench"),
        "command": list(result.config.argv),
        "config": {k: v for k, v in asdict(result.config).items() if k != "argv"},
        "thresholds": {**thresholds(result), "left_out": _left_out(result)},
        "comparable": result.samples[0].comparable.as_dict() if result.samples else None,
        # each build and host the samples ran on, by id: each sample names its own
        "fingerprints": {s.fingerprint.id: s.fingerprint.to_json() for s in result.samples
                         if s.fingerprint is not None},
        "samples": [
            {"trial": s.trial, "kind": s.kind, "index": s.index, "wall_s": s.wall_s,
             "user_s": s.user_s, "sys_s": s.sys_s, "peak_rss_bytes": s.peak_rss_bytes,
             "exit_code": s.exit_code, "signal": s.signal, "phases": s.phases,
             "modules": s.modules, "hits": s.hits, "written": s.written,
             "entries_before": s.entries_before, "entries_after": s.entries_after,
             "bytes_after": s.bytes_after, "write_overhead_s": s.write_overhead_s,
             "first_step_s": s.first_step_s, "ranks": [_rank(r) for r in s.ranks],
             "missed_ranks": [_miss(m) for m in s.missed], "record": s.record_path,
             "fingerprint": s.fingerprint.id if s.fingerprint is not None else None,
             "uncached_s": s.uncached_s, "uncached_modules": len(s.uncached),
             "comparable": all(s is not x for x, _ in result.excluded)}
            for s in result.samples],
        "excluded": [{"trial": s.trial, "kind": s.kind, "index": s.index,
                      "differences": list(d)} for s, d in result.excluded],
        "summary": {
            "verdict": a.verdict,
            "message": a.message,
            "stop_reason": result.stop_reason,
            "detail": result.detail,
            "phases": {name: {"cold": _spread(c), "warm": _spread(w)}
                       for name, (c, w) in a.phases.items()},
            "wall": None if a.wall is None else {"cold": _spread(a.wall[0]),
                                                 "warm": _spread(a.wall[1])},
            "first_step": None if a.first_step is None else {
                "cold": _spread(a.first_step[0]), "warm": _spread(a.first_step[1])},
            "ranks": [_rank_summary(r) for r in a.ranks],
            "saving_s": _shift(a.saving),
            "adjusted_saving_s": _shift(a.adjusted.shift if a.adjusted else None),
            "adjustment": _adjustment(a.adjusted),
            "judged_on": "adjusted" if a.judged is not a.saving else "unadjusted",
            "compile_saving_s": _shift(a.compile_saving),
            "warm_over_cold": _shift(a.ratio),
            "noise_band_s": a.noise_s,
            "significant": a.significant,
            "noticeable_bar": {"min_saving_s": a.bar.min_s, "min_fraction": a.bar.min_fraction},
            "noticeable": None if a.judgement is None else noticeable.as_dict(a.judgement),
            "amortization": {"paid_s": a.paid_s, "written_bytes": a.written_bytes,
                             "pays_off_after": a.pays_off_after},
        },
        "elapsed_s": result.elapsed_s,
        "workdir": result.workdir,
        "bucket_prefix": result.bucket_prefix,
    }


def render(result: BenchResult) -> str:
    return jsonout.document(bench_dict(result))


def compare(ab: AB, a: BenchDocument, b: BenchDocument, a_path: str, b_path: str) -> str:
    """`bench --compare A B --format json` (schema jaxcache.bench-compare/1): each measure's
    per-trial values, B / A and B - A with their intervals, and every setting that differs."""
    import statistics

    def side(doc: BenchDocument, path: str, trials: int) -> dict[str, object]:
        return {"path": path, "command": list(doc.command), "trials": trials,
                "verdict": doc.verdict}

    def values(v: tuple[float, ...]) -> dict[str, object]:
        return {"per_trial": list(v), "median": statistics.median(v) if v else None}

    return jsonout.document({
        **envelope("bench-compare"), "a": side(a, a_path, ab.trials[0]),
        "b": side(b, b_path, ab.trials[1]), "confidence": ab.confidence,
        "fewest_trials": ab.fewest, "comparable": ab.comparable,
        "measures": [{"measure": d.measure.value, "words": d.measure.words,
                      "reading": d.reading, "a": values(d.a), "b": values(d.b),
                      "b_over_a": _shift(d.ratio), "b_minus_a_s": _shift(d.shift)}
                     for d in ab.differences],
        "settings": [{"name": s.name, "a": s.a, "b": s.b} for s in ab.settings]})
