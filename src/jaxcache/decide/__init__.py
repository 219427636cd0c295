"""`jaxcache decide`: share a cache only when its writers are understood, the jobs that share
it are compatible, and the saving is noticeable at start-up.

Uncontrolled or unverifiable writers are never worth the saving: that test comes first, and no
number from the bench can outweigh it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from jaxcache import thresholds
from jaxcache.bench import noticeable
from jaxcache.bench.analysis import Outcome
from jaxcache.bench.bench_document import LeftOut
from jaxcache.decide.across import Source, across_records
from jaxcache.decide.bench_choice import BenchUsed, KeptChoice
from jaxcache.decide.check import Test
from jaxcache.decide.facts import KEY_FIELDS, AuditFacts, BenchFacts, WarmRun
from jaxcache.decide.kept_advice import bench_advice, kept_advice, settings_give, unmeasured
from jaxcache.jaxcompat import versions
from jaxcache.text import Tone, safe
from jaxcache.trust.findings import Verdict

__all__ = ["KEY_FIELDS", "AuditFacts", "BenchFacts", "Choice", "Decision", "decide"]


class Choice(StrEnum):
    """What decide concludes for a cache directory."""

    SHARE = "SHARE"  # share it: writers understood, jobs compatible, the saving noticeable
    PRIVATE = "PRIVATE"  # a cache per user or team
    NOT_WORTH_IT = "NOT-WORTH-IT"  # the saving is too small to notice
    INCONCLUSIVE = "INCONCLUSIVE"  # the trials cannot tell yet
    BLOCKED = "BLOCKED"  # uncontrolled or unverifiable writers: no saving justifies them

    def __str__(self) -> str:
        return self.value

    @property
    def fine(self) -> bool:
        """A cache to use (exit 0): shared or private."""
        return self in (Choice.SHARE, Choice.PRIVATE)

    @property
    def tone(self) -> Tone:
        return Tone.GOOD if self.fine else Tone.UNSURE if self is Choice.INCONCLUSIVE \
            else Tone.BAD


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Choice
    summary: str
    tests: tuple[Test, ...]
    advice: tuple[str, ...]
    path: str | None
    benches: tuple[BenchUsed, ...] = ()  # the benches judged, as decide came by them
    kept: KeptChoice | None = None  # what the chooser found among the kept benches

    @property
    def exit_code(self) -> int:
        return 0 if self.verdict.fine else 1


def _writers(audit: AuditFacts) -> Test:
    trusted = sorted({w.principal for w in audit.writers if w.trusted_by_policy})
    ev = [f"audit of {safe(audit.shown or '?')} for user {audit.user}: {audit.verdict.value}"]
    if audit.untrusted:
        ev.append(f"undeclared writers: {', '.join(audit.untrusted)}")
        first = next((w for w in audit.writers if w.untrusted), None)
        if first is not None:
            ev.append(f"  {first.principal}: {' '.join(first.chain)}")
    if trusted:
        ev.append(f"declared trusted by policy: {', '.join(trusted)}")
    ev += [f"unverifiable: {m}" for m in audit.unverifiable]
    ev += list(audit.key_notes)
    return Test("writers", audit.verdict.ok, tuple(ev))


def _compatible(benches: list[BenchFacts]) -> Test:
    if all(b.outcome is Outcome.NOTHING_CACHED for b in benches):
        return Test("compatible", None, ("not judged: the cold runs wrote no entry, so no warm "
                                         "run could hit (see the noticeable saving below)",))
    ev = []
    ref = benches[0]
    ok = True
    for b in benches[1:]:
        diffs = [f"{k}: {a!r} vs {v!r}" for (k, a), (_, v) in zip(ref.key_inputs, b.key_inputs,
                                                                 strict=True) if a != v]
        if diffs:
            ok = False
            ev.append(f"{b.command} differs from {ref.command} in what the cache key depends "
                      f"on: {'; '.join(diffs)}")
    ev.append("key inputs: " + ", ".join(f"{k}={v!r}" for k, v in ref.key_inputs))
    for b in benches:
        hit = sum(1 for w in b.warm if w.hit)
        ratio = hit / len(b.warm) if b.warm else 0.0
        ev.append(f"warm runs that hit: {hit} of {len(b.warm)} ({ratio:.0%}) for "
                  f"{b.command}" + _ranks_missed(b.warm))
        if not b.warm or hit < len(b.warm):
            ok = False
    in_key = [versions.path_in_key(b.jax) for b in benches]
    if any(k is not False for k in in_key):  # JAX <= 0.10, or not recorded
        ev.append("on JAX <= 0.10 every job must use the very same path string (no symlinks, "
                  "no other mount point): the path enters the cache key")
    return Test("compatible", ok, tuple(ev))


def _unseen(path: str | None, benches: list[BenchFacts]) -> tuple[str, tuple[str, ...]]:
    """A shared cache judged on the benches alone: only the benched jobs were seen (a new
    user's fifth trial read SHARE's "the jobs are compatible" as the team's jobs). The words
    for the summary, and the line that says so with the command that judges the others."""
    import shlex

    cmds = list(dict.fromkeys(b.command for b in benches))
    which = "; ".join(safe(c) for c in cmds)
    line = (f"seen: only the benched job{'s' if len(cmds) > 1 else ''} ({which}); the other "
            "writers' jobs were not: before sharing, judge them with their run records, "
            f"`jaxcache decide {safe(shlex.quote(path or 'PATH'))} --records DIR...` (each "
            "writer's runs folder or --record files)")
    return ("the jobs benched are compatible" if len(cmds) > 1 else
            "the one job benched hits what it wrote"), (line,)


def _both(a: Test, b: Test) -> Test:
    """One compatible test from the benches' and the records': failed if either failed."""
    said = [t.passed for t in (a, b) if t.passed is not None]
    passed = None if not said else all(said)
    return Test("compatible", passed, a.evidence + b.evidence)


def _ranks_missed(warm: tuple[WarmRun, ...]) -> str:
    """'; rank 1 missed in 3 of 3' for the ranks that compiled again what the cold run wrote
    (a warm run counts as a hit only if every rank hit: the job waits for the slowest)."""
    per: dict[int | None, int] = {}
    for w in warm:
        for r in set(w.missed_ranks):
            per[r] = per.get(r, 0) + 1
    if not per:
        return ""
    named = [f"{'rank ?' if r is None else f'rank {r}'} missed in {per[r]} of {len(warm)}"
             for r in sorted(per, key=_rank_order)]
    return "; " + "; ".join(named) + " (a run hits only if every rank hit)"


def _rank_order(r: int | None) -> tuple[bool, int]:
    return (r is None, r or 0)


def _missing_ranks_advice(benches: list[BenchFacts]) -> tuple[str, ...]:
    ranks = sorted({r for b in benches for r in b.missed_ranks}, key=_rank_order)
    if not ranks:
        return ()
    named = ", ".join("?" if r is None else str(r) for r in ranks)
    return (f"rank{'s' if len(ranks) > 1 else ''} {named} compiled again what the cold run wrote, "
            "and the job waits for its slowest rank: `jaxcache explain` on the cold and warm "
            "records (bench --workdir keeps them) shows which key components differ from the "
            "entries process 0 wrote",)


def _bar_of(bench: BenchFacts, min_s: float | None, min_fraction: float | None
            ) -> noticeable.Bar:
    """The bar to judge a bench by: decide's own where given, else the one the bench used
    (so that decide, given a bench's --json, answers as that bench did), else the defaults."""
    used_s, used_fraction = bench.bar

    def pick(given: float | None, used: float | None, default: float) -> float:
        return given if given is not None else default if used is None else used

    return noticeable.Bar(pick(min_s, used_s, noticeable.MIN_SAVING_S),
                          pick(min_fraction, used_fraction, noticeable.MIN_FRACTION))


def _noticeable(benches: list[BenchFacts], min_s: float | None, min_fraction: float | None
                ) -> tuple[Test, tuple[str, ...]]:
    """The noticeable test (bench/noticeable.py, the rule bench applies), per bench; the
    outcome is the worst of them (too-small or missed, then inconclusive), with its advice."""
    outcomes, ev, advice = [], [], []
    for b in benches:
        if not b.outcome.measured or b.judged is None:
            outcomes.append(MISSED)
            ev.append(f"{b.command}: no saving to judge ({b.outcome.value}: {b.message})")
            if b.outcome is Outcome.NOTHING_CACHED and b.left_out is not None:
                ev.append(_left_out_evidence(b.left_out))
            advice.append(_missed_advice(b.outcome, b.left_out, b.command))
        else:
            j = noticeable.judge(b.judged, b.cold_wall_s, _bar_of(b, min_s, min_fraction))
            outcomes.append(j.outcome)
            ev.append(f"{b.command}: {j.why}")
            if not j.met:
                advice.append(noticeable.advice(j))
        if b.phases:
            spent = ", ".join(f"{k} {_seconds(v)}" for k, v in b.phases)
            ev.append(f"  cold start-up spent on: {spent}")
    worst = next((o for o in (noticeable.TOO_SMALL, MISSED, noticeable.INCONCLUSIVE)
                  if o in outcomes), noticeable.NOTICEABLE)
    passed = worst == noticeable.NOTICEABLE
    return (Test("noticeable", passed, tuple(ev), worst),
            tuple(dict.fromkeys(advice)))  # each piece of advice once


MISSED = "missed"  # no saving to judge: nothing cached, warm runs missed, no data


def _left_out_evidence(left: LeftOut) -> str:
    return (f"  JAX's write thresholds left {left.modules} compiles uncached: "
            f"{left.seconds:.2f} s of compile"
            + (f", {left.share:.0%} of start-up" if left.share is not None else "")
            + ("; material" if left.material else "; near the line" if left.near
               else "; not material"))


def _missed_advice(outcome: Outcome, left: LeftOut | None, cmd: str = "CMD") -> str:
    if outcome is Outcome.NOTHING_CACHED and left is not None:
        if left.material:
            return (f"what the thresholds leave out is material: bench a lower one before "
                    f"keeping it (`jaxcache bench {safe(left.suggestion)} -- "
                    f"{cmd}`, or decide with the same flag), at the cost of more, "
                    "smaller entries to store and trust")
        if left.near:
            return (f"what the thresholds leave out is near the line: only a bench of a lower "
                    f"one tells (`jaxcache bench {safe(left.suggestion)} -- {cmd}`); until "
                    "then keep the thresholds and do not share a cache for it")
        return ("what the thresholds leave out is not material: this job gains nothing from a "
                "persistent cache; keep the thresholds and do not share a cache for it")
    if outcome is Outcome.WARM_MISSED:
        return ("the warm runs compiled again instead of loading the cold run's entries, so "
                "the saving could not be measured: `jaxcache explain` on a cold and a warm "
                "record (bench --workdir keeps them) names the key component that differs")
    if outcome is Outcome.NOTHING_CACHED:
        return ("the cold run wrote no entry (JAX's thresholds: compile time >= 1 s, entry "
                "size): `jaxcache explain -- CMD` says which rule left each module out")
    return "no trial has both a cold and a warm run: rerun the bench"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def decide(audit: AuditFacts, benches: list[BenchFacts], *, min_saving_s: float | None = None,
           min_fraction: float | None = None, records: list[Source] | None = None,
           used: tuple[BenchUsed, ...] = (), kept: KeptChoice | None = None) -> Decision:
    """_decide() with, where the saving was measured under thresholds the bench set, the
    advice to run the job with the same ones (at JAX's defaults it writes less, or nothing).
    `used`: how each bench was come by (named in the report); `kept`: what the chooser found
    among the kept benches (decide/bench_choice.py): when it judged one, how it was measured
    against how the runs run, and the benches it passed over, are said first."""
    from dataclasses import replace

    d = _decide(audit, benches, min_saving_s=min_saving_s, min_fraction=min_fraction,
                records=records, unmatched=kept)
    d = replace(d, benches=used, kept=kept)
    if kept is not None and kept.judged is not None:
        d = replace(d, advice=kept_advice(audit.shown, kept, kept.judged) + d.advice)
    flags = _threshold_flags(benches)
    if d.verdict.fine and flags and not (kept is not None and kept.judged_as_runs):
        if settings_give(benches):
            import shlex

            where = safe(shlex.quote(audit.shown or "PATH"))
            said = (f"the saving was measured with {flags}, which the settings here already "
                    "give (JAX's variables, the project file, else JAX's defaults): from this "
                    f"folder, `jaxcache run --cache-dir {where} -- CMD` and enable() use them")
        else:
            said = (f"the saving was measured with {flags}: run the job the same way (`jaxcache "
                    f"run {flags} -- CMD`, or enable(min_compile_time=...)); at JAX's defaults "
                    "it writes fewer entries, or none")
        d = replace(d, advice=d.advice + (said,))
    return d


def _threshold_flags(benches: list[BenchFacts]) -> str:
    """The threshold flags the benches set, as run and bench take them ('' for none)."""
    found: dict[str, str] = {}
    for b in benches:
        set_by = dict(b.thresholds_set)
        for flag, name in thresholds.FLAGS.items():
            if name in set_by:
                found.setdefault(flag, set_by[name])
    return " ".join(f"{flag} {value}" for flag, value in found.items())


def _decide(audit: AuditFacts, benches: list[BenchFacts], *, min_saving_s: float | None = None,
            min_fraction: float | None = None, records: list[Source] | None = None,
            unmatched: KeptChoice | None = None) -> Decision:
    """The three tests in order. The noticeable bar defaults to the one each bench used
    (bench/noticeable.py's defaults for older results); INCONCLUSIVE when the trials cannot
    tell, which exits 1 like NOT-WORTH-IT: a gate must not pass on an undecided saving.
    `records` (decide --records): the jobs that would share the cache; jobs of different
    builds or hosts (or unknown ones) are BLOCKED whatever the saving, as uncontrolled
    writers are: one cache would hand each entries compiled for the other."""
    path = audit.path
    writers = _writers(audit)
    others = audit.users
    if not writers.passed:
        advice = ["use separate, private cache directories per user or team: "
                  "`jaxcache init` as each user (e.g. ~/.cache/jaxcache/jax), and point each "
                  "job's JAX_COMPILATION_CACHE_DIR at its own"]
        if others:
            advice.append("before changing anything on this directory, talk to who else uses "
                          "it: " + "; ".join(others))
        advice.append("do not loosen or tighten permissions of a shared directory blindly; "
                      "if sharing is intended, make the writer set explicit (a dedicated group "
                      "whose members are declared in a jaxcache policy) or publish signed "
                      "entries from one trusted writer")
        return Decision(Choice.BLOCKED, "uncontrolled or unverifiable writers: no saving justifies "
                        "trusting them to choose the code your process runs",
                        (writers, Test("compatible", None, ()), Test("noticeable", None, ())),
                        tuple(advice), path)
    across = across_records(records) if records else None
    if across is not None and across.blocked:
        return Decision(Choice.BLOCKED, across.blocked,
                        (writers, across.test, Test("noticeable", None, ())), across.advice,
                        path)
    unjudged = across.test if across is not None else Test("compatible", None, ())
    if not benches:  # the writers pass; the saving is not measured: a gate must not pass
        return Decision(Choice.INCONCLUSIVE, unmeasured(unmatched),
                        (writers, unjudged, Test("noticeable", None, ())),
                        bench_advice(audit.shown, unmatched), path)
    saving, saving_advice = _noticeable(benches, min_saving_s, min_fraction)
    compatible = _compatible(benches)
    if across is not None:
        compatible = _both(compatible, across.test)
    tests = (writers, compatible, saving)
    if saving.outcome == noticeable.INCONCLUSIVE:
        return Decision(Choice.INCONCLUSIVE, "the trials cannot tell whether the saving is "
                        "noticeable at start-up: measure again before deciding", tests,
                        _missing_ranks_advice(benches) + saving_advice, path)
    if not saving.passed:
        summary = ("the saved compile is not noticeable at start-up: keep things simple (no "
                   "shared cache needed)" if saving.outcome == noticeable.TOO_SMALL else
                   "the bench measured no saving (nothing cached or warm runs that missed): "
                   "no shared cache until that is fixed")
        return Decision(Choice.NOT_WORTH_IT, summary, tests,
                        _missing_ranks_advice(benches) + saving_advice, path)
    shared = audit.verdict in (Verdict.SEALED, Verdict.SHARED_BY_POLICY)
    jobs: str = "the jobs are compatible"
    unseen: tuple[str, ...] = ()
    if shared and across is None:  # only this account's benches: the others' jobs unseen
        jobs, unseen = _unseen(audit.shown, benches)
        tests = (writers, Test("compatible", compatible.passed,
                               compatible.evidence + unseen), saving)
    if audit.verdict is Verdict.SEALED and compatible.passed:
        return Decision(Choice.SHARE, "a shared sealed cache is justified: readers load only "
                        f"entries signed by trusted keys whose holders are declared writers, "
                        f"{jobs}, and the saving is noticeable", tests,
                        ("every reader must run with --sealed (or enable(sealed=True)); keep the "
                         "signing keys secret and the policy's key list current",) + unseen,
                        path)
    if audit.verdict is Verdict.SHARED_BY_POLICY and compatible.passed:
        return Decision(Choice.SHARE, "a shared cache is justified: every writer is declared "
                        f"trusted, {jobs}, and the saving is noticeable",
                        tests, ("keep the policy's writer list current; every job must use "
                                f"exactly {safe(path or '?')}",) + unseen, path)
    why = ("only you (and root) can write it" if audit.verdict is Verdict.PRIVATE else
           "the jobs that would share it are not compatible")
    return Decision(Choice.PRIVATE, f"use a private cache per user or team ({why}); it saves a "
                    "noticeable amount", tests,
                    ("`jaxcache init` as each user, one directory per user or team and job "
                     "family",), path)
