"""`jaxcache decide` for people: the verdict, then each test with its evidence."""

from __future__ import annotations

from jaxcache.decide import Decision
from jaxcache.report import style
from jaxcache.text import safe, wrap

_NAMES = {"writers": "1. writers understood", "compatible": "2. compatible jobs",
          "noticeable": "3. noticeable saving"}


def render(d: Decision) -> str:
    lines = [f"decision: {style.verdict(d.verdict)} - {d.summary}",
             f"for {safe(d.path or '')}", ""]
    for t in d.tests:
        state = ("INCONCLUSIVE" if t.outcome == "inconclusive" else
                 {True: "pass", False: "FAIL", None: "not evaluated"}[t.passed])
        lines.append(f"{_NAMES[t.name]}: {state}")
        lines += [w for e in t.evidence for w in wrap(safe(e), "   ")]
    lines += ["", "what to do:"] + [w for a in d.advice for w in wrap(a, " - ")]
    return "\n".join(lines) + "\n"
