"""`jaxcache decide`'s formats; its text: the verdict, then each test with its evidence.

FORMATS maps each --format to its renderer: text for people, json (jaxcache.decide/1).
"""

from __future__ import annotations

from dataclasses import asdict

from jaxcache.decide import Decision
from jaxcache.documents.kinds import envelope
from jaxcache.report import jsonout, style
from jaxcache.text import safe, wrap


def render_json(d: Decision) -> str:
    doc = {**envelope("decide"), **asdict(d), "exit_code": d.exit_code}
    return jsonout.document(doc)


_NAMES = {"writers": "1. writers understood", "compatible": "2. compatible jobs",
          "noticeable": "3. noticeable saving"}


def render_text(d: Decision) -> str:
    lines = [f"decision: {style.said(d.verdict)} - {d.summary}",
             f"for {safe(d.path or '')}", ""]
    for t in d.tests:
        state = ("INCONCLUSIVE" if t.outcome == "inconclusive" else
                 {True: "pass", False: "FAIL", None: "not evaluated"}[t.passed])
        lines.append(f"{_NAMES[t.name]}: {state}")
        lines += [w for e in t.evidence for w in wrap(safe(e), "   ")]
    lines += ["", "what to do:"] + [w for a in d.advice for w in wrap(a, " - ")]
    return "\n".join(lines) + "\n"


FORMATS = {"text": render_text, "json": render_json}
