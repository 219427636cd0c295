"""The bench statistics against scipy's exact Mann-Whitney test as the oracle."""

from __future__ import annotations

import math
import random

import pytest

from jaxcache.bench import stats

scipy_stats = pytest.importorskip("scipy.stats")


@pytest.mark.parametrize("n,m", [(1, 1), (2, 3), (3, 6), (5, 5), (4, 12)])
def test_null_distribution_is_a_distribution(n, m):
    counts = stats.mann_whitney_counts(n, m)
    assert len(counts) == n * m + 1
    assert sum(counts) == math.comb(n + m, n)
    assert counts == counts[::-1]  # symmetric


def _p(x, y):
    return scipy_stats.mannwhitneyu(x, y, alternative="two-sided", method="exact").pvalue


@pytest.mark.parametrize("seed,n,m", [(1, 3, 6), (2, 5, 10), (3, 4, 4), (4, 6, 9)])
def test_interval_is_the_exact_test_inverted(seed, n, m):
    rng = random.Random(seed)
    x = [5 + rng.gauss(0, 0.3) for _ in range(n)]
    y = [3 + rng.gauss(0, 0.3) for _ in range(m)]
    s = stats.hodges_lehmann(x, y, 0.95)
    assert s.resolved and s.low <= s.estimate <= s.high
    alpha = 1 - s.confidence
    eps = 1e-9
    # shifting by a value inside the interval is not rejected; just outside, it is
    for inside in (s.low + eps, s.high - eps):
        assert _p([v - inside for v in x], y) > alpha - 1e-12
    for outside in (s.low - eps, s.high + eps):
        assert _p([v - outside for v in x], y) <= alpha + 1e-12
    assert s.confidence >= 0.95


def test_estimate_is_the_median_of_pairwise_differences():
    x, y = [10.0, 11.0, 13.0], [1.0, 2.0]
    s = stats.hodges_lehmann(x, y)
    assert s.estimate == 9.5  # diffs 8 9 9 10 11 12 -> median 9.5


def test_too_few_samples_say_so():
    s = stats.hodges_lehmann([5.0, 5.1], [3.0, 3.1], 0.95)
    assert not s.resolved and s.confidence == 0.0
    assert s.min_p == pytest.approx(2 / math.comb(4, 2))
    assert s.min_p == pytest.approx(_p([10, 11], [1, 2]))


def test_ratio():
    x, y = [4.0, 4.2, 3.9, 4.1], [2.0, 2.1, 1.9, 2.05, 2.0]
    r = stats.ratio(x, y)
    assert 0.45 < r.estimate < 0.55 and r.low <= r.estimate <= r.high


@pytest.mark.parametrize("n", [1, 4, 6, 9])
def test_signed_rank_null_distribution(n):
    counts = stats.signed_rank_counts(n)
    assert len(counts) == n * (n + 1) // 2 + 1 and sum(counts) == 2 ** n
    assert counts == counts[::-1]


@pytest.mark.parametrize("seed,n", [(1, 6), (2, 8), (3, 10)])
def test_paired_interval_is_the_exact_signed_rank_test_inverted(seed, n):
    rng = random.Random(seed)
    d = [1.5 + rng.gauss(0, 0.4) for _ in range(n)]
    s = stats.paired_shift(d, 0.95)
    assert s.resolved and s.low <= s.estimate <= s.high and s.confidence >= 0.95
    alpha = 1 - s.confidence
    eps = 1e-9

    def p(shift):
        return scipy_stats.wilcoxon([v - shift for v in d], method="exact").pvalue

    for inside in (s.low + eps, s.high - eps):
        assert p(inside) > alpha - 1e-12
    for outside in (s.low - eps, s.high + eps):
        assert p(outside) <= alpha + 1e-12


def test_paired_needs_six_trials_for_95():
    assert not stats.paired_shift([1.0, 1.1, 0.9, 1.2, 1.05], 0.95).resolved
    s = stats.paired_shift([1.0, 1.1, 0.9, 1.2, 1.05, 0.95], 0.95)
    assert s.resolved and s.min_p == pytest.approx(2 / 64)
    assert s.confidence == pytest.approx(1 - 2 / 64)
