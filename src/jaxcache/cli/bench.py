"""`jaxcache bench`: cold versus warm, each in its own process; or --compare two results.

The flags, then the command's wiring: every output claimed before the first trial, the
measuring handed to bench/trials.py, the result to report/'s formats.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass

from jaxcache.bench.analysis import Outcome
from jaxcache.bench.trials import BenchConfig
from jaxcache.cli import common
from jaxcache.documents import claim as outputs
from jaxcache.documents import kinds
from jaxcache.errors import JaxcacheError, UntrustedCacheError
from jaxcache.text import safe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.bench.bench_document import BenchDocument
    from jaxcache.bench.trials import BenchResult


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="CMD",
                   help="The program and its arguments, passed on verbatim.")
    common.trials_flags(p, "")
    opt = common.option
    opt(p, "--no-prime", action="store_true",
        help="Skip the discarded first run that warms the OS file cache.")
    opt(p, "--timeout", type=common.Range(float, 0.1), metavar="SECONDS",
        help="Kill a run that takes longer (and stop the bench).")
    opt(p, "--confidence", type=common.Range(float, 0.5, 0.999), default=BenchConfig.confidence,
        show_default=True, metavar="LEVEL")
    opt(p, "--noise", dest="noise_s", type=common.Range(float, 0), default=BenchConfig.noise_s,
        show_default=True, metavar="SECONDS",
        help="A saving whose interval clears this is 'significant' (then the amortization "
             "is shown); the verdict is the noticeable test (--min-saving, --min-fraction).")
    common.noticeable_flags(p)
    opt(p, "--max-trials", type=common.Range(int, 1, common.MAX_TRIALS), metavar="N",
        help="Adaptive: after --trials, keep adding trials up to N until --until-width "
             "or --time-budget is reached.")
    opt(p, "--until-width", dest="target_width", type=common.Range(float, 0), metavar="SECONDS",
        help="Adaptive: stop when the saving's interval is at most this wide.")
    opt(p, "--time-budget", type=common.Range(float, 1), metavar="SECONDS",
        help="Adaptive: stop adding trials after this much time.")
    opt(p, "--until-decided", action="store_true",
        help="Adaptive: stop adding trials as soon as the verdict is decided (not "
             "inconclusive), up to --max-trials (default 30) or --time-budget: a loaded "
             "machine gets the trials it needs, a quiet one no more.")
    common.threshold_flags(p, "every run (reported, and marked when below the default)")
    opt(p, "--for-cache", metavar="DIR",
        help="The cache directory the job uses, recorded in the result (config.for_cache) so "
             "that `jaxcache decide DIR` judges this bench with no --bench. Default: "
             "$JAX_COMPILATION_CACHE_DIR, else the project file's cache_dir (where `jaxcache "
             "run` and enable() put the job's entries), else none.")
    opt(p, "--workdir", metavar="DIR",
        help="Keep caches, records and job output here (a private dir you own; "
             "audited). Default: a private temporary dir, removed afterwards.")
    opt(p, "--out", dest="out_dir", metavar="DIR",
        help="Write report.md, bench.json and chart.png into DIR (created private; an "
             "existing DIR must be private) and keep runs in DIR/runs.")
    opt(p, "--report", dest="report_path", metavar="FILE.md",
        help="Markdown report. Like every output: created (empty) before the first trial, "
             "so an unwritable or taken path fails at once; never written over a file "
             "unless that is a jaxcache document of the same kind of yours (or empty).")
    opt(p, "--json", dest="json_path", metavar="FILE",
        help="Also export the raw samples and results (JSON, the document --format json "
             "prints).")
    opt(p, "--plot", dest="plot_path", metavar="FILE.png",
        help="Chart of the phases, cold vs warm (needs matplotlib).")
    opt(p, "--compare", nargs=2, metavar=("A.json", "B.json"),
        help="Compare two earlier `--json` results instead of running anything: B against A "
             "per measure (warm start, time to first step, compile or load, cold start, "
             "seconds saved), as 'N times faster/slower' with its interval over the trials of "
             "both, and every setting that differs, whole (--format json, or --json FILE, "
             "for the JSON).")
    opt(p, "--sealed", action="store_true",
        help="Seal each trial's cache (a throwaway signing key): warm runs pay for "
             "verification, as a sealed consumer would (docs/how-to/sealed-cache.md).")
    opt(p, "--bucket", metavar="URL",
        help="With --sealed, a gs:// or s3://BUCKET/PREFIX: each trial's cache is a new, "
             "empty prefix "
             "PREFIX/jaxcache-bench-RANDOM/trial-N in this bucket (nothing else there is "
             "touched; jaxcache deletes nothing: remove that prefix when done).")
    common.format_flag(p)


def handle(args: argparse.Namespace, tail: list[str] | None) -> None:
    """Measure what the cache buys: cold versus warm, each in its own process.

      jaxcache bench -- python train.py
      jaxcache bench -t 3 -k 2 --out bench-out -- python examples/mlp.py
      jaxcache bench --compare before.json after.json
      jaxcache bench --compare before.json after.json --format json

    Each trial makes a fresh private cache, runs the job once cold and K times warm against
    it, and checks the cache really filled and was hit. Per process it reports import jax,
    trace, lower, compile-or-load and the rest from inside (the probe of `jaxcache run`), and
    wall, CPU and memory from outside. The saving per start comes with an exact
    distribution-free interval over trials, the independent unit (two-sample Hodges-Lehmann /
    exact Mann-Whitney; 4 trials, 8 processes, are the fewest for 95%). JAX's thresholds are never
    lowered unless you ask, and always reported.

    Outputs (--json, --report, --plot, --out, -o): each target is created before the first
    trial, so an unwritable one, or a file that is not a jaxcache document of yours, fails at
    once (exit 2); a bench that fails removes the empty files it created, an interrupted one
    writes what finished. A jaxcache document of the same kind that you own is replaced
    atomically. --format json prints the --json document on stdout; progress goes to stderr
    (none with --quiet, which prints only the verdict line).

    Verdicts, on the saving's interval (the rule decide applies too): saves (noticeable: the
    lower bound >= the larger of --min-saving and --min-fraction of the cold start-up),
    too-small (the whole interval is below that), inconclusive (the interval straddles it, or
    too few trials for an interval: run more, -t N), nothing-cached, warm-missed.

    Exit code: 0 saves; 1 too-small, inconclusive, nothing-cached or warm-missed; 2 usage
    error, a target that cannot be written, or a run that failed or timed out; 126 the
    program is not executable, 127 not found (before any run); 130 interrupted (the runs that
    finished are still reported).
    """
    argv = common.user_command(args.command, tail)
    if args.compare:
        _compare(args, argv)
    if not argv:
        common.usage(args, "no command to bench: jaxcache bench [OPTIONS] -- CMD [ARGS...]")
    verdict = common.lines_starting("verdict:")

    def echo(text: str) -> None:
        common.out(args, verdict(text) if args.quiet and args.fmt == "text" else text)

    code = run(
        argv, trials=args.trials, warm=args.warm, prime=not args.no_prime,
        timeout=args.timeout, confidence=args.confidence, noise_s=args.noise_s,
        max_trials=args.max_trials, target_width=args.target_width,
        time_budget=args.time_budget, thresholds=common.threshold_env(args),
        until_decided=args.until_decided,
        workdir=args.workdir, out_dir=args.out_dir,
        report_path=args.report_path, json_path=args.json_path, plot_path=args.plot_path,
        echo=echo, sealed=args.sealed, bucket=args.bucket, fmt=args.fmt,
        for_cache=_for_cache(args),
        note=echo if args.fmt == "text" and args.sink is None else
        (lambda text: common.note(args, text)), quiet=args.quiet,
        min_saving=args.min_saving, min_fraction=args.min_fraction)
    common.flush_output(args)
    raise SystemExit(code)


def _compare(args: argparse.Namespace, argv: list[str]) -> None:
    """--compare A B: B against A (bench/comparable.py), as text or JSON; --json FILE also
    writes the JSON document (claimed before anything is read)."""
    if argv:
        common.usage(args, "--compare takes two JSON files and no command")
    if args.report_path or args.plot_path or args.out_dir:
        common.usage(args, "--compare writes no --report, --plot or --out (--json FILE: the "
                           "comparison as JSON)")
    from jaxcache.bench.bench_document import BenchDocument
    from jaxcache.bench.comparable import ab
    from jaxcache.documents.read import load_bench
    from jaxcache.report.bench import json as bench_json

    target = None if args.json_path is None else outputs.claim(
        args.json_path, "bench comparison", recognize=outputs.json_schema(
            kinds.prefix("bench-compare")))
    try:
        a_path, b_path = args.compare
        a, b = (BenchDocument.from_json(load_bench(p)) for p in (a_path, b_path))
        result = ab(a, b)
        document = bench_json.compare(result, a, b, a_path, b_path)
    except BaseException:
        outputs.release_all([target])
        raise
    if target is not None:
        target.write(document)
    if args.fmt == "json":
        common.finish(args, document, 0)
    from jaxcache.report.bench.compare import render

    common.finish(args, render(result, a, b, a_path, b_path), 0)


def _cwd() -> str | None:
    """The folder the job runs from, as a run record writes it: raw, escaped where shown (None:
    it is gone)."""
    try:
        return os.getcwd()
    except OSError:
        return None


def _for_cache(args: argparse.Namespace) -> str | None:
    """The cache directory of the job benched: --for-cache, else the one `jaxcache run` would
    use here when one is chosen ($JAX_COMPILATION_CACHE_DIR, the project file's cache_dir);
    None for jaxcache's own default (no job is known to use it). Absolute, normalized."""
    from jaxcache.project import effective
    from jaxcache.records.used_dirs import canonical

    if args.for_cache is not None and not args.for_cache.strip():
        common.usage(args, "--for-cache needs a directory (the cache the job uses)")
    chosen = effective.first(effective.cache_dir_candidates(os.environ, args.for_cache),
                             None)[1]
    return None if chosen is None else canonical(chosen)


MARKDOWN_HEAD = b"# jaxcache bench\n"  # report/bench/markdown.py's first line


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
        time_budget: float | None, thresholds: dict[str, str] | None,
        workdir: str | None, out_dir: str | None, report_path: str | None,
        json_path: str | None, plot_path: str | None, echo: Callable[[str], None],
        sealed: bool = False, bucket: str | None = None, fmt: str = "text",
        note: Callable[[str], None] | None = None, quiet: bool = False,
        min_saving: float | None = None, min_fraction: float | None = None,
        until_decided: bool = False, for_cache: str | None = None) -> int:
    """Bench `argv`; `echo` gets the report (text, or with fmt="json" the JSON document),
    `note` what was written (default: echo); `quiet` drops the progress on stderr;
    `min_saving` / `min_fraction`: the noticeable bar (bench/noticeable.py's defaults)."""
    from jaxcache.bench import noticeable
    from jaxcache.bench.trials import BenchCommandError, run_bench
    from jaxcache.probe.launch import resolve
    from jaxcache.report.bench.progress import BenchProgress

    exe = resolve(argv)  # command not found / not executable: before any work
    from jaxcache.jaxcompat import gate as jaxgate

    why = jaxgate.refusal(exe)  # a JAX outside the supported lines: its records would be wrong
    if why is not None:
        raise JaxcacheError(f"{why}. Use a supported JAX to bench")
    if bucket is not None:
        if not sealed:
            raise JaxcacheError("--bucket needs --sealed: a plain bucket is UNVERIFIABLE and "
                                "refused (docs/how-to/sealed-cache.md)")
        from jaxcache.seal.objects import store_for_url as objects
        from jaxcache.trust.rules import target

        bucket = target.parse_bucket(bucket).text
        objects.open_store(target.parse_bucket(bucket))  # the client is installed: before any work
    if max_trials is not None and max_trials < trials:
        raise JaxcacheError(f"--max-trials {max_trials} is below --trials {trials}")
    adaptive = target_width is not None or time_budget is not None or until_decided
    if max_trials is not None and not adaptive:
        raise JaxcacheError("--max-trials needs --until-width, --until-decided or "
                            "--time-budget (when to stop)")
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
        from jaxcache.bench import kept

        kept_path = None if json_path is not None and kept.is_kept(json_path) else \
            kept.new_path()  # what decide reads when given no bench (None: cannot be kept)
        named = [os.path.abspath(p) for p in (report_path, json_path, plot_path) if p]
        if len(set(named)) < len(named):
            raise JaxcacheError("--json, --report and --plot (and --out's files) must name "
                                "different files")
        def claim(path: str | None, what: str,
                  recognize: outputs.Recognizer) -> outputs.Output | None:
            if path is None:
                return None
            claimed.append(outputs.claim(path, what, recognize=recognize))
            return claimed[-1]

        report = claim(report_path, "report", outputs.starts_with(MARKDOWN_HEAD))
        document = claim(json_path, "bench result", outputs.json_schema(kinds.prefix("bench")))
        chart = claim(plot_path, "chart", outputs.png_from_jaxcache)
        kept_target = None
        # a fresh name in a private directory of the user's; never fails the bench
        with contextlib.suppress(OSError, JaxcacheError):
            kept_target = claim(kept_path, "bench result",
                                outputs.json_schema(kinds.prefix("bench")))
        targets = _Targets(report, document, chart, kept_target)
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
        thresholds = dict(thresholds or {})
        cfg = BenchConfig(tuple(argv), trials, warm, prime, timeout, confidence, noise_s,
                          max_trials, target_width, time_budget, thresholds, sealed, bucket,
                          noticeable.MIN_SAVING_S if min_saving is None else min_saving,
                          noticeable.MIN_FRACTION if min_fraction is None else min_fraction,
                          until_decided, for_cache, _cwd())
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


@dataclass(frozen=True, slots=True)
class _Targets:
    """The outputs claimed before the first trial (None: not asked for)."""

    report: outputs.Output | None
    json: outputs.Output | None
    plot: outputs.Output | None
    kept: outputs.Output | None  # where decide finds the last bench


def _report(result: BenchResult, targets: _Targets,
            echo: Callable[[str], None], kept: bool, fmt: str = "text",
            note: Callable[[str], None] | None = None) -> int:
    from jaxcache.report.bench import json as bench_json
    from jaxcache.report.bench import markdown as bench_markdown
    from jaxcache.report.bench import text as bench_text

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
    plot, report, doc = targets.plot, targets.report, targets.json
    if plot and result.analysis.phases:
        from jaxcache.report.bench import plot as bench_plot

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
    if targets.kept:  # the one decide reads when given no --bench: said where, once
        targets.kept.write(bench_json.render(result))
        note(f"kept for `jaxcache decide` (its --bench FILE): {safe(targets.kept.path)}\n")
    if result.stop_reason == "interrupted":
        return 130
    return 0 if result.analysis.verdict is Outcome.SAVES else 1


def measure(command: list[str], *, trials: int, warm: int,
            echo: Callable[[str], None], sealed: bool = False, quiet: bool = False,
            min_saving: float | None = None, min_fraction: float | None = None,
            thresholds: dict[str, str] | None = None, for_cache: str | None = None
            ) -> tuple[str | None, BenchDocument]:
    """Bench a command with defaults and return its `--json` result and where it is kept
    (None: the state directory cannot be made; the result is read from a folder of our own,
    removed after), for decide, whose noticeable bar it is given so both judge alike, and
    whose cache directory (`for_cache`) it records, so a later decide of it finds this bench."""
    import tempfile

    from jaxcache.bench import kept
    from jaxcache.bench.bench_document import BenchDocument
    from jaxcache.documents.read import load_bench

    path = kept.new_path()
    own = None if path is not None else tempfile.mkdtemp(prefix="jaxcache-decide-")
    try:
        json_path = path or os.path.join(str(own), "bench.json")
        run(command, trials=trials, warm=warm, prime=True, timeout=None,
            confidence=BenchConfig.confidence, noise_s=BenchConfig.noise_s, max_trials=None,
            target_width=None, time_budget=None, thresholds=thresholds, workdir=None,
            out_dir=None, report_path=None, json_path=json_path, plot_path=None, echo=echo,
            sealed=sealed, quiet=quiet, min_saving=min_saving, min_fraction=min_fraction,
            for_cache=for_cache)
        return path, BenchDocument.from_json(load_bench(json_path))
    finally:
        if own is not None:
            shutil.rmtree(own, ignore_errors=True)  # made above: ours to remove
