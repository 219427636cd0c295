"""The terminal summary of a bench: phases cold vs warm, the saving, and what it means."""

from __future__ import annotations

from jaxcache.bench import noticeable
from jaxcache.bench.analysis import Outcome
from jaxcache.bench.estimates import Shift
from jaxcache.bench.sample import PHASE_LABELS
from jaxcache.bench.trials import BenchResult
from jaxcache.report import style
from jaxcache.report.bench import ranks as bench_ranks
from jaxcache.report.bench.json import left_out, thresholds
from jaxcache.text import plural, safe, size, wrap

_PROSE = ("noticeable: ", "what to do: ", "adjusted saving", "thresholds: ")


def _secs(v: float) -> str:
    return f"{v:.2f}"


def interval(s: Shift | None, unit: str = " s") -> str:
    if s is None:
        return "-"
    if not s.resolved:
        return f"{s.estimate:.2f}{unit} [no {s.asked:.0%} interval with this N]"
    return f"{s.estimate:.2f}{unit} [{s.low:.2f} - {s.high:.2f}] ({s.confidence:.1%} CI)"


def table(result: BenchResult) -> list[list[str]]:
    a = result.analysis
    rows = [["phase", "cold median [min - max] s", "warm median [min - max] s"]]
    for name, (c, w) in a.phases.items():
        rows.append([PHASE_LABELS[name], f"{_secs(c.median)} [{_secs(c.low)} - {_secs(c.high)}]",
                     f"{_secs(w.median)} [{_secs(w.low)} - {_secs(w.high)}]"])
    if a.first_step:
        c, w = a.first_step
        rows.append(["time to first step", f"{_secs(c.median)} [{_secs(c.low)} - "
                     f"{_secs(c.high)}]", f"{_secs(w.median)} [{_secs(w.low)} - {_secs(w.high)}]"])
    if a.wall:
        c, w = a.wall
        rows.append(["whole process (wall)", f"{_secs(c.median)} [{_secs(c.low)} - "
                     f"{_secs(c.high)}]", f"{_secs(w.median)} [{_secs(w.low)} - {_secs(w.high)}]"])
    return rows


def adjusted(result: BenchResult) -> list[str]:
    """The covariate-adjusted saving beside the unadjusted one, and whether the verdict
    judged it (nothing for a job whose every module was cached: there is no covariate)."""
    adj = result.analysis.adjusted
    if adj is None or adj.modules == 0:
        return []
    if adj.shift is None:
        return [f"adjusted saving: not computed: {adj.why}"]
    judged = "the verdict judges this one" if adj.used else \
        f"not used, the verdict judges the unadjusted one: {adj.why}"
    return [f"adjusted saving (ANCOVA by the {adj.modules} uncached modules' compile time, "
            f"{adj.cold_x or 0:.2f} s cold / {adj.warm_x or 0:.2f} s warm; slope "
            f"{adj.slope or 0:.2f}, r = {adj.correlation or 0:.2f}): {interval(adj.shift)}, "
            f"Student t on {adj.df} df; unadjusted {interval(result.analysis.saving)}; "
            f"{judged}"]


def unstable(result: BenchResult) -> list[str]:
    """Runs that cached different modules: compiles near a threshold, written in some runs
    and not in others (a loaded machine slows them), so cold and warm are not the same work."""
    cold = sorted({s.written for s in result.samples if s.kind == "cold" and s.ok})
    warm = sum(1 for s in result.samples if s.kind == "warm" and s.ok and s.written)
    if len(cold) < 2 and not warm:
        return []
    what = f"the cold runs wrote {cold[0]} to {cold[-1]} entries" if len(cold) > 1 else \
        f"the cold runs wrote {cold[0] if cold else 0} entries"
    also = f" and {plural(warm, 'warm run')} wrote new ones" if warm else ""
    return [f"what to do: {what}{also}: compiles near JAX's threshold are cached in some runs "
            "and not in others, so the saving mixes both, as your runs at this threshold will; "
            "for runs that all do the same work, bench with a --min-compile-time below those "
            "compiles and run the job the same way"]


def conclusions(result: BenchResult) -> list[str]:
    a = result.analysis
    t = thresholds(result)
    lines = [f"verdict: {style.said(a.verdict)}: {a.message}"]
    if result.detail:
        lines.append(f"why: {result.detail}")
    left = left_out(result)
    if left is not None and left.modules:
        lines.append(f"thresholds: {left.sentence(result.config.argv)}")
    lines += unstable(result)
    if a.saving is not None:
        saved = ("cold minus warm (nothing was cached: a difference, not a saving)"
                 if a.verdict is Outcome.NOTHING_CACHED else "seconds saved per start")
        lines.append(f"{saved}: {interval(a.saving)}; compile-or-load saved: "
                     f"{interval(a.compile_saving)}; warm/cold wall: {interval(a.ratio, '')}")
        lines.append(f"over trials (the independent unit): {a.saving.n} cold and {a.saving.m} "
                     "warm values, two-sample Hodges-Lehmann with the exact Mann-Whitney "
                     "interval; smallest reachable p-value "
                     f"{a.saving.min_p:.4f}; noise band {a.noise_s:.2f} s")
        lines += adjusted(result)
        if a.saving.resolved and a.saving.confidence > a.saving.asked + 5e-4:
            lines.append(f"the intervals are {a.saving.confidence:.1%}: with these trials the "
                         f"exact levels jump, and this is the nearest at or above the "
                         f"{a.saving.asked:.0%} asked (--confidence)")
    if a.judgement is not None:
        lines.append(f"noticeable: {a.judgement.why}")
        if not a.judgement.met:
            lines.append(f"what to do: {noticeable.advice(a.judgement)}")
    elif a.verdict is Outcome.WARM_MISSED:
        lines.append("what to do: make the warm runs hit first (the saving cannot be judged "
                     "while they compile again): `jaxcache explain` on a cold and a warm record "
                     "(--workdir keeps them) names the key component that differs")
    pays = a.pays_off_after
    if a.significant and pays is not None:
        lines.append(f"amortization: the cold run paid {a.paid_s:.2f} s to write "
                     f"{'its entries' if a.written_bytes is None else size(a.written_bytes)}"
                     f"; it pays off after {plural(pays, 'reuse')}")
    mark = "  (BELOW JAX's default 1.0 s)" if t["min_compile_time_below_default"] else ""
    lines.append(f"thresholds in effect: min compile time {t['min_compile_time_secs']:g} s"
                 f"{mark}, min entry size {t['min_entry_size_bytes']} B")
    if result.bucket_prefix:
        lines.append(f"sealed trials in fresh prefixes under {safe(result.bucket_prefix)}/ "
                     "(left there: jaxcache deletes nothing in a bucket)")
    if result.excluded:
        lines.append(f"excluded {plural(len(result.excluded), 'process')} whose "
                     "build, versions, devices, flags or shapes differ:")
        for s, diffs in result.excluded:
            lines.append(f"  trial {s.trial} {s.kind} {s.index}: {'; '.join(diffs)}")
    return lines


def cached(result: BenchResult) -> list[str]:
    """'module: 240 inputs totalling 46.1 KB: float32[8,4], float32[8,5], float32[8,6] and 237 more
    (digest ...)', per cached module; the JSON result keeps every shape."""
    fp = result.samples[0].comparable if result.samples else None
    done = {m for s in result.samples for m in s.cached}
    return [f"{safe(module)}: {style.shapes(shapes)}" for module, shapes in
            (fp.shapes if fp is not None else ()) if module in done]


def _runs(result: BenchResult) -> str:
    most = max((len(s.ranks) for s in result.samples), default=1)
    return "processes" if most < 2 else f"runs ({most} ranks each)"


def _layout(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for i, r in enumerate(rows):
        out.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return out


def render(result: BenchResult) -> str:
    cfg = result.config
    fp = result.samples[0].comparable if result.samples else None
    verdict, *rest = conclusions(result)  # the answer first, as every command says it
    lines = [verdict, f"jaxcache bench: {safe(' '.join(cfg.argv))}"]
    if fp is not None:
        lines.append(f"jax {fp.jax}, jaxlib {fp.jaxlib}, python {fp.python}, {fp.backend} "
                     f"({fp.device_kind} x{fp.device_count}); "
                     f"{sum(1 for s in result.samples if s.kind == 'cold')} cold and "
                     f"{sum(1 for s in result.samples if s.kind == 'warm')} warm "
                     f"{_runs(result)} in {result.elapsed_s:.0f} s")
        # wrapped, never clipped: a clipped line cut the shapes mid-way, '... (...'
        lines += [w for line in cached(result) for w in wrap(f"cached {line}", "  ")]
    rows = table(result)
    if len(rows) > 1:
        lines += [""] + _layout(rows)
    per = bench_ranks.rows(result)
    if len(per) > 1:
        lines += ["", f"per rank ({bench_ranks.NOTE}):"] + _layout(per)
    lines.append("")
    for line in rest:  # the prose ones wrapped; the Markdown report keeps them
        lines += wrap(line, "") if line.startswith(_PROSE) else [line]
    return "\n".join(lines) + "\n"
