"""What a "noticeable" saving is: the one rule `bench` and `decide` both apply.

A saving is noticeable when the lower bound of its interval reaches the bar: the larger of a
minimum number of seconds and a minimum share of the cold start-up (the cold process's median
wall time). Judged on the interval, so three answers, not two:

  noticeable    the whole interval is at or above the bar
  too-small     the whole interval is below the bar: more trials will not change that
  inconclusive  the interval straddles the bar, or the trials are too few for any interval at
                the confidence asked: more trials (`-t N`) can decide it

Before this module bench called any saving above a 0.1 s noise band a saving and decide asked
for max(1 s, 5%), so the same numbers got opposite answers. The defaults live here, once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from jaxcache.bench import estimates as stats
from jaxcache.bench.bench_document import Interval

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

MIN_SAVING_S = 1.0  # seconds saved per start, at least
MIN_FRACTION = 0.05  # ...and at least this share of the cold start-up

NOTICEABLE, TOO_SMALL, INCONCLUSIVE = "noticeable", "too-small", "inconclusive"
MAX_SUGGESTED_TRIALS = 1000  # bench's own bound on -t
GROWTH = 4  # suggest at most this many times the trials run: beyond, the estimate sits on the bar


@dataclass(frozen=True, slots=True)
class Bar:
    """The thresholds in effect: seconds and share of start-up."""

    min_s: float = MIN_SAVING_S
    min_fraction: float = MIN_FRACTION

    def need(self, cold_wall_s: float | None) -> float:
        """Seconds a saving must reach for a start-up of `cold_wall_s` seconds."""
        if cold_wall_s is None or not math.isfinite(cold_wall_s):
            return self.min_s
        return max(self.min_s, self.min_fraction * cold_wall_s)

    def words(self, cold_wall_s: float | None) -> str:
        """'noticeable = lower bound >= 2.04 s (the larger of 1 s and 5% of the 40.80 s cold
        start-up)': the rule with its numbers, the same in every output."""
        start = (f"{self.min_fraction:.0%} of the {cold_wall_s:.2f} s cold start-up"
                 if cold_wall_s is not None else f"{self.min_fraction:.0%} of start-up")
        return (f"noticeable = the interval's lower bound >= {self.need(cold_wall_s):.2f} s "
                f"(the larger of {self.min_s:g} s and {start})")


DEFAULT_BAR = Bar()


@dataclass(frozen=True, slots=True)
class Judgement:
    """One saving judged against the bar."""

    outcome: str  # noticeable | too-small | inconclusive
    need_s: float  # the bar in seconds for this start-up
    min_s: float
    min_fraction: float
    cold_wall_s: float | None
    estimate: float
    low: float | None  # None: the trials cannot support an interval at this confidence
    high: float | None
    confidence: float  # achieved (0 when unresolved)
    trials: int
    suggest_trials: int | None  # for inconclusive: a -t that can decide it
    why: str  # the test in words, with its numbers
    borderline: bool = False  # inconclusive, and the estimate so near the bar that even
    #                           GROWTH times the trials would likely not decide it

    @property
    def met(self) -> bool:
        return self.outcome == NOTICEABLE


def _more_trials(saving: stats.Shift, need: float) -> tuple[int, bool]:
    """Trials that would likely shrink the interval enough to clear the bar or fall below it
    (the interval narrows roughly with the square root of the trials), at most GROWTH times
    those run; and whether that is too few (the estimate sits on the bar)."""
    n = saving.n
    half = (saving.high - saving.low) / 2
    room = abs(saving.estimate - need)
    most = min(MAX_SUGGESTED_TRIALS, GROWTH * n)
    if room <= 0 or half <= 0:
        return most, True
    wanted = max(n + 1, math.ceil(n * (half / room) ** 2))
    return min(wanted, most), wanted > most


def judge(saving: stats.Shift, cold_wall_s: float | None, bar: Bar = DEFAULT_BAR) -> Judgement:
    """The saving (cold - warm wall, per start) against the bar, on its interval."""
    need = bar.need(cold_wall_s)
    rule = bar.words(cold_wall_s)

    def made(outcome: str, why: str, suggest: int | None = None,
             borderline: bool = False) -> Judgement:
        resolved = saving.resolved
        return Judgement(outcome, need, bar.min_s, bar.min_fraction, cold_wall_s,
                         saving.estimate, saving.low if resolved else None,
                         saving.high if resolved else None,
                         saving.confidence if resolved else 0.0, saving.n, suggest, why,
                         borderline)

    if not saving.resolved:
        fewest = stats.fewest_trials(saving.asked)
        return made(INCONCLUSIVE, f"{stats_trials(saving.n)} cannot support a "
                    f"{saving.asked:.0%} interval (smallest reachable p = {saving.min_p:.3f}; "
                    f"{fewest} trials are the fewest): {rule} cannot be tested",
                    max(fewest, saving.n + 1))
    span = (f"{saving.estimate:.2f} s [{saving.low:.2f} - {saving.high:.2f}] "
            f"({saving.confidence:.1%} CI)")
    if saving.low >= need:
        return made(NOTICEABLE, f"met: saves {span}; {rule}")
    if saving.high < need:
        return made(TOO_SMALL, f"not met: saves {span}, all of it below {need:.2f} s; {rule}")
    return made(INCONCLUSIVE, f"undecided: saves {span}, an interval that straddles "
                f"{need:.2f} s; {rule}", *_more_trials(saving, need))


def stats_trials(n: int) -> str:
    return f"{n} trial" if n == 1 else f"{n} trials"


def advice(j: Judgement) -> str:
    """What to do, matching the test that failed."""
    if j.outcome == INCONCLUSIVE:
        text = (f"the trials cannot decide whether the saving is noticeable: run more trials, "
                f"e.g. `jaxcache bench -t {j.suggest_trials}` (or --max-trials with "
                "--until-width), on a quiet machine")
        if j.borderline:
            text += (f"; the estimate ({j.estimate:.2f} s) sits close to the bar "
                     f"({j.need_s:.2f} s), so it may stay undecided: at best a marginal saving")
        return text
    if j.outcome == TOO_SMALL:
        return (f"the saving is below {j.need_s:.2f} s even at the top of its interval: the "
                "cache only skips compiles at start-up and does not speed up the steps of a "
                "model that is already running; look at the start-up phases for where time goes")
    return "the saving is noticeable at start-up"


def as_dict(j: Judgement) -> dict[str, object]:
    """For the JSON outputs (bench summary.noticeable, decide evidence)."""
    return {"outcome": j.outcome, "met": j.met, "need_s": j.need_s, "min_saving_s": j.min_s,
            "min_fraction": j.min_fraction, "cold_wall_s": j.cold_wall_s,
            "estimate_s": j.estimate, "low_s": j.low, "high_s": j.high,
            "confidence": j.confidence, "trials": j.trials,
            "suggest_trials": j.suggest_trials, "borderline": j.borderline, "why": j.why}


def shift_from_json(doc: Mapping[str, object], confidence: float = 0.95) -> stats.Shift | None:
    """A bench JSON's summary.saving_s back into a Shift (benchmarks/ re-judge it; decide
    reads the result typed: bench/bench_document.py)."""
    return Interval.from_json(doc).shift(confidence)
