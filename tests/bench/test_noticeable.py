"""One definition of "noticeable" for bench and decide (issue 16): the same numbers get the
same answer from both, an interval that straddles the bar is INCONCLUSIVE, and the advice
matches the test that failed."""

from __future__ import annotations

import json
import math

import pytest

from jaxcache.bench import analysis, noticeable
from jaxcache.bench import estimates as stats
from jaxcache.bench.sample import PHASES
from jaxcache.decide import AuditFacts, BenchFacts
from jaxcache.decide import decide as decide_facts


def decide(audit, benches, **kw):
    """decide on documents, each read as decide's edge reads it."""
    return decide_facts(AuditFacts.from_json(audit), [BenchFacts.from_json(b) for b in benches],
                        **kw)


AUDIT = {"verdict": "PRIVATE", "judged_for": {"user": "me"}, "writers": [],
         "untrusted_writers": [], "findings": [], "resolved": "/c"}


def shift(est: float, low: float, high: float, n: int = 6) -> stats.Shift:
    return stats.Shift(est, low, high, 0.96, 0.95, 0.002, n, n)


def test_the_bar_is_the_larger_of_seconds_and_share_of_start_up():
    bar = noticeable.Bar()
    assert (bar.min_s, bar.min_fraction) == (1.0, 0.05)
    assert bar.need(10.0) == 1.0 and bar.need(40.8) == pytest.approx(2.04)
    assert bar.need(None) == 1.0
    assert "the larger of 1 s and 5% of the 40.80 s cold start-up" in bar.words(40.8)


@pytest.mark.parametrize("low,high,outcome", [
    (2.1, 3.0, "noticeable"),  # the whole interval clears 2.04 s
    (2.04, 3.0, "noticeable"),  # at the bar counts
    (0.96, 2.88, "inconclusive"),  # the numbers: straddles 2.04 s
    (0.2, 1.9, "too-small"),  # all of it below
    (-0.5, 0.3, "too-small"),
])
def test_judged_on_the_interval(low, high, outcome):
    j = noticeable.judge(shift((low + high) / 2, low, high), 40.8)
    assert j.outcome == outcome and j.met == (outcome == "noticeable")
    assert j.need_s == pytest.approx(2.04) and "2.04 s" in j.why
    if outcome == "inconclusive":
        assert j.suggest_trials is not None and j.suggest_trials > 6
        assert f"-t {j.suggest_trials}" in noticeable.advice(j)
    else:
        assert j.suggest_trials is None


def test_too_few_trials_are_inconclusive_and_say_how_many_are_needed():
    unresolved = stats.Shift(3.0, -math.inf, math.inf, 0.0, 0.95, 0.33, 1, 1)
    j = noticeable.judge(unresolved, 20.0)
    assert j.outcome == "inconclusive" and j.low is None
    assert j.suggest_trials == stats.fewest_trials(0.95) == 4
    assert "-t 4" in noticeable.advice(j) and "cannot support a 95% interval" in j.why


def test_advice_names_the_failed_test():
    small = noticeable.judge(shift(0.5, 0.2, 0.8), 10.0)
    undecided = noticeable.judge(shift(1.2, 0.6, 1.8), 10.0)
    assert "already running" in noticeable.advice(small)
    assert "more trials" not in noticeable.advice(small)
    assert "more trials" in noticeable.advice(undecided)
    assert "already running" not in noticeable.advice(undecided)


def _sample(kind: str, trial: int, wall: float):
    """A ProcessSample with only what analyse reads, made through the real dataclass."""
    from dataclasses import fields

    from jaxcache.bench.sample import ProcessSample

    values = {}
    for f in fields(ProcessSample):
        values[f.name] = {"kind": kind, "trial": trial, "index": 0, "wall_s": wall,
                          "phases": {p: wall / len(PHASES) for p in PHASES},
                          "first_step_s": wall, "write_overhead_s": 0.0, "bytes_after": 100,
                          "ranks": (), "missed": (), "uncached": (), "uncached_s": 0.0}.get(f.name)
    return ProcessSample(**values)


def _analyse(cold: list[float], warm: list[float]):
    c = [_sample("cold", i, w) for i, w in enumerate(cold, 1)]
    w = [_sample("warm", i, w) for i, w in enumerate(warm, 1)]
    return analysis.analyse(c, w, confidence=0.95, noise_s=0.1)


def _bench_doc(a) -> dict:
    """What decide reads from a bench --json: the summary bench_json writes."""
    from jaxcache.report.bench.json import _shift, _spread

    return {"command": ["job"], "comparable": {}, "samples": [
        {"kind": "warm", "hits": 1, "missed_ranks": []}],
        "summary": {"verdict": a.verdict, "message": a.message,
                    "wall": {"cold": _spread(a.wall[0]), "warm": _spread(a.wall[1])},
                    "phases": {}, "saving_s": _shift(a.saving),
                    "noticeable_bar": {"min_saving_s": a.bar.min_s,
                                       "min_fraction": a.bar.min_fraction}}}


@pytest.mark.parametrize("cold,warm,bench_verdict,decision", [
    # 40.8 s start-ups, saving ~2 s with an interval across 2.04 s: the case
    ([40.8, 41.9, 40.2, 41.5, 40.6, 41.1], [38.3, 40.9, 37.9, 39.6, 38.8, 39.7],
     "inconclusive", "INCONCLUSIVE"),
    ([10.0, 10.2, 10.1, 9.9, 10.3, 10.05], [7.0, 7.1, 6.9, 7.2, 7.05, 6.95], "saves", "PRIVATE"),
    ([10.0, 10.2, 10.1, 9.9, 10.3, 10.05], [9.8, 9.9, 9.7, 9.75, 10.0, 9.85], "too-small",
     "NOT-WORTH-IT"),
])
def test_bench_and_decide_agree_on_the_same_numbers(cold, warm, bench_verdict, decision):
    a = _analyse(cold, warm)
    assert a.verdict == bench_verdict, a.message
    d = decide(AUDIT, [json.loads(json.dumps(_bench_doc(a)))])
    assert d.verdict == decision
    evidence = " ".join(d.tests[2].evidence)
    assert a.judgement is not None and a.judgement.why in evidence  # the same words
    assert d.exit_code == (0 if decision == "PRIVATE" else 1)
    if decision == "INCONCLUSIVE":
        assert d.tests[2].outcome == "inconclusive"
        assert any(f"-t {a.judgement.suggest_trials}" in x for x in d.advice)
        assert not any("already running" in x for x in d.advice)
    if decision == "NOT-WORTH-IT":
        assert any("already running" in x for x in d.advice)


def test_decide_uses_the_bar_the_bench_used_unless_told_otherwise():
    a = analysis.analyse([_sample("cold", i, 10.0 + i / 10) for i in range(1, 7)],
                         [_sample("warm", i, 7.0 + i / 10) for i in range(1, 7)],
                         confidence=0.95, noise_s=0.1, bar=noticeable.Bar(5.0, 0.05))
    assert a.verdict == "too-small"  # 3 s saved, the bench asked for 5 s
    doc = _bench_doc(a)
    assert decide(AUDIT, [doc]).verdict == "NOT-WORTH-IT"
    assert decide(AUDIT, [doc], min_saving_s=1.0).verdict == "PRIVATE"


def test_warm_runs_that_missed_get_advice_about_the_miss_not_the_steps():
    a = _analyse([10.0] * 6, [7.0] * 6)
    doc = _bench_doc(a)
    doc["summary"]["verdict"] = "warm-missed"
    d = decide(AUDIT, [doc])
    assert d.verdict == "NOT-WORTH-IT" and d.tests[2].outcome == "missed"
    assert any("jaxcache explain" in x for x in d.advice)
    assert not any("already running" in x for x in d.advice)


def test_older_bench_results_are_still_judged():
    a = _analyse([10.0, 10.2, 10.1, 9.9, 10.3, 10.05], [7.0, 7.1, 6.9, 7.2, 7.05, 6.95])
    doc = _bench_doc(a)
    doc["summary"]["verdict"] = "no-significant-difference"  # before issue 16
    del doc["summary"]["noticeable_bar"]
    assert decide(AUDIT, [doc]).verdict == "PRIVATE"


def test_suggested_trials_are_bounded_and_a_saving_on_the_bar_is_called_marginal():
    near = noticeable.judge(shift(2.8, 1.9, 3.7), 40.8)  # needs a narrower interval: -t 9
    assert (near.outcome, near.suggest_trials, near.borderline) == ("inconclusive", 9, False)
    assert "marginal" not in noticeable.advice(near)
    on_bar = noticeable.judge(shift(2.0, 0.9, 3.1), 40.8)  # 2.00 s against 2.04 s
    assert on_bar.suggest_trials == 4 * 6 and on_bar.borderline
    assert "-t 24" in noticeable.advice(on_bar) and "marginal" in noticeable.advice(on_bar)


def test_a_saving_measured_under_lower_thresholds_says_to_run_the_job_the_same_way():
    """A bench run with --min-compile-time: decide's PRIVATE carries the flag to run the job
    with (at JAX's defaults it would write less, or nothing); a bench at the defaults adds
    nothing of the kind."""
    a = _analyse([10.0, 10.2, 10.1, 9.9, 10.3, 10.05], [7.0, 7.1, 6.9, 7.2, 7.05, 6.95])
    doc = json.loads(json.dumps(_bench_doc(a)))
    assert not any("--min-compile-time" in x for x in decide(AUDIT, [doc]).advice)
    doc["thresholds"] = {"set_by_bench": {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0.0"}}
    d = decide(AUDIT, [doc])
    assert d.verdict == "PRIVATE"
    assert any("jaxcache run --min-compile-time 0.0 -- CMD" in x for x in d.advice), d.advice


def test_runs_that_cached_different_modules_get_advice_that_stands_alone():
    """Cold runs that wrote 1 to 2 entries: the advice says what the mixed saving means and how
    to measure runs that do the same work, without sending the reader to the thresholds line,
    which may say "keep the thresholds" (a new user's fifth trial read the two as opposed)."""
    from types import SimpleNamespace

    from jaxcache.report.bench.text import unstable

    def run(kind: str, written: int) -> SimpleNamespace:
        return SimpleNamespace(kind=kind, ok=True, written=written)

    mixed = SimpleNamespace(samples=[run("cold", 1), run("cold", 2), run("warm", 0)])
    [line] = unstable(mixed)  # type: ignore[arg-type]
    assert line.startswith("what to do: the cold runs wrote 1 to 2 entries: ")
    assert "as your runs at this threshold will" in line and "--min-compile-time" in line
    assert "thresholds line" not in line
    same = SimpleNamespace(samples=[run("cold", 2), run("cold", 2), run("warm", 0)])
    assert unstable(same) == []  # type: ignore[arg-type]
