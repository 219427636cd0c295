"""`jaxcache decide`'s formats; its text: the verdict, then each test with its evidence.

FORMATS maps each --format to its renderer: text for people, json (jaxcache.decide/1).
"""

from __future__ import annotations

from dataclasses import asdict

from jaxcache.decide import Decision
from jaxcache.decide.bench_choice import BenchUsed, How, KeptBench, KeptChoice
from jaxcache.documents.kinds import envelope
from jaxcache.report import jsonout, style
from jaxcache.text import safe, wrap


def render_json(d: Decision) -> str:
    doc = {**envelope("decide"), **asdict(d), "exit_code": d.exit_code}
    return jsonout.document(doc)


_HOW = {How.GIVEN: "given with --bench", How.RUN: "benched now",
        How.KEPT: "the last kept bench of a job that used this directory"}


def _bench_line(b: BenchUsed, kept: KeptChoice | None) -> str:
    """Which bench the decision judged: its command, how decide came by it, its file; a kept
    one also by its folder and when (two folders' `python job.py` are two jobs)."""
    where = f": {safe(b.path)}" if b.path else ""
    judged = kept.judged if b.how is How.KEPT and kept is not None else None
    job = _job(b.command, judged)
    return f"judged on the bench of {job} ({_HOW[b.how]}{where})"


def _job(command: tuple[str, ...], kept: KeptBench | None) -> str:
    """`CMD`, and for a kept bench its folder and when (two folders' `python job.py` are two
    jobs)."""
    job = f"`{safe(' '.join(command)) or '?'}`"
    if kept is not None:
        job += (f" in {safe(kept.cwd)}" if kept.cwd is not None else "") + \
            (f", kept {kept.when}" if kept.when else "")
    return job


def _newer(kept: KeptChoice | None) -> list[str]:
    """Newer kept benches of other jobs, not judged: said beside the one that was."""
    if kept is None or kept.judged is None or not kept.recent:
        return []
    b = kept.recent[0]
    more = f" (and {kept.newer - 1} more)" if kept.newer > 1 else ""
    return wrap(f"not judged: the newer bench of {_job(b.command, b)}{more}, of a job no run "
                "record shows using this directory: see what to do", "  ")


_NAMES = {"writers": "1. writers understood", "compatible": "2. compatible jobs",
          "noticeable": "3. noticeable saving"}


def _measured(kept: KeptChoice | None) -> list[str]:
    """How the kept bench judged was measured against how the runs on the directory run."""
    if kept is None or kept.judged is None:
        return []
    runs = kept.runs_use
    how = f"{runs.thresholds.flags()}, {runs.source.words}"
    if kept.judged_as_runs:
        said = f"measured as the runs on this directory run ({how})"
    else:
        said = (f"measured with {kept.judged.thresholds.flags(runs.thresholds)}, not as the "
                f"runs on this directory run ({how}): see what to do")
    return wrap(said, "  ")


def render_text(d: Decision) -> str:
    lines = [f"decision: {style.said(d.verdict)} - {d.summary}",
             f"for {safe(d.path or '')}", *(_bench_line(b, d.kept) for b in d.benches),
             *_newer(d.kept), *_measured(d.kept),
             ""]
    for t in d.tests:
        state = ("INCONCLUSIVE" if t.outcome == "inconclusive" else
                 {True: "pass", False: "FAIL", None: "not evaluated"}[t.passed])
        lines.append(f"{_NAMES[t.name]}: {state}")
        lines += [w for e in t.evidence for w in wrap(safe(e), "   ")]
    lines += ["", "what to do:"] + [w for a in d.advice for w in wrap(a, " - ")]
    return "\n".join(lines) + "\n"


FORMATS = {"text": render_text, "json": render_json}
