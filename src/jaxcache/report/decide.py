"""`jaxcache decide`'s formats; its text: the verdict, then each test with its evidence.

FORMATS maps each --format to its renderer: text for people, json (jaxcache.decide/1).
"""

from __future__ import annotations

from dataclasses import asdict

from jaxcache.decide import Decision
from jaxcache.decide.bench_choice import BenchUsed, How, KeptChoice
from jaxcache.documents.kinds import envelope
from jaxcache.report import jsonout, style
from jaxcache.text import safe, wrap


def render_json(d: Decision) -> str:
    doc = {**envelope("decide"), **asdict(d), "exit_code": d.exit_code}
    return jsonout.document(doc)


_HOW = {How.GIVEN: "given with --bench", How.RUN: "benched now",
        How.KEPT: "the last kept bench of a job that used this directory"}


def _bench_line(b: BenchUsed) -> str:
    """Which bench the decision judged: its command, how decide came by it, its file."""
    where = f": {safe(b.path)}" if b.path else ""
    return f"judged on the bench of `{safe(' '.join(b.command)) or '?'}` ({_HOW[b.how]}{where})"


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
             f"for {safe(d.path or '')}", *map(_bench_line, d.benches), *_measured(d.kept),
             ""]
    for t in d.tests:
        state = ("INCONCLUSIVE" if t.outcome == "inconclusive" else
                 {True: "pass", False: "FAIL", None: "not evaluated"}[t.passed])
        lines.append(f"{_NAMES[t.name]}: {state}")
        lines += [w for e in t.evidence for w in wrap(safe(e), "   ")]
    lines += ["", "what to do:"] + [w for a in d.advice for w in wrap(a, " - ")]
    return "\n".join(lines) + "\n"


FORMATS = {"text": render_text, "json": render_json}
