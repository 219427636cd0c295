"""`jaxcache decide` for people: the verdict, then each test with its evidence."""

from __future__ import annotations

from jaxcache.decide import Decision
from jaxcache.display import safe

_NAMES = {"writers": "1. writers understood", "compatible": "2. compatible jobs",
          "noticeable": "3. noticeable saving"}


def render(d: Decision) -> str:
    lines = [f"jaxcache decide {safe(d.path or '')}", f"decision: {d.verdict} - {d.summary}", ""]
    for t in d.tests:
        state = {True: "pass", False: "FAIL", None: "not evaluated"}[t.passed]
        lines.append(f"{_NAMES[t.name]}: {state}")
        lines += [f"   {safe(e)}" for e in t.evidence]
    lines += ["", "what to do:"] + [f" - {a}" for a in d.advice]
    return "\n".join(lines) + "\n"
