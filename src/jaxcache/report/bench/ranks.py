"""The per-rank table of a multi-rank bench, as rows the text and Markdown reports lay out."""

from __future__ import annotations

from jaxcache.bench import per_rank
from jaxcache.bench.estimates import Spread
from jaxcache.bench.trials import BenchResult

HEADER = ["rank", "first step cold s", "first step warm s", "compile or load cold s",
          "compile or load warm s", "warm runs that hit"]


def _cell(s: Spread | None) -> str:
    return "-" if s is None else f"{s.median:.2f} [{s.low:.2f} - {s.high:.2f}]"


def rows(result: BenchResult) -> list[list[str]]:
    """Header and one row per rank; only the header when the job has a single rank."""
    out = [list(HEADER)]
    for r in result.analysis.ranks:
        hit = r.warm_runs - r.warm_missed
        cell = f"{hit} of {r.warm_runs}"
        if r.missed:
            shown = ", ".join(r.missed[:3]) + (f" +{len(r.missed) - 3}" if len(r.missed) > 3
                                               else "")
            cell += f" (compiled again: {shown})"
        out.append([per_rank.label(r.rank), _cell(r.first_step[0]), _cell(r.first_step[1]),
                    _cell(r.compile_or_load[0]), _cell(r.compile_or_load[1]), cell])
    return out


NOTE = ("they run in parallel: each phase above is the maximum over ranks; first step = from "
        "launch until the rank's last compile ended")
