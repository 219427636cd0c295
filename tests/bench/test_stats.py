"""The bench statistics against scipy's exact Mann-Whitney test as the oracle."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from jaxcache.bench import estimates as stats

scipy_stats = pytest.importorskip("scipy.stats")


def test_estimate_is_the_median_of_walsh_averages():
    # Walsh averages of 1, 2, 4: 1 1.5 2 2.5 3 4 -> median 2.25
    assert stats.paired_shift([1.0, 2.0, 4.0]).estimate == 2.25


def test_paired_ratio():
    cold, warm = [4.0, 4.2, 3.9, 4.1, 4.05, 3.95], [2.0, 2.1, 1.9, 2.05, 2.0, 2.02]
    r = stats.paired_ratio(cold, warm)
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


def test_rank_sum_counts_are_the_mann_whitney_null():
    assert stats.rank_sum_counts(2, 2) == [1, 1, 2, 1, 1]
    counts = stats.rank_sum_counts(4, 5)
    assert sum(counts) == math.comb(9, 4) and counts == counts[::-1]


def test_exact_p_values_agree_with_scipy():

    rng = random.Random(7)
    for n, m in ((4, 4), (3, 5), (5, 5)):
        for _ in range(20):
            x = [rng.random() for _ in range(n)]
            y = [rng.random() + 0.3 for _ in range(m)]
            u = sum(a > b for a in x for b in y)
            counts = stats.rank_sum_counts(n, m)
            total = sum(counts)
            p = min(1.0, 2 * min(sum(counts[:u + 1]), sum(counts[u:])) / total)
            expected = scipy_stats.mannwhitneyu(x, y, method="exact").pvalue
            assert p == pytest.approx(expected)


def test_four_trials_resolve_a_clear_saving_three_cannot():
    cold, warm = [10.1, 10.4, 9.8, 10.2], [7.9, 8.2, 8.0, 8.4]
    s = stats.two_sample_shift(cold, warm, 0.95)
    assert s.resolved and s.min_p == pytest.approx(2 / 70)
    assert s.low == pytest.approx(min(cold) - max(warm)) and s.high == pytest.approx(
        max(cold) - min(warm))
    assert s.estimate == pytest.approx(statistics.median(a - b for a in cold for b in warm))
    assert not stats.two_sample_shift(cold[:3], warm[:3], 0.95).resolved
    assert stats.fewest_trials(0.95) == 4 and stats.fewest_trials(0.99) == 5
    # a confidence of 1 (or read from a document a writer chose) asks for no end of trials:
    # bounded, never a hang (the bench fuzzer found one)
    assert stats.fewest_trials(1.0) == stats.fewest_trials(2.0) == stats.MAX_TRIALS
    r = stats.two_sample_ratio(cold, warm)
    assert 0.7 < r.low <= r.estimate <= r.high < 0.9
