"""Statistics for few, expensive samples: Hodges-Lehmann estimates with exact intervals.

A bench has a handful of trials; timings are skewed and sometimes bimodal (OS file cache, GC),
so no normal approximation. The trial is the independent unit (its warm runs share its cache
and its moment on the machine): each trial gives one cold value and one warm value (the median
of its warm runs). The saving is the two-sample shift between the T cold and the T warm values:
the Hodges-Lehmann estimate (median of all cold - warm differences) with the exact
Mann-Whitney interval. Its smallest two-sided p-value is 2 / C(2T, T): 0.029 with 4 trials
(8 processes), where the paired signed-rank design needs 6 trials and 18 processes (2 / 2^T).
The smallest p-value the design can reach is stated instead of one that looks more decisive
than the data.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Spread:
    median: float
    low: float
    high: float
    n: int


@dataclass(frozen=True, slots=True)
class Shift:
    """How much larger x is than y (x - y): estimate and interval, with what N can support."""

    estimate: float
    low: float  # -inf when N is too small for the asked confidence
    high: float
    confidence: float  # the achieved confidence (exact; >= the one asked for, or 0)
    asked: float
    min_p: float  # smallest two-sided p-value reachable with these sample sizes
    n: int
    m: int

    @property
    def resolved(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)


def spread(values: list[float]) -> Spread:
    return Spread(statistics.median(values), min(values), max(values), len(values))


def _interval(ordered: list[float], counts: list[int], confidence: float, n: int,
              m: int) -> Shift:
    """Estimate and exact interval from sorted values and the null distribution's counts.

    The largest k with P(stat <= k) <= alpha/2 gives [v_(k+1), v_(N-k)] (1-based); when even
    k = 0 exceeds it, N is too small for the asked confidence and no interval is claimed.
    """
    total = sum(counts)
    estimate = statistics.median(ordered)
    min_p = min(1.0, 2 / total)
    cumulative, k = 0, -1
    for value, c in enumerate(counts):
        if (cumulative + c) / total > (1 - confidence) / 2:
            break
        cumulative += c
        k = value
    if k < 0:
        return Shift(estimate, -math.inf, math.inf, 0.0, confidence, min_p, n, m)
    return Shift(estimate, ordered[k], ordered[len(ordered) - 1 - k],
                 1 - 2 * cumulative / total, confidence, min_p, n, m)


def _inverted_exp(s: Shift) -> Shift:
    """A shift of log(x) - log(y) turned into the ratio y / x, with its interval."""

    def inv(v: float) -> float:
        if not math.isfinite(v):
            return 0.0 if v > 0 else math.inf
        try:
            return math.exp(-v)
        except OverflowError:  # a ratio beyond a float (values a writer chose)
            return math.inf

    return Shift(inv(s.estimate), inv(s.high), inv(s.low), s.confidence, s.asked, s.min_p,
                 s.n, s.m)


def signed_rank_counts(n: int) -> list[int]:
    """Number of sign patterns giving each signed-rank sum W+ = 0..n(n+1)/2 (no ties)."""
    counts = [1]
    for rank in range(1, n + 1):
        new = [0] * (len(counts) + rank)
        for w, c in enumerate(counts):
            new[w] += c  # this rank negative
            new[w + rank] += c  # this rank positive
        counts = new
    return counts


def paired_shift(d: list[float], confidence: float = 0.95) -> Shift:
    """One-sample Hodges-Lehmann (median of Walsh averages) with the exact Wilcoxon signed-rank
    interval: for per-trial differences, where the trial is the independent unit."""
    n = len(d)
    if n == 0:
        raise ValueError("need at least one difference")
    walsh = sorted((d[i] + d[j]) / 2 for i in range(n) for j in range(i, n))
    return _interval(walsh, signed_rank_counts(n), confidence, n, n)


def paired_ratio(cold: list[float], warm: list[float], confidence: float = 0.95) -> Shift:
    """warm / cold per trial, as a paired shift of logs, exponentiated and inverted."""
    if min(cold + warm) <= 0:
        raise ValueError("ratios need positive values")
    return _inverted_exp(paired_shift(
        [math.log(c) - math.log(w) for c, w in zip(cold, warm, strict=True)], confidence))


def rank_sum_counts(n: int, m: int) -> list[int]:
    """Number of orderings giving each Mann-Whitney U = 0..n*m for samples of n and m
    (no ties): c(n, m, u) = c(n - 1, m, u - m) + c(n, m - 1, u)."""
    table = {(0, j): [1] for j in range(m + 1)}
    for i in range(1, n + 1):
        table[(i, 0)] = [1]
        for j in range(1, m + 1):
            a, b = table[(i - 1, j)], table[(i, j - 1)]
            out = [0] * (i * j + 1)
            for u, c in enumerate(a):
                out[u + j] += c
            for u, c in enumerate(b):
                out[u] += c
            table[(i, j)] = out
    return table[(n, m)]


def two_sample_shift(x: list[float], y: list[float], confidence: float = 0.95) -> Shift:
    """How much larger x is than y: the two-sample Hodges-Lehmann estimate (median of all
    x_i - y_j) with the exact Mann-Whitney interval; x and y independent samples."""
    n, m = len(x), len(y)
    if n == 0 or m == 0:
        raise ValueError("need at least one value on each side")
    diffs = sorted(a - b for a in x for b in y)
    return _interval(diffs, rank_sum_counts(n, m), confidence, n, m)


def two_sample_ratio(cold: list[float], warm: list[float], confidence: float = 0.95) -> Shift:
    """warm / cold, as a two-sample shift of logs, exponentiated and inverted."""
    if min(cold + warm) <= 0:
        raise ValueError("ratios need positive values")
    return _inverted_exp(two_sample_shift([math.log(c) for c in cold],
                                          [math.log(w) for w in warm], confidence))


MAX_TRIALS = 100  # 2 / C(200, 100) ~ 2e-59: no confidence a document can state needs more


def fewest_trials(confidence: float) -> int:
    """The fewest trials whose smallest reachable p-value supports `confidence` (bounded: a
    confidence of 1, or one read from a document a writer chose, asks for no end of them)."""
    t = 1
    while t < MAX_TRIALS and 2 / math.comb(2 * t, t) > 1 - confidence:
        t += 1
    return t
