"""`jaxcache records`: the run records in your state dir, listed, pruned, added up."""

from __future__ import annotations

import argparse

from jaxcache.cli import common


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", nargs="?", choices=("list", "prune", "stats"), metavar="ACTION",
                   help="list (default), prune or stats.")
    opt = common.option
    opt(p, "--dir", dest="records_dir", metavar="DIR",
        help="The records directory (default: your state dir's jaxcache/runs).")
    opt(p, "--older-than", type=common.Range(float, 0), metavar="DAYS",
        help="prune: records made more than DAYS days ago.")
    opt(p, "--keep", type=common.Range(int, 0), metavar="N",
        help="prune: all but the newest N records (with --older-than: only old ones beyond "
             "the newest N).")
    opt(p, "--dry-run", action="store_true",
        help="prune: say what would be deleted, delete nothing.")
    common.format_flag(p)


def handle(args: argparse.Namespace, tail: None) -> None:
    """The run records in your state dir: list them, prune them, add them up.

      jaxcache records                          list, newest first (same as `records list`)
      jaxcache records prune --older-than 30    delete records made more than 30 days ago
      jaxcache records prune --keep 100 --dry-run
      jaxcache records stats                    cumulative, like `ccache -s`

    `jaxcache run` writes one record per run (and `explain -- CMD` two) into
    ~/.local/state/jaxcache/runs/. Only files named as jaxcache names them that also parse as
    run records are listed, counted or deleted; a file with such a name that is not a record
    is left alone and named (skipped, with why); files with other names are not jaxcache's:
    left alone, not read, not listed.
    Nothing follows a symlink: files are opened and deleted relative to the directory's
    descriptor. With --older-than and --keep together, prune deletes only records that are
    both old and beyond the newest N. stats' saving is an estimate: per hit, the compile time
    another record measured for the same cache key, minus the hit's load time.

    Exit code: 0 done (also when there is nothing to list or delete); 2 bad input (nothing is
    changed).
    """
    from jaxcache.records import record_dir as store

    action = args.action or "list"
    pruning = args.older_than is not None or args.keep is not None or args.dry_run
    if action != "prune" and pruning:
        common.usage(args, "--older-than, --keep and --dry-run go with `records prune`")
    if action == "prune" and args.older_than is None and args.keep is None:
        common.usage(args, "records prune needs --older-than DAYS and/or --keep N")
    directory = args.records_dir if args.records_dir is not None else store.runs_dir()
    from jaxcache.report import records as formats

    fmt = formats.FORMATS[args.fmt]
    if action == "prune":
        from jaxcache.records import prune

        text = fmt["prune"](prune.prune(directory, older_than_days=args.older_than,
                                            keep=args.keep, dry_run=args.dry_run))
    elif action == "stats":
        from jaxcache.records import totals as stats

        text = fmt["stats"](stats.compute(store.scan(directory)))
    else:
        text = fmt["list"](store.scan(directory))
    common.finish(args, text, 0)
