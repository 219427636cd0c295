"""`jaxcache records`: the run records in your state dir, listed, pruned, added up."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from jaxcache.cli import common


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", nargs="?", choices=("list", "prune", "stats"), metavar="ACTION",
                   help="list (default), prune or stats.")
    p.add_argument("cache", nargs="?", metavar="CACHE",
                   help="stats: only the runs that used this cache directory (as `ccache -s` "
                        "for one cache).")
    opt = common.option
    opt(p, "--dir", dest="records_dir", metavar="DIR",
        help="The records directory (default: your state dir's jaxcache/runs).")
    opt(p, "--older-than", type=common.Range(float, 0), metavar="DAYS",
        help="prune: records made more than DAYS days ago.")
    opt(p, "--keep", type=common.Range(int, 0), metavar="N",
        help="prune: all but the newest N records (with --older-than: only old ones beyond "
             "the newest N). Default: the project file's [records] keep, if any.")
    opt(p, "--dry-run", action="store_true",
        help="prune: say what would be deleted, delete nothing.")
    opt(p, "--record", dest="record_files", action="extend", nargs="+", metavar="FILE",
        help="stats: also count these records (written with `run --record FILE`, outside the "
             "state dir, which jaxcache does not track); may be given more than once.")
    opt(p, "--zero", action="store_true",
        help="stats CACHE: start counting afresh for CACHE (a mark in your state dir; no "
             "record is deleted): later stats count only runs made after it.")
    common.format_flag(p)


def handle(args: argparse.Namespace, tail: None) -> None:
    """The run records in your state dir: list them, prune them, add them up.

      jaxcache records                          list, newest first (same as `records list`)
      jaxcache records prune --older-than 30    delete records made more than 30 days ago
      jaxcache records prune --keep 100 --dry-run
      jaxcache records stats                    cumulative, like `ccache -s`
      jaxcache records stats /srv/jax-cache     only the runs that used that cache
      jaxcache records stats /srv/jax-cache --record run1.json run2.json
      jaxcache records stats /srv/jax-cache --zero   count afresh from now

    `jaxcache run` writes one record per run (and `explain -- CMD` two) into
    ~/.local/state/jaxcache/runs/, or the project file's [records] dir
    (docs/reference/project-file.md; `jaxcache config` shows which), unless --record FILE says
    where. Only files named as jaxcache names them that also parse as run records are listed,
    counted or deleted; a file with such a name that is not a record is left alone and named
    (skipped, with why); files with other names are not jaxcache's: left alone, not read, not
    listed. Nothing follows a symlink: files are opened and deleted relative to the directory's
    descriptor. With --older-than and --keep together, prune deletes only records that are
    both old and beyond the newest N. stats' saving is an estimate: per hit, the compile time
    another record measured for the same cache key, minus the hit's load time.

    stats CACHE counts the runs whose record says they used CACHE (the audited directory, or
    one JAX was pointed at and jaxcache served), with the entries and bytes in it after the
    newest of them. A record written with `run --record FILE` is kept in the state dir too;
    name records from elsewhere (another host's) with --record. --zero writes a zero mark for
    CACHE (stats-zero/ in the state dir); from then on stats CACHE counts only later runs
    and says "since TIME (zeroed)". Records are never deleted by --zero.

    Exit code: 0 done (also when there is nothing to list or delete); 2 bad input (nothing is
    changed).
    """
    from jaxcache.records import record_dir as store

    action = args.action or "list"
    pruning = args.older_than is not None or args.keep is not None or args.dry_run
    if action != "prune" and pruning:
        common.usage(args, "--older-than, --keep and --dry-run go with `records prune`")
    if action != "stats" and (args.cache is not None or args.record_files or args.zero):
        common.usage(args, "CACHE, --record and --zero go with `records stats`")
    if args.zero and args.cache is None:
        common.usage(args, "--zero needs the cache to count afresh: records stats CACHE --zero")
    if args.zero and args.record_files:
        common.usage(args, "--zero takes no --record: it marks a time, for every record")
    from jaxcache.project import effective

    keep = args.keep if args.keep is not None else effective.records_keep() \
        if action == "prune" else None  # the project file's [records] keep, only for prune
    if action == "prune" and args.older_than is None and keep is None:
        common.usage(args, "records prune needs --older-than DAYS and/or --keep N (or keep in "
                           "the project file's [records]: jaxcache config)")
    directory = args.records_dir if args.records_dir is not None else store.runs_dir()
    from jaxcache.report import records as formats

    fmt = formats.FORMATS[args.fmt]
    if action == "prune":
        from jaxcache.records.kept import prune

        text = fmt["prune"](prune.prune(directory, older_than_days=args.older_than,
                                            keep=keep, dry_run=args.dry_run))
    elif action == "stats":
        text = _stats(args, directory, fmt["stats"])
    else:
        text = fmt["list"](store.scan(directory))
    common.finish(args, text, 0)


def _stats(args: argparse.Namespace, directory: str, render: Callable[..., str]) -> str:
    """records stats [CACHE] [--record FILE...] [--zero]."""
    import time

    from jaxcache.records import record_dir as store
    from jaxcache.records.kept import totals as stats
    from jaxcache.records.used_dirs import canonical
    from jaxcache.report import records as formats

    cache = None if args.cache is None else canonical(args.cache)
    files = tuple(store.read_file(f) for f in args.record_files or ())  # bad: one line, exit 2
    since = None if cache is None else stats.zeroed_since(cache)
    if args.zero:
        assert cache is not None
        since = time.time_ns()
    result = stats.compute(store.scan(directory), files, cache=cache, since_ns=since)
    if args.zero:
        assert cache is not None
        stats.write_mark(cache, formats.stats_json(result))
    return render(result)
