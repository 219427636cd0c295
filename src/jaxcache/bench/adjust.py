"""Covariate adjustment (ANCOVA / CUPED) of the saving by the work both arms do alike.

A job whose cache holds one big module but compiles many small ones in every run (each below
JAX's compile-time threshold, so never cached) spends the same work on those in the cold and in
the warm arm; on a loaded machine their compile time swings by seconds and swamps the saving.
The probe measures that time in every process, so it is a covariate x. The analysis of
covariance fits, over the trials,

    y = a + tau * cold + b * x + e        (y: wall seconds; one slope b for both arms)

and tau, the cold - warm difference at equal x, is the saving. Its interval is Student's t on
n1 + n2 - 3 degrees of freedom (two means and the slope are fitted):

    tau = (yc - yw) - b (xc - xw),   b = pooled within-arm slope,
    se^2 = s^2 (1/n1 + 1/n2 + (xc - xw)^2 / Sxx),   s^2 = within-arm residual SS / (n1 + n2 - 3)

It is unbiased for the saving only when the cache does not change x (E[x] is the same in both
arms): then b (xc - xw) has mean zero whatever b is, and removing it removes noise, not
saving. That is why x is work the cache never holds, and why it is checked, not assumed:
the same uncached modules (names and input shapes) in every process, x that varies, x balanced
between the arms (a pooled t test), and an adjusted estimate inside the wall-clock interval. When
one check fails the verdict falls back to the unadjusted (exact Mann-Whitney) interval, saying
why. docs/reference/bench.md, "Covariate adjustment", has the argument and when it does not hold.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from jaxcache.bench import estimates as stats

METHOD = "ancova"
COVARIATE = ("compile-or-load seconds of the modules the cache did not hold (compiled in "
             "every run, cold and warm)")
BALANCE_ALPHA = 0.05  # below this p the covariate differs between arms: no adjustment


@dataclass(frozen=True, slots=True)
class Unit:
    """One trial's value in one arm: wall seconds (y), covariate seconds (x), uncached modules."""

    y: float
    x: float
    modules: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Adjusted:
    """The adjusted saving, the checks behind it, and whether the verdict may use it."""

    used: bool
    why: str  # why it is used, or why not (the fallback's reason)
    shift: stats.Shift | None  # None: not computable (too few trials, no covariate)
    slope: float | None  # b: wall seconds per covariate second
    df: int
    se: float | None
    cold_x: float | None  # covariate means per arm, seconds
    warm_x: float | None
    balance_p: float | None  # two-sided p of "x differs between arms"
    modules: int  # uncached modules per process
    correlation: float | None = None  # within-arm correlation of wall time and covariate


# --- Student's t, without scipy (a runtime dependency only for this) ------------------------

def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta (Lentz; Numerical Recipes 6.4)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                   -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) \
        + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * _betacf(b, a, 1.0 - x) / b


def t_sf2(t: float, df: int) -> float:
    """Two-sided p-value P(|T| >= |t|) of Student's t with df degrees of freedom."""
    return _betainc(df / 2.0, 0.5, df / (df + t * t))


def t_quantile(p: float, df: int) -> float:
    """The p-quantile of Student's t (p > 0.5), by bisection on the two-sided tail."""
    tail = 2.0 * (1.0 - p)
    lo, hi = 0.0, 1.0
    while t_sf2(hi, df) > tail:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_sf2(mid, df) > tail:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


# --- the estimator ------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Fit:
    """The analysis of covariance of one bench: the saving at equal covariate and its parts."""

    shift: stats.Shift  # tau with its t interval
    slope: float  # b: wall seconds per covariate second
    se: float
    df: int
    correlation: float | None  # within-arm correlation of wall time and covariate


def _centered(values: Sequence[float]) -> list[float]:
    mean = statistics.fmean(values)
    return [v - mean for v in values]


def ancova(cold: Sequence[tuple[float, float]], warm: Sequence[tuple[float, float]],
           confidence: float = 0.95) -> Fit | None:
    """The fit from (y, x) per trial and arm; None when x does not vary within the arms or
    there are too few trials for a residual degree of freedom."""
    n1, n2 = len(cold), len(warm)
    df = n1 + n2 - 3
    if n1 < 2 or n2 < 2 or df < 1:
        return None
    yc, xc = _centered([y for y, _ in cold]), _centered([x for _, x in cold])
    yw, xw = _centered([y for y, _ in warm]), _centered([x for _, x in warm])
    sxx = sum(v * v for v in xc + xw)
    if sxx <= 1e-12:
        return None
    sxy = sum(a * b for a, b in zip(xc + xw, yc + yw, strict=True))
    syy = sum(v * v for v in yc + yw)
    slope = sxy / sxx
    dx = statistics.fmean(x for _, x in cold) - statistics.fmean(x for _, x in warm)
    tau = statistics.fmean(y for y, _ in cold) - statistics.fmean(y for y, _ in warm) \
        - slope * dx
    s2 = max(0.0, syy - sxy * sxy / sxx) / df
    se = math.sqrt(s2 * (1 / n1 + 1 / n2 + dx * dx / sxx))
    half = t_quantile(1 - (1 - confidence) / 2, df) * se
    r = max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy))) if syy > 0 else None
    return Fit(stats.Shift(tau, tau - half, tau + half, confidence, confidence, 0.0, n1, n2),
               slope, se, df, r)


def balance(cold: Sequence[float], warm: Sequence[float]) -> float | None:
    """Two-sided p of the pooled two-sample t test of x, cold against warm (None: no spread)."""
    n1, n2 = len(cold), len(warm)
    if n1 < 2 or n2 < 2:
        return None
    ss = sum(v * v for v in _centered(cold)) + sum(v * v for v in _centered(warm))
    s2 = ss / (n1 + n2 - 2)
    diff = statistics.fmean(cold) - statistics.fmean(warm)
    if s2 <= 0:
        return 1.0 if diff == 0 else 0.0
    return t_sf2(diff / math.sqrt(s2 * (1 / n1 + 1 / n2)), n1 + n2 - 2)


def adjust(cold: Sequence[Unit], warm: Sequence[Unit], unadjusted: stats.Shift,
           confidence: float = 0.95) -> Adjusted:
    """The adjusted saving and whether the verdict may use it (every check passed)."""
    modules = len(cold[0].modules) if cold else 0
    cold_x = statistics.fmean(u.x for u in cold) if cold else None
    warm_x = statistics.fmean(u.x for u in warm) if warm else None

    def made(used: bool, why: str, fit: Fit | None = None, p: float | None = None) -> Adjusted:
        return Adjusted(used, why, fit.shift if fit else None, fit.slope if fit else None,
                        fit.df if fit else len(cold) + len(warm) - 3, fit.se if fit else None,
                        cold_x, warm_x, p, modules, fit.correlation if fit else None)

    if not cold or not warm or modules == 0:
        return made(False, "no module compiled without the cache in these runs: nothing to "
                    "adjust by")
    first = cold[0].modules
    if any(u.modules != first for u in list(cold) + list(warm)):
        return made(False, "the modules compiled without the cache differ between runs (names "
                    "or input shapes), so they are not the same work in both arms")
    fewest = stats.fewest_trials(confidence)
    if len(cold) < fewest or len(warm) < fewest:
        return made(False, f"{min(len(cold), len(warm))} trials: the adjustment needs at least "
                    f"the {fewest} the exact interval needs (its checks and its t interval rest "
                    "on them)")
    fit = ancova([(u.y, u.x) for u in cold], [(u.y, u.x) for u in warm], confidence)
    if fit is None:
        return made(False, "the covariate does not vary within the arms: it cannot explain any "
                    "noise")
    p = balance([u.x for u in cold], [u.x for u in warm])
    if p is not None and p < BALANCE_ALPHA:
        return made(False, f"the uncached modules compiled in {cold_x:.2f} s cold against "
                    f"{warm_x:.2f} s warm (p = {p:.3f} < {BALANCE_ALPHA:g}): the cache seems to "
                    "change that work, so adjusting by it would remove part of the saving or "
                    "of its cost", fit, p)
    estimate = fit.shift.estimate
    if unadjusted.resolved and not unadjusted.low <= estimate <= unadjusted.high:
        return made(False, f"the adjusted estimate ({estimate:.2f} s) lies outside the "
                    f"wall-clock interval [{unadjusted.low:.2f} - {unadjusted.high:.2f}]: the "
                    "two disagree", fit, p)
    balanced = "" if p is None else f" (p = {p:.2f})"
    return made(True, f"the same {modules} uncached modules in every run, balanced between the "
                f"arms{balanced}, estimate inside the wall-clock interval", fit, p)


def judged(adjusted: Adjusted | None, unadjusted: stats.Shift) -> stats.Shift:
    """The saving a verdict judges: the adjusted one when every check passed, else the
    unadjusted one (the one rule for bench's verdict, its report and the design study)."""
    if adjusted is not None and adjusted.used and adjusted.shift is not None:
        return adjusted.shift
    return unadjusted
