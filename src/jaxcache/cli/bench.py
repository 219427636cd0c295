"""`jaxcache bench`: cold versus warm, each in its own process; or --compare two results."""

from __future__ import annotations

import argparse

from jaxcache.cli import common


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="CMD",
                   help="The program and its arguments, passed on verbatim.")
    common.trials_flags(p, "")
    opt = common.option
    opt(p, "--no-prime", action="store_true",
        help="Skip the discarded first run that warms the OS file cache.")
    opt(p, "--timeout", type=common.Range(float, 0.1), metavar="SECONDS",
        help="Kill a run that takes longer (and stop the bench).")
    opt(p, "--confidence", type=common.Range(float, 0.5, 0.999), default=0.95,
        show_default=True, metavar="LEVEL")
    opt(p, "--noise", dest="noise_s", type=common.Range(float, 0), default=0.1,
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
    opt(p, "--min-compile-time", type=common.Range(float, 0), metavar="SECONDS",
        help="Set jax_persistent_cache_min_compile_time_secs for every run (JAX's "
             "default 1.0). Reported, and marked when below the default.")
    opt(p, "--min-entry-size", type=common.Range(int, -1), metavar="BYTES",
        help="Set jax_persistent_cache_min_entry_size_bytes for every run.")
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
        help="Compare two earlier `--json` results instead of running anything (text).")
    opt(p, "--sealed", action="store_true",
        help="Seal each trial's cache (a throwaway signing key): warm runs pay for "
             "verification, as a sealed consumer would (docs/sealed-cache.md).")
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
    error, a target that cannot be written, or a run that failed or timed out; 130
    interrupted (the runs that finished are still reported).
    """
    argv = common.user_command(args.command, tail)
    if args.compare:
        if argv:
            common.usage(args, "--compare takes two JSON files and no command")
        if args.fmt != "text":
            common.usage(args, "--compare prints text only (its inputs are the JSON)")
        from jaxcache.bench import command as benchcmd

        common.finish(args, benchcmd.compare(*args.compare), 0)
    if not argv:
        common.usage(args, "no command to bench: jaxcache bench [OPTIONS] -- CMD [ARGS...]")
    from jaxcache.bench import command as benchcmd

    verdict = common.lines_starting("verdict:")

    def echo(text: str) -> None:
        common.out(args, verdict(text) if args.quiet and args.fmt == "text" else text)

    code = benchcmd.run(
        argv, trials=args.trials, warm=args.warm, prime=not args.no_prime,
        timeout=args.timeout, confidence=args.confidence, noise_s=args.noise_s,
        max_trials=args.max_trials, target_width=args.target_width,
        time_budget=args.time_budget, min_compile_time=args.min_compile_time,
        min_entry_size=args.min_entry_size, workdir=args.workdir, out_dir=args.out_dir,
        report_path=args.report_path, json_path=args.json_path, plot_path=args.plot_path,
        echo=echo, sealed=args.sealed, bucket=args.bucket, fmt=args.fmt,
        note=echo if args.fmt == "text" and args.sink is None else
        (lambda text: common.note(args, text)), quiet=args.quiet,
        min_saving=args.min_saving, min_fraction=args.min_fraction)
    common.flush_output(args)
    raise SystemExit(code)
