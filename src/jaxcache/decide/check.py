"""One of decide's three tests (writers, compatible, noticeable) and the evidence it rests on:
the shape every test returns, whether it judges one bench's audit or the records of several
teams (decide/across.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Test:
    name: str  # writers | compatible | noticeable
    passed: bool | None  # None: not evaluated (an earlier test already decided)
    evidence: tuple[str, ...]
    outcome: str | None = None  # noticeable: noticeable | too-small | inconclusive | missed
