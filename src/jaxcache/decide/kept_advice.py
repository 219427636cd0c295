"""What decide says about the bench it judged, or could not find (decide/bench_choice.py chose):
the kept benches it passed over or that are newer, each with the `--bench` line that judges it;
how to measure when none is judged; whether the settings here already give a bench's
thresholds, so runs need no flag for them. Text for people, escaped here once."""

from __future__ import annotations

from jaxcache import thresholds
from jaxcache.decide.bench_choice import KeptBench, KeptChoice, Thresholds, runs_use
from jaxcache.decide.facts import BenchFacts
from jaxcache.text import safe


def settings_give(benches: list[BenchFacts]) -> bool:
    """Every threshold the benches set is what the settings here give (a project file or
    JAX's variables): runs need no flag for it (a new user's fourth trial)."""
    here = runs_use(())
    for b in benches:
        set_by = dict(b.thresholds_set)
        if set(set_by) - {thresholds.COMPILE_VARIABLE, thresholds.SIZE_VARIABLE}:
            return False
        compile_s, size = set_by.get(thresholds.COMPILE_VARIABLE), \
            set_by.get(thresholds.SIZE_VARIABLE)
        if (compile_s is not None and here.min_compile_time_s is None) or \
                (size is not None and here.min_entry_size_bytes is None):
            return False  # a setting here that is no number: not known to give it
        try:
            bench = Thresholds(None if compile_s is None else float(compile_s),
                               None if size is None else int(size))
        except ValueError:
            return False
        if not here.thresholds.same(bench):  # compared where the bench set one
            return False
    return True


def judge_line(where: str, b: KeptBench, unlike: str) -> str:
    """`CMD` in DIR (WHEN) with FLAGS: `jaxcache decide PATH --bench FILE` (escaped)."""
    import shlex

    when = f" ({b.when})" if b.when else ""
    folder = f" in {safe(b.cwd)}" if b.cwd is not None else " (its folder not recorded)"
    return (f"`{safe(shlex.join(b.command))}`{folder}{when}{unlike}: `jaxcache decide {where} "
            f"--bench {safe(shlex.quote(b.path))}`")


def kept_advice(path: str | None, kept: KeptChoice, judged: KeptBench) -> tuple[str, ...]:
    """How the kept bench judged was measured against how the runs on `path` run, and the
    benches of its jobs passed over, each with the line that judges it instead."""
    import shlex

    where = safe(shlex.quote(path or "PATH"))
    runs = kept.runs_use.thresholds
    how = f"{runs.flags()}, {kept.runs_use.source.words}"
    passed = [judge_line(where, b, f" with {b.thresholds.flags(runs)}")
              for b in kept.passed_over]
    newer: tuple[str, ...] = ()
    if kept.recent:
        newer = ("newer kept benches of other jobs were not judged: no run record in the state "
                 "directory shows their job used this directory (`jaxcache run`, or "
                 f"`jaxcache bench --for-cache {where}`, makes it count); if one measured this "
                 "directory's job, judge it: "
                 + "; ".join(judge_line(where, b, "") for b in kept.recent),)
    if kept.judged_as_runs:
        if not passed:
            return newer
        return (f"judged the newest bench measured as the runs on this directory run ({how}); "
                "passed over, measured otherwise: " + "; ".join(passed),) + newer
    job = safe(shlex.join(judged.command)) or "CMD"
    said = (f"the bench judged was measured with {judged.thresholds.flags(runs)}, not as the runs "
            f"on this directory run ({how}): the saving they get may differ; bench as they run "
            f"(`jaxcache decide {where} {runs.flags()} -- {job}`) or run them the bench's way")
    if passed:
        said += "; other benches of its job: " + "; ".join(passed)
    return (said,) + newer


def unmeasured(unmatched: KeptChoice | None) -> str:
    """The summary when no bench was judged: none kept for this directory's jobs, or none."""
    if unmatched is not None and unmatched.others:
        return (f"the writers are understood, but none of the {unmatched.others} kept "
                "benches is of a job that used this directory (another job's saving says "
                "nothing of this one's): bench before deciding")
    return ("the writers are understood, but no bench measured the saving: bench before "
            "deciding")


def bench_advice(path: str | None, unmatched: KeptChoice | None) -> tuple[str, ...]:
    """How to measure the saving: the job the run records show used the directory (else
    YOUR COMMAND: never a made-up one), then the newest kept benches, each with the line that
    judges it if it measured this directory's job. `path` as given (audit.shown, not yet
    escaped: escaped here once, after quoting)."""
    import shlex

    where = safe(shlex.quote(path or "PATH"))
    jobs = unmatched.jobs if unmatched is not None else ()
    if jobs:
        first = (f"bench the job that used it (its run records say): `jaxcache decide {where} "
                 f"-- {safe(shlex.join(jobs[0]))}`")
        if len(jobs) > 1:
            first += f" ({len(jobs) - 1} other commands used it too)"
    else:
        first = (f"bench its job now: `jaxcache decide {where} -- YOUR COMMAND` (no run record "
                 "kept in the state directory names this directory)")
    advice = [first]
    recent = unmatched.recent if unmatched is not None else ()
    if recent:
        advice.append(f"or, if one of the {len(recent)} newest kept benches measured this "
                      "directory's job, judge it:")
        advice += [judge_line(where, b, "") for b in recent]
        if any(b.cwd is None for b in recent):
            advice.append("a bench whose folder is not recorded (from before bench recorded "
                          "it) is never taken for a job by its command alone: judge it with "
                          "its --bench line")
    else:
        advice.append("or give an earlier `jaxcache bench --json B.json` result of its job "
                      "with --bench B.json")
    advice.append(f"a bench counts for this directory by itself when run with `jaxcache bench "
                  f"--for-cache {where}`, or inside the project whose file sets cache_dir to it")
    return tuple(advice)
