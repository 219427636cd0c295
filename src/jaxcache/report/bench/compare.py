"""`jaxcache bench --compare A B`: two bench results as an A/B result, as text.

The answer per measure first (warm start, warm time to first step, warm compile-or-load, cold
start, the seconds saved per start): B against A as "N times faster/slower" with its interval
over the trials of both files, or "no clear difference" where the interval holds 1 (bench/
comparable.py's `ab`). Then every setting that differs, each shown whole (wrapped, escaped,
never cut: a digest stays copyable), saying first whether any is one of what makes timings
comparable (versions, builds, devices, flags, cache options, shapes). `--format json`:
report/bench/json.py's `compare` (schema jaxcache.bench-compare/1).
"""

from __future__ import annotations

import statistics

from jaxcache.bench.comparable import Difference
from jaxcache.text import plural, safe, wrap

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.bench.bench_document import BenchDocument
    from jaxcache.bench.comparable import AB
    from jaxcache.bench.estimates import Shift


def render(ab: AB, a: BenchDocument, b: BenchDocument, a_path: str, b_path: str) -> str:
    """Two bench results, each already read and checked (documents.BENCH), and `ab` of them."""
    lines = [f"jaxcache bench --compare {safe(a_path)} {safe(b_path)}"]
    ca, cb = " ".join(a.command), " ".join(b.command)
    lines += wrap(f"A: {safe(ca)} ({plural(ab.trials[0], 'trial')}, verdict {safe(a.verdict)})")
    lines += wrap(f"B: {'the same command' if ca == cb else safe(cb)} "
                  f"({plural(ab.trials[1], 'trial')}, verdict {safe(b.verdict)})")
    lines.append("")
    lines.append(f"B against A (per trial; {ab.confidence:.0%} intervals, exact, over the "
                 "trials of both):")
    for d in ab.differences:
        lines.append(f"  {d.measure.words}: A {_median(d.a)}, B {_median(d.b)} (medians)")
        lines += wrap(reading(d, ab.fewest), "    ")
    lines.append("")
    if not ab.settings:
        lines.append("settings: the same (versions, builds, devices, flags, cache options, "
                     "shapes and the bench's own)")
    else:
        differ = (f"{plural(len(ab.settings), 'setting')} "
                  f"differ{'s' if len(ab.settings) == 1 else ''}")
        lines += wrap(f"{differ}, of them some that make timings comparable or not "
                      "(comparable.*: versions, builds, devices, flags, cache options, shapes): "
                      "the A/B measures their effect too:" if not ab.comparable else
                      f"{differ} (the same versions, builds, devices, flags, cache options "
                      "and shapes):")
        for s in ab.settings:
            lines.append(f"  {safe(s.name)}")
            lines += wrap(safe(s.a), "    A: ", "")
            lines += wrap(safe(s.b), "    B: ", "")
    return "\n".join(lines) + "\n"


def _median(values: tuple[float, ...]) -> str:
    return f"{statistics.median(values):.2f} s" if values else "-"


def _ci(s: Shift) -> str:
    return f" ({s.confidence:.1%} CI)"


def _too_few(d: Difference, s: Shift, fewest: int) -> str:
    return (f"(no {s.asked:.0%} interval: A has {plural(len(d.a), 'trial')}, B {len(d.b)}; "
            f"{fewest} on each side suffice)")


def reading(d: Difference, fewest: int) -> str:
    """What the interval says of B, in words: '1.30 times faster [1.21 - 1.39] (97.1% CI)'."""
    word = d.reading
    if word == "no-data":
        return "no trial with a cold and a warm run on both sides"
    if d.ratio is not None:
        r = d.ratio
        if word == "no-interval":
            return f"B/A {r.estimate:.2f} {_too_few(d, r, fewest)}"
        if word == "faster":
            return (f"B {1 / r.estimate:.2f} times faster [{1 / r.high:.2f} - "
                    f"{1 / r.low:.2f}]{_ci(r)}")
        if word == "slower":
            return f"B {r.estimate:.2f} times slower [{r.low:.2f} - {r.high:.2f}]{_ci(r)}"
        return f"no clear difference: B/A {r.estimate:.2f} [{r.low:.2f} - {r.high:.2f}]{_ci(r)}"
    s = d.shift
    assert s is not None  # no-data above
    if word == "no-interval":
        return f"B - A {s.estimate:+.2f} s {_too_few(d, s, fewest)}"
    if word == "more":
        return f"B saves {s.estimate:.2f} s more [{s.low:.2f} - {s.high:.2f}]{_ci(s)}"
    if word == "less":
        return f"B saves {-s.estimate:.2f} s less [{-s.high:.2f} - {-s.low:.2f}]{_ci(s)}"
    return (f"no clear difference: B - A {s.estimate:+.2f} s [{s.low:+.2f} - "
            f"{s.high:+.2f}]{_ci(s)}")
