"""The covariate adjustment of the bench's saving (bench/adjust.py): the estimator against an
independent least-squares fit, the checks that make it fall back, and a real bench of a job
whose cache holds one module while others compile in every run."""

from __future__ import annotations

import json
import random
import sys

import pytest
from support import paths
from support.jobs import jaxcache

from jaxcache.bench import adjust
from jaxcache.bench import estimates as stats
from jaxcache.documents import schemas

ROOT = paths.CHECKOUT
COVARIATE_JOB = str(ROOT / "benchmarks" / "covariate_job.py")
MODS = ("small_0 (256,)", "small_1 (256,)")


def units(pairs: list[tuple[float, float]], modules: tuple[str, ...] = MODS) -> list[adjust.Unit]:
    return [adjust.Unit(y, x, modules) for y, x in pairs]


@pytest.mark.parametrize(("p", "df", "want"), [(0.975, 5, 2.570582), (0.975, 10, 2.228139),
                                               (0.995, 3, 5.840909), (0.95, 30, 1.697261)])
def test_t_quantile_matches_the_table(p, df, want):
    assert adjust.t_quantile(p, df) == pytest.approx(want, abs=2e-6)
    assert adjust.t_sf2(want, df) == pytest.approx(2 * (1 - p), abs=1e-6)


def test_ancova_agrees_with_an_independent_least_squares_fit():
    np = pytest.importorskip("numpy")
    rng = random.Random(7)
    cold = [(10 + 2 * x + rng.gauss(0, 0.3), x) for x in (rng.uniform(1, 5) for _ in range(6))]
    warm = [(7 + 2 * x + rng.gauss(0, 0.3), x) for x in (rng.uniform(1, 5) for _ in range(5))]
    fit = adjust.ancova(cold, warm)
    assert fit is not None
    shift, slope, se, df = fit.shift, fit.slope, fit.se, fit.df
    # y = a + tau * cold + b * x: ordinary least squares, its covariance from (X'X)^-1
    design = np.array([[1.0, 1.0, x] for _, x in cold] + [[1.0, 0.0, x] for _, x in warm])
    y = np.array([v for v, _ in cold] + [v for v, _ in warm])
    beta, rss, _, _ = np.linalg.lstsq(design, y, rcond=None)
    cov = float(rss[0]) / (len(y) - 3) * np.linalg.inv(design.T @ design)
    assert df == len(y) - 3
    assert shift.estimate == pytest.approx(beta[1], rel=1e-9)
    assert slope == pytest.approx(beta[2], rel=1e-9)
    assert se == pytest.approx(float(np.sqrt(cov[1, 1])), rel=1e-9)
    half = adjust.t_quantile(0.975, df) * se
    assert (shift.low, shift.high) == pytest.approx((beta[1] - half, beta[1] + half))


def noisy_arms(seed: int, saving: float = 1.5, n: int = 4) -> tuple[list[adjust.Unit],
                                                                     list[adjust.Unit]]:
    """Wall time = the uncached modules' compile time (swinging by seconds) + a little else;
    the cold arm pays `saving` more."""
    rng = random.Random(seed)

    def arm(extra: float) -> list[tuple[float, float]]:
        out = []
        for _ in range(n):
            x = rng.uniform(3.0, 9.0)
            out.append((4.0 + extra + x + rng.gauss(0, 0.05), x))
        return out

    return units(arm(saving)), units(arm(0.0))


def unadjusted(cold: list[adjust.Unit], warm: list[adjust.Unit]) -> stats.Shift:
    return stats.two_sample_shift([u.y for u in cold], [u.y for u in warm])


def test_the_adjustment_removes_the_shared_noise_and_keeps_the_saving():
    narrower = 0
    for seed in range(20):
        cold, warm = noisy_arms(seed)
        wall = unadjusted(cold, warm)
        adj = adjust.adjust(cold, warm, wall)
        assert adj.shift is not None and adj.modules == 2
        assert adj.slope == pytest.approx(1.0, abs=0.2)
        if adj.used:
            assert adj.shift.low <= 1.5 <= adj.shift.high
            assert wall.low <= adj.shift.estimate <= wall.high
        narrower += (adj.shift.high - adj.shift.low) < (wall.high - wall.low) / 3
    assert narrower >= 18  # the wall interval is seconds wide, the adjusted a fraction of it


def test_different_uncached_modules_are_not_the_same_work():
    cold, warm = noisy_arms(1)
    warm = [adjust.Unit(u.y, u.x, ("small_0 (512,)",)) for u in warm]
    adj = adjust.adjust(cold, warm, unadjusted(cold, warm))
    assert not adj.used and "differ between runs" in adj.why and adj.shift is None


def test_a_cache_that_changes_the_covariate_is_not_adjusted_by_it():
    cold, warm = noisy_arms(2)
    # the warm arm's uncached modules now compile 8 s faster: the hit changed other work
    warm = [adjust.Unit(u.y - 8.0, u.x - 8.0, u.modules) for u in warm]
    adj = adjust.adjust(cold, warm, unadjusted(cold, warm))
    assert not adj.used and "seems to change that work" in adj.why
    assert adj.balance_p is not None and adj.balance_p < adjust.BALANCE_ALPHA


def test_too_few_trials_or_no_spread_fall_back():
    cold, warm = noisy_arms(3, n=3)
    adj = adjust.adjust(cold, warm, unadjusted(cold, warm))
    assert not adj.used and "at least the 4" in adj.why
    flat = units([(5.0 + i, 2.0) for i in range(4)]), units([(3.0 + i, 2.0) for i in range(4)])
    adj = adjust.adjust(*flat, unadjusted(*flat))
    assert not adj.used and "does not vary" in adj.why
    none = adjust.adjust(units([(5.0, 1.0)] * 4, ()), units([(3.0, 1.0)] * 4, ()),
                         unadjusted(*flat))
    assert not none.used and none.modules == 0 and "nothing to adjust by" in none.why


def test_an_estimate_outside_the_wall_interval_falls_back():
    cold, warm = noisy_arms(4)
    wall = unadjusted(cold, warm)
    assert adjust.adjust(cold, warm, wall).used
    off = stats.Shift(10.0, 9.0, 11.0, wall.confidence, wall.asked, wall.min_p, wall.n, wall.m)
    adj = adjust.adjust(cold, warm, off)
    assert not adj.used and "outside the wall-clock interval" in adj.why


@pytest.fixture(scope="module")
def covariate_bench(tmp_path_factory):
    """One cached module and the rest kept out of the cache by entry size (not by compile
    time, which depends on the machine's speed): a real -t 4 -k 1 bench."""
    pytest.importorskip("jax")
    out = tmp_path_factory.mktemp("adjust") / "out"
    proc = jaxcache("bench", "-t", "4", "-k", "1", "--no-prime", "--timeout", "300",
                    "--min-compile-time", "0", "--min-entry-size", "9000", "--noise", "0",
                    "--min-saving", "0", "--min-fraction", "0", "--out", str(out), "--",
                    sys.executable, COVARIATE_JOB, "--big", "20", "--small", "6", "--ops", "10")
    return proc, json.loads((out / "bench.json").read_text())


def test_a_real_bench_reports_both_savings_and_judges_the_one_it_says(covariate_bench):
    proc, doc = covariate_bench
    summary = doc["summary"]
    # the verdict is a measurement (a loaded machine can leave it undecided): what is checked
    # is that both savings are reported and the exit code follows the verdict
    assert summary["verdict"] in ("saves", "inconclusive", "too-small"), proc.stdout
    assert proc.returncode == (0 if summary["verdict"] == "saves" else 1), proc.stderr
    pytest.importorskip("jsonschema").validate(doc, schemas.load("bench"))
    adj = summary["adjustment"]
    # the small modules and JAX's own helpers stay out of the cache in every run, alike
    assert adj["uncached_modules"] >= 6
    assert {s["uncached_modules"] for s in doc["samples"]} == {adj["uncached_modules"]}
    assert all(s["uncached_s"] > 0 for s in doc["samples"])
    assert summary["adjusted_saving_s"]["estimate"] is not None
    assert summary["saving_s"]["estimate"] is not None  # the unadjusted figure stays beside it
    assert summary["judged_on"] == ("adjusted" if adj["used"] else "unadjusted")
    assert adj["method"] == "ancova" and adj["why"]
    assert "adjusted saving (ANCOVA by the " in proc.stdout
    assert ("the verdict judges this one" in proc.stdout) == adj["used"]
