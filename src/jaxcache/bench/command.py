"""`jaxcache bench` wiring: check the outputs can be written, run, report, pick the exit code."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable

from jaxcache import outputs
from jaxcache.display import safe
from jaxcache.errors import JaxcacheError, UntrustedCacheError

MARKDOWN_HEAD = b"# jaxcache bench\n"  # report/bench_markdown.py's first line


def _private_dir(path: str, flag: str) -> str:
    """A directory we may write into: created private if missing, audited if it exists."""
    from jaxcache.trust import create

    result = create.init(path)
    if result.ok:
        return result.path
    if not result.report.verdict.ok:
        raise UntrustedCacheError(result.report)
    raise JaxcacheError(f"{flag} {safe(path)}: {result.refused} (give a new path, or a "
                        "directory of yours with mode 0700)")


def run(argv: list[str], *, trials: int, warm: int, prime: bool, timeout: float | None,
        confidence: float, noise_s: float, max_trials: int | None, target_width: float | None,
        time_budget: float | None, min_compile_time: float | None, min_entry_size: int | None,
        workdir: str | None, out_dir: str | None, report_path: str | None,
        json_path: str | None, plot_path: str | None, echo: Callable[[str], None],
        sealed: bool = False, bucket: str | None = None, fmt: str = "text",
        note: Callable[[str], None] | None = None, quiet: bool = False,
        min_saving: float | None = None, min_fraction: float | None = None) -> int:
    """Bench `argv`; `echo` gets the report (text, or with fmt="json" the JSON document),
    `note` what was written (default: echo); `quiet` drops the progress on stderr;
    `min_saving` / `min_fraction`: the noticeable bar (bench/noticeable.py's defaults)."""
    from jaxcache.bench import noticeable
    from jaxcache.bench.progress import BenchProgress
    from jaxcache.bench.trials import BenchCommandError, BenchConfig, run_bench
    from jaxcache.probe.launch import resolve

    exe = resolve(argv)  # command not found / not executable: before any work
    from jaxcache.run import jaxgate

    why = jaxgate.refusal(exe)  # a JAX outside the supported lines: its records would be wrong
    if why is not None:
        raise JaxcacheError(f"{why}. Use a supported JAX to bench")
    if bucket is not None:
        if not sealed:
            raise JaxcacheError("--bucket needs --sealed: a plain bucket is UNVERIFIABLE and "
                                "refused (docs/sealed-cache.md)")
        from jaxcache.seal import objects

        bucket = objects.parse(bucket).text
        objects.open_store(objects.parse(bucket))  # the client is installed: before any work
    if max_trials is not None and max_trials < trials:
        raise JaxcacheError(f"--max-trials {max_trials} is below --trials {trials}")
    adaptive = target_width is not None or time_budget is not None
    if max_trials is not None and not adaptive:
        raise JaxcacheError("--max-trials needs --until-width or --time-budget (when to stop)")
    if adaptive and max_trials is None:
        max_trials = max(trials, 30)
    if plot_path is not None and not plot_path.lower().endswith(".png"):
        raise JaxcacheError(f"--plot writes PNG: give a file name ending in .png, not "
                            f"{safe(plot_path)}")
    claimed: list[outputs.Output] = []
    try:  # every output claimed before the first trial; given up again if no result comes
        if out_dir is not None:
            out_dir = _private_dir(out_dir, "--out")
            report_path = report_path or os.path.join(out_dir, "report.md")
            json_path = json_path or os.path.join(out_dir, "bench.json")
            plot_path = plot_path or os.path.join(out_dir, "chart.png")
            workdir = workdir or os.path.join(out_dir, "runs")
        if plot_path is not None:
            import importlib.util

            if importlib.util.find_spec("matplotlib") is None:
                raise JaxcacheError("--plot (and --out) need matplotlib: pip install "
                                    "'jaxcache[plot]'")
        named = [os.path.abspath(p) for p in (report_path, json_path, plot_path) if p]
        if len(set(named)) < len(named):
            raise JaxcacheError("--json, --report and --plot (and --out's files) must name "
                                "different files")
        targets = {}
        for key, path, what, recognize in (
                ("report", report_path, "report", outputs.starts_with(MARKDOWN_HEAD)),
                ("json", json_path, "bench result", outputs.json_schema("jaxcache.bench/")),
                ("plot", plot_path, "chart", outputs.png_from_jaxcache)):
            if path is not None:
                targets[key] = outputs.claim(path, what, recognize=recognize)
                claimed.append(targets[key])
        keep = workdir is not None
        if workdir is not None:
            flag = "--out" if out_dir is not None and workdir == os.path.join(out_dir, "runs") \
                else "--workdir"
            workdir = _private_dir(workdir, flag)
            if os.listdir(workdir):
                raise JaxcacheError(f"{flag}: {safe(workdir)} is not empty (an earlier bench?): "
                                    "give a new or empty directory (jaxcache never deletes what "
                                    "it did not create)")
        else:
            import tempfile

            workdir = tempfile.mkdtemp(prefix="jaxcache-bench-")
        thresholds = {}
        if min_compile_time is not None:
            thresholds["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = repr(min_compile_time)
        if min_entry_size is not None:
            thresholds["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = str(min_entry_size)
        cfg = BenchConfig(tuple(argv), trials, warm, prime, timeout, confidence, noise_s,
                          max_trials, target_width, time_budget, thresholds, sealed, bucket,
                          noticeable.MIN_SAVING_S if min_saving is None else min_saving,
                          noticeable.MIN_FRACTION if min_fraction is None else min_fraction)
        if quiet:
            import io

            progress = BenchProgress(warm, stream=io.StringIO(), live=False)
        else:
            progress = BenchProgress(warm)
        try:
            try:
                result = run_bench(cfg, workdir=workdir, progress=progress)
            finally:
                progress.close()
            return _report(result, targets, echo, keep, fmt, note or echo)
        except BenchCommandError as exc:
            if keep:
                raise
            raise BenchCommandError(f"{exc}\n(rerun with --workdir DIR to keep every run's "
                                    "record, stdout and stderr)") from None
        finally:
            if not keep:
                shutil.rmtree(workdir, ignore_errors=True)
    finally:
        outputs.release_all(claimed)  # no-op for those written


def _report(result, targets: dict[str, outputs.Output], echo, kept: bool, fmt: str = "text",
            note=None) -> int:
    from jaxcache.report import bench_json, bench_markdown, bench_text

    note = note or echo
    if fmt == "json":
        echo(bench_json.render(result))
    else:
        text = bench_text.render(result)
        if not kept and result.stop_reason == "warm-missed":
            text += ("(the runs' records were in a temporary folder, now removed: rerun with "
                     "--workdir DIR to keep them for jaxcache explain)\n")
        echo(text)
    written = []
    plot, report, doc = targets.get("plot"), targets.get("report"), targets.get("json")
    if plot and result.analysis.phases:
        from jaxcache.report import bench_plot

        plot.write(bench_plot.render(result))
        written.append(plot.path)
    elif plot:
        plot.release()
        note(f"no chart written to {plot.path}: no completed cold and warm runs\n")
    if report:
        chart = None
        if plot and plot.written and os.path.dirname(plot.path) == os.path.dirname(report.path):
            chart = os.path.basename(plot.path)
        report.write(bench_markdown.render(result, chart))
        written.append(report.path)
    if doc:
        doc.write(bench_json.render(result))
        written.append(doc.path)
    if written:
        note("wrote " + ", ".join(written) + "\n")
    if result.stop_reason == "interrupted":
        return 130
    return 0 if result.analysis.verdict == "saves" else 1


def measure(command: list[str], *, trials: int, warm: int,
            echo: Callable[[str], None], sealed: bool = False, quiet: bool = False,
            min_saving: float | None = None, min_fraction: float | None = None) -> dict:
    """Bench a command with defaults and return its `--json` document (for decide, whose
    noticeable bar it is given so both judge alike)."""
    import tempfile

    out = tempfile.mkdtemp(prefix="jaxcache-decide-")
    try:
        path = os.path.join(out, "bench.json")
        run(command, trials=trials, warm=warm, prime=True, timeout=None, confidence=0.95,
            noise_s=0.1, max_trials=None, target_width=None, time_budget=None,
            min_compile_time=None, min_entry_size=None, workdir=None, out_dir=None,
            report_path=None, json_path=path, plot_path=None, echo=echo, sealed=sealed,
            quiet=quiet, min_saving=min_saving, min_fraction=min_fraction)
        return load_result(path)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def load_result(path: str) -> dict:
    """An earlier `bench --json` result; bad input is one clear line."""
    from jaxcache.documents import load_bench

    return load_bench(path)


def compare(a_path: str, b_path: str) -> str:
    return compare_results(load_result(a_path), load_result(b_path), a_path, b_path)


def compare_results(a: dict, b: dict, a_path: str, b_path: str) -> str:
    """Two bench results side by side, each already read and checked (documents.BENCH)."""
    lines = [f"jaxcache bench --compare {safe(a_path)} {safe(b_path)}"]
    ca, cb = " ".join(a.get("command") or []), " ".join(b.get("command") or [])
    lines.append(f"A: {safe(ca)}" if ca == cb else f"A: {safe(ca)}\nB: {safe(cb)} (a "
                 "different command)")
    fa, fb = a.get("fingerprint") or {}, b.get("fingerprint") or {}
    diffs = [line for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)
             for line in _differ(k, fa.get(k), fb.get(k))]
    lines.append("fingerprints: identical" if not diffs else
                 "fingerprints differ (timings are not directly comparable):")
    lines += diffs
    rows = [("", "A", "B")]
    for name in ("wall",):
        for arm in ("cold", "warm"):
            va = ((a["summary"].get(name) or {}).get(arm) or {}).get("median")
            vb = ((b["summary"].get(name) or {}).get(arm) or {}).get("median")
            rows.append((f"{arm} wall median (s)", _f(va), _f(vb)))
    for phase in (a["summary"].get("phases") or {}):
        for arm in ("cold", "warm"):
            va = a["summary"]["phases"][phase][arm]["median"]
            vb = ((b["summary"].get("phases") or {}).get(phase) or {}).get(arm, {}).get("median")
            rows.append((f"{arm} {safe(phase)} (s)", _f(va), _f(vb)))
    for key in ("saving_s", "compile_saving_s"):
        sa, sb = a["summary"].get(key), b["summary"].get(key)
        rows.append((key.replace("_", " "), _ci(sa), _ci(sb)))
    rows.append(("verdict", a["summary"]["verdict"], b["summary"]["verdict"]))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines.append("")
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
              for r in rows]
    return "\n".join(lines) + "\n"


def _differ(key: str, a, b) -> list[str]:
    """One fingerprint field that differs, short: the modules whose inputs changed (summaries
    and digests, not 2,000-character reprs), a digest for any other long value."""
    from jaxcache.report import style

    if key == "shapes" and isinstance(a, list) and isinstance(b, list):
        def by_module(v: list) -> dict[str, str]:
            return {str(d.get("module")): str(d.get("input_shapes")) for d in v
                    if isinstance(d, dict)}
        ma, mb = by_module(a), by_module(b)
        names = sorted(n for n in set(ma) | set(mb) if ma.get(n) != mb.get(n))
        out = [f"  shapes: {style.plural(len(names), 'module')} differ"]
        out += [style.clip(f"    {safe(n)}: {style.shapes(ma.get(n)) if n in ma else 'absent'} "
                           f"vs {style.shapes(mb.get(n)) if n in mb else 'absent'}",
                           style.width()) for n in names[:5]]
        return out + ([f"    ... and {len(names) - 5} more"] if len(names) > 5 else [])

    def brief(v) -> str:
        text = safe(repr(v))
        return text if len(text) <= 60 else f"{text[:40]}... (digest {style.digest(text)})"
    return [f"  {safe(key)}: {brief(a)} vs {brief(b)}"]


def _f(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def _ci(s: dict | None) -> str:
    if not s or s.get("estimate") is None:
        return "-"
    if s.get("low") is None:
        return f"{s['estimate']:.2f} [no interval]"
    level = s.get("confidence")
    label = f" ({level:.1%} CI)" if isinstance(level, float) else ""
    return f"{s['estimate']:.2f} [{s['low']:.2f} - {s['high']:.2f}]{label}"
