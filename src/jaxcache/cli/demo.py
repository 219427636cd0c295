"""`jaxcache demo`: the whole story on the bundled example."""

from __future__ import annotations

import argparse

from jaxcache.cli import common


def options(p: argparse.ArgumentParser) -> None:
    common.option(p, "--out", dest="out_dir", default="demo-output", show_default=True,
                  metavar="DIR",
                  help="Where the demo makes its own new folder DIR/jaxcache-demo-N (mkdir, "
                       "0700; DIR is made if missing): report.md, chart.png, bench.json, "
                       "runs/. Nothing that exists is reused, replaced or deleted.")
    common.trials_flags(p, "")


def handle(args: argparse.Namespace, tail: None) -> None:
    """The whole story on the bundled example: trust first, then what the cache buys.

    Makes a new private directory DIR/jaxcache-demo-N (--out DIR; N is the first number
    free, the folder is made with mkdir so it never existed), audits it and a deliberately
    unsafe one, then benches examples/mlp.py cold vs warm into it, explains it and decides. It
    writes nowhere else (besides temporary folders of its own) and deletes nothing it did not
    make. A few minutes on 2 cores. --quiet prints only its last line (done or FAILED).
    """
    from jaxcache import demo as demomod

    last = common.lines_starting("demo done", "demo FAILED", "demo stopped")

    def echo(text: str) -> None:
        common.out(args, last(text) if args.quiet else text)

    code = demomod.run(out_dir=args.out_dir, trials=args.trials, warm=args.warm, echo=echo,
                       quiet=args.quiet)
    common.flush_output(args)
    raise SystemExit(code)
