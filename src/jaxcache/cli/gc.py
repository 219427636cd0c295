"""`jaxcache gc`: collect a cache directory by size and by age."""

from __future__ import annotations

import argparse

from jaxcache.cli import common


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", nargs="?", metavar="PATH",
                   help="The cache directory (default: $JAX_COMPILATION_CACHE_DIR, else the "
                        "directory `jaxcache init` makes).")
    common.option(p, "--max-size", metavar="SIZE",
                  help="Delete least recently used entries until the directory holds at most "
                       "SIZE (10G, 500M, 2GiB or bytes).")
    common.option(p, "--max-age", metavar="AGE",
                  help="Delete every entry not used for longer than AGE (30d, 12h, 90m, 2w "
                       "or seconds).")
    common.option(p, "--dry-run", action="store_true",
                  help="Say what would go; delete nothing.")
    common.format_flag(p)


def handle(args: argparse.Namespace, tail: None) -> None:
    """Delete the least recently used entries of a cache directory, and only what gc may judge.

      jaxcache gc --max-size 10G              down to 10 GiB, least recently used first
      jaxcache gc ~/.cache/jax --max-age 30d  every entry unused for 30 days
      jaxcache gc --max-size 5G --dry-run     what would go; nothing is deleted

    One unit goes at a time: an entry with its signatures, its .used marker and JAX's -atime
    file. Last use is the latest mtime of the entry, its -atime file and its marker (never
    the filesystem's atime). gc deletes only regular files of yours, through the directory's
    descriptor, each checked just before to still be the file judged; in a directory others
    can write, only entries your origin ledger says your jobs wrote. Symlinks, folders,
    FIFOs, other users' files and unknown names are reported and left alone. Then the origin
    ledger is compacted: lines of entries that are gone or changed are dropped. See
    docs/gc.md.

    Exit code: 0; 1 when the directory stays over --max-size (what is left is not gc's to
    delete); 2 bad input.
    """
    import time

    from jaxcache.gc import collect, plan
    from jaxcache.report import gc as formats

    if args.max_size is None and args.max_age is None:
        common.usage(args, "give --max-size, --max-age or both: gc deletes nothing unasked")
    try:
        max_size = plan.parse_size(args.max_size) if args.max_size is not None else None
        max_age = plan.parse_age(args.max_age) if args.max_age is not None else None
    except ValueError as exc:
        common.usage(args, str(exc))
    from jaxcache.trust.target import is_url

    path = common.cache_path(args, args.path)
    if is_url(path):
        common.usage(args, "gc collects a local directory; a gs:// or s3:// bucket is not "
                           "collected yet: give it a lifecycle rule (docs/gc.md)")
    from dataclasses import replace

    from jaxcache.gc import compaction

    now = time.time_ns()
    result = collect.collect(path, max_size=max_size,
                             max_age_s=max_age, dry_run=args.dry_run, now_ns=now)
    result = replace(result, ledger=compaction.compact(dry_run=args.dry_run))
    common.finish(args, formats.FORMATS[args.fmt](result, now, bool(args.verbose)),
                  1 if result.over_by else 0)
