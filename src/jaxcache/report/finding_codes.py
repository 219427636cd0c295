"""`jaxcache explain-finding` (schema jaxcache.finding-codes/1), and the tables of codes of
docs/reference/finding-codes.md: trust/finding_codes.py's catalogue in words, as a table of the
manual and as JSON."""

from __future__ import annotations

from collections.abc import Sequence

from jaxcache.documents.kinds import envelope
from jaxcache.report import jsonout
from jaxcache.text import wrap
from jaxcache.trust.finding_codes import CODES, FindingCode

LABELS = (("What", "meaning"), ("Why", "why"), ("To do", "action"))
NET = "net"  # `jaxcache net`'s codes: a table of their own in docs/reference/finding-codes.md


def render_one(c: FindingCode) -> str:
    """One code: its effect first, then what it says, why it matters, what to do, where more."""
    out = [f"{c.code}: {c.effect_text}"]
    width = max(len(label) for label, _ in LABELS) + 2
    for label, field in LABELS:
        out += wrap(str(getattr(c, field)), f"  {label + ':':<{width}}", hang="")
    out.append(f"  {'More:':<{width}}docs/{c.page}")
    return "\n".join(out) + "\n"


def render_all(codes: Sequence[FindingCode] = CODES) -> str:
    """Every code on one line: code, effects, meaning (`jaxcache explain-finding CODE` for
    the rest)."""
    code_w = max(len(c.code) for c in codes)
    effect_w = max(len(_effects(c)) for c in codes)
    lines: list[str] = []
    for c in codes:  # the meaning wrapped under itself
        lines += wrap(c.meaning, f"{c.code:<{code_w}}  {_effects(c):<{effect_w}}  ", hang="")
    return "\n".join(lines) + "\n"


def _effects(c: FindingCode) -> str:
    return "/".join(e.value for e in c.effects)


def render_json(codes: Sequence[FindingCode]) -> str:
    return jsonout.document({
        **envelope("finding-codes"),
        "codes": [{"code": c.code, "effects": [e.value for e in c.effects],
                   "effect_detail": c.effect_detail, "meaning": c.meaning, "why": c.why,
                   "action": c.action, "page": f"docs/{c.page}"} for c in codes]})


def markdown_tables() -> tuple[str, str]:
    """docs/reference/finding-codes.md's two tables: the audit's codes, then `jaxcache net`'s."""
    return (_table([c for c in CODES if c.family != NET]),
            _table([c for c in CODES if c.family == NET]))


def _table(codes: list[FindingCode]) -> str:
    rows = [f"| `{c.code}` | {c.effect_text} | {c.meaning} |" for c in codes]
    return "\n".join(["| code | effect | meaning |", "|---|---|---|", *rows]) + "\n"
