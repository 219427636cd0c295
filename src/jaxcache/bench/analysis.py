"""From samples to conclusions: per-phase spreads, the saving with its interval, amortization."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from jaxcache.bench import adjust, noticeable, per_rank
from jaxcache.bench import estimates as stats
from jaxcache.bench.sample import PHASES, ProcessSample
from jaxcache.text import Tone


class Outcome(StrEnum):
    """A bench's verdict: what analyze() concludes, and what a bench result's summary says
    (documents/read.py's BENCH_VERDICTS, which older results' words extend)."""

    SAVES = "saves"
    TOO_SMALL = "too-small"
    INCONCLUSIVE = "inconclusive"
    NO_SIGNIFICANT_DIFFERENCE = "no-significant-difference"  # before one noticeable rule
    NOTHING_CACHED = "nothing-cached"
    WARM_MISSED = "warm-missed"
    NO_DATA = "no-data"

    def __str__(self) -> str:
        return self.value

    @property
    def measured(self) -> bool:
        """False where there is no saving to judge: nothing cached, warm runs that missed,
        no trial with both arms."""
        return self not in (Outcome.NOTHING_CACHED, Outcome.WARM_MISSED, Outcome.NO_DATA)

    @property
    def decided(self) -> bool:
        """Whether more trials could change it (--until-decided stops once decided)."""
        return self not in (Outcome.INCONCLUSIVE, Outcome.NO_DATA)

    @property
    def tone(self) -> Tone:
        return Tone.GOOD if self is Outcome.SAVES else Tone.UNSURE


@dataclass(frozen=True, slots=True)
class RankSummary:
    """One rank over the runs: its time to first step and compile-or-load, and its hits."""

    rank: int | None
    first_step: tuple[stats.Spread | None, stats.Spread | None]  # (cold, warm)
    compile_or_load: tuple[stats.Spread | None, stats.Spread | None]
    warm_runs: int  # warm runs this rank took part in
    warm_missed: int  # of those, the ones where it compiled again what the cold run wrote
    missed: tuple[str, ...]  # the modules it compiled again


@dataclass(frozen=True, slots=True)
class Analysis:
    cold: tuple[ProcessSample, ...]
    warm: tuple[ProcessSample, ...]
    phases: dict[str, tuple[stats.Spread, stats.Spread]]  # phase -> (cold, warm)
    wall: tuple[stats.Spread, stats.Spread] | None
    saving: stats.Shift | None  # cold wall - warm wall, seconds saved per start (unadjusted)
    compile_saving: stats.Shift | None  # cold - warm compile-or-load seconds
    ratio: stats.Shift | None  # warm / cold wall
    noise_s: float
    significant: bool
    verdict: Outcome
    message: str
    paid_s: float  # what writing the entries cost the cold runs (median)
    written_bytes: int | None  # median bytes in the cache after a cold run; None: not listed
    pays_off_after: int | None  # warm starts needed to repay it
    first_step: tuple[stats.Spread, stats.Spread] | None = None  # slowest rank, cold / warm
    ranks: tuple[RankSummary, ...] = ()  # per rank, when the job has more than one
    judgement: noticeable.Judgement | None = None  # the saving against the one bar
    bar: noticeable.Bar = noticeable.DEFAULT_BAR
    adjusted: adjust.Adjusted | None = None  # the saving adjusted by the uncached compiles

    @property
    def judged(self) -> stats.Shift | None:
        """The saving the verdict is judged on: adjusted when every check passed."""
        return None if self.saving is None else adjust.judged(self.adjusted, self.saving)


def _maybe(values: list[float]) -> stats.Spread | None:
    return stats.spread(values) if values else None


def rank_summaries(cold: list[ProcessSample], warm: list[ProcessSample]
                   ) -> tuple[RankSummary, ...]:
    """Per rank, over the runs it appears in; empty for a job of one rank."""
    seen = sorted({r.rank for s in cold + warm for r in s.ranks},
                  key=lambda r: (r is None, r or 0))
    if len(seen) < 2:
        return ()
    out = []
    for rank in seen:
        mine = [(s.kind, r) for s in cold + warm for r in s.ranks if r.rank == rank]
        misses = [m for s in warm for m in s.missed if m.rank == rank]
        out.append(RankSummary(
            rank,
            (_maybe([r.first_step_s for k, r in mine if k == "cold"]),
             _maybe([r.first_step_s for k, r in mine if k == "warm"])),
            (_maybe([r.phases["compile_or_load"] for k, r in mine if k == "cold"]),
             _maybe([r.phases["compile_or_load"] for k, r in mine if k == "warm"])),
            sum(1 for k, _ in mine if k == "warm"), len(misses),
            tuple(sorted({n for m in misses for n in m.modules}))))
    return tuple(out)


def missed_message(warm: list[ProcessSample]) -> str:
    """'warm runs did not hit ...', naming the ranks that missed when some did."""
    ranks = sorted({m.rank for s in warm for m in s.missed}, key=lambda r: (r is None, r or 0))
    if not ranks:
        return "warm runs did not hit the entries the cold run wrote"
    runs = sum(1 for s in warm if s.missed)
    return (f"{per_rank.names(ranks)} missed the entries the cold run wrote in {runs} of "
            f"{len(warm)} warm runs: a warm run counts as a hit only if every rank hit")


def _phase_spreads(cold: list[ProcessSample], warm: list[ProcessSample]
                   ) -> dict[str, tuple[stats.Spread, stats.Spread]]:
    out = {}
    for phase in PHASES:
        c = [s.phases[phase] for s in cold]
        w = [s.phases[phase] for s in warm]
        out[phase] = (stats.spread(c), stats.spread(w))
    return out


def _pairs(cold: list[ProcessSample], warm: list[ProcessSample]
           ) -> list[tuple[ProcessSample, float, float]]:
    """Per trial: its cold run, and the median wall and compile-or-load of its warm runs."""
    out = []
    for c in cold:
        mine = [w for w in warm if w.trial == c.trial]
        if mine:
            out.append((c, stats.spread([w.wall_s for w in mine]).median,
                        stats.spread([w.phases["compile_or_load"] for w in mine]).median))
    return out


def analyse(cold: list[ProcessSample], warm: list[ProcessSample], *, confidence: float,
            noise_s: float, stop_reason: str | None = None,
            bar: noticeable.Bar = noticeable.DEFAULT_BAR) -> Analysis:
    """The verdict is the noticeable test (bench/noticeable.py), the one decide applies;
    `significant` (the interval clears the noise band) only gates the amortization line."""
    if not cold or not warm:
        return Analysis(tuple(cold), tuple(warm), {}, None, None, None, None, noise_s, False,
                        Outcome.NO_DATA, "not enough completed runs to compare", 0.0, 0, None,
                        bar=bar)
    phases = _phase_spreads(cold, warm)
    first = (stats.spread([s.first_step_s for s in cold]),
             stats.spread([s.first_step_s for s in warm]))
    ranks = rank_summaries(cold, warm)
    walls = (stats.spread([s.wall_s for s in cold]), stats.spread([s.wall_s for s in warm]))
    pairs = _pairs(cold, warm)
    if not pairs:
        return Analysis(tuple(cold), tuple(warm), phases, walls, None, None, None, noise_s,
                        False, Outcome.NO_DATA, "no trial has both a cold and a warm run", 0.0, 0,
                        None, first, ranks, bar=bar)
    # one cold and one warm value per trial (the independent unit), compared as two samples
    cold_wall = [c.wall_s for c, _, _ in pairs]
    warm_wall = [w for _, w, _ in pairs]
    saving = stats.two_sample_shift(cold_wall, warm_wall, confidence)
    compile_saving = stats.two_sample_shift(
        [c.phases["compile_or_load"] for c, _, _ in pairs], [w for _, _, w in pairs],
        confidence)
    ratio = stats.two_sample_ratio(cold_wall, warm_wall, confidence)
    adjusted = adjust.adjust(*_units(pairs, warm), saving, confidence)
    judged = adjust.judged(adjusted, saving)
    paid = stats.spread([s.write_overhead_s for s in cold]).median
    listed = [s.bytes_after for s in cold if s.bytes_after is not None]  # None: not listed
    written = int(stats.spread([float(b) for b in listed]).median) if listed else None
    significant = judged.resolved and judged.low > noise_s
    pays = None
    if significant and judged.estimate > 0:
        pays = max(1, math.ceil(paid / judged.estimate)) if paid > 0 else 1
    judgement = (None if stop_reason in ("nothing-cached", "warm-missed") else
                 noticeable.judge(judged, walls[0].median, bar))
    how = " adjusted for the uncached modules' compile time" if judged is not saving else ""
    if stop_reason == "nothing-cached":
        verdict = Outcome.NOTHING_CACHED
        message = "the cold run wrote no entry, so the cache saved nothing"
    elif stop_reason == "warm-missed":
        verdict, message = Outcome.WARM_MISSED, missed_message(warm)
    elif judgement is not None and judgement.outcome == noticeable.NOTICEABLE:
        verdict = Outcome.SAVES
        message = (f"{judged.estimate:.2f} s [{judged.low:.2f} - {judged.high:.2f}] "
                   f"({judged.confidence:.1%} CI{how}) per start, "
                   f"{judged.estimate / walls[0].median:.0%} of the cold process's wall time: "
                   "a noticeable saving")
    elif judgement is not None and judgement.outcome == noticeable.TOO_SMALL:
        verdict = Outcome.TOO_SMALL
        message = (f"a saving too small to notice: {judged.estimate:.2f} s [{judged.low:.2f} - "
                   f"{judged.high:.2f}]{how} per start, all of it below "
                   f"{judgement.need_s:.2f} s")
    elif not judged.resolved:
        verdict = Outcome.INCONCLUSIVE
        message = (f"the trials cannot decide: {noticeable.stats_trials(judged.n)} cannot "
                   f"support a {judged.asked:.0%} interval "
                   f"({stats.fewest_trials(judged.asked)} are the fewest)")
    else:
        verdict = Outcome.INCONCLUSIVE
        need = judgement.need_s if judgement is not None else 0.0
        message = (f"the trials cannot decide: {judged.estimate:.2f} s [{judged.low:.2f} - "
                   f"{judged.high:.2f}]{how} per start straddles the {need:.2f} s bar")
    return Analysis(tuple(cold), tuple(warm), phases, walls, saving, compile_saving, ratio,
                    noise_s, significant, verdict, message, paid, written, pays, first, ranks,
                    judgement, bar, adjusted)


def _units(pairs: list[tuple[ProcessSample, float, float]], warm: list[ProcessSample]
           ) -> tuple[list[adjust.Unit], list[adjust.Unit]]:
    """Per trial, (wall, covariate) of its cold run and the mean of its warm runs (means, not
    medians: the model is linear, and a mean of K warm runs keeps it so)."""
    cold_units, warm_units = [], []
    for c, _, _ in pairs:
        mine = [w for w in warm if w.trial == c.trial]
        kinds = {w.uncached for w in mine}
        cold_units.append(adjust.Unit(c.wall_s, c.uncached_s, c.uncached))
        warm_units.append(adjust.Unit(
            math.fsum(w.wall_s for w in mine) / len(mine),
            math.fsum(w.uncached_s for w in mine) / len(mine),
            mine[0].uncached if len(kinds) == 1 else ("(differ between warm runs)",)))
    return cold_units, warm_units
