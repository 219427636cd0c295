"""`jaxcache gc`: collect a cache directory by size and by age."""

from __future__ import annotations

import argparse
from typing import NoReturn

from jaxcache.cli import common
from jaxcache.cli.verify import GenerationKind


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
    common.option(p, "--order", choices=("lru", "value"), default="lru", show_default=True,
                  help="Which entries go first to meet --max-size: lru, the least recently "
                       "used; value, the least compile time saved per byte and per run (by "
                       "your run records; entries no record shows compiled go first).")
    common.option(p, "--dry-run", action="store_true",
                  help="Say what would go; delete nothing.")
    common.option(p, "--generations", action=GenerationKind, nargs=0, default=None,
                  help="PATH is a store of generations (a directory, gs:// or s3://: "
                       "`jaxcache seal --generation`): keep the generations its pointers name, "
                       "the newest --keep N and those younger than --max-age; delete the "
                       "others and every object no kept generation names "
                       "(docs/how-to/generations.md).")
    common.option(p, "--keep", type=common.Range(int, 0), metavar="N",
                  help="With --generations: keep the newest N generations.")
    common.option(p, "--lifecycle-rule", action="store_true",
                  help="For a gs:// or s3:// PATH with --max-age: print the bucket's own "
                       "lifecycle rule for that age instead of collecting (and what such a "
                       "rule cannot do).")
    common.format_flag(p)


def handle(args: argparse.Namespace, tail: None) -> None:
    """Delete the least recently used entries of a cache directory, and only what gc may judge.

      jaxcache gc --max-size 10G              down to 10 GiB, least recently used first
      jaxcache gc ~/.cache/jax --max-age 30d  every entry unused for 30 days
      jaxcache gc --max-size 5G --dry-run     what would go; nothing is deleted
      jaxcache gc gs://b/jax --max-age 30d    a sealed bucket prefix, conditional deletes
      jaxcache gc --max-size 10G --order value  keep what saves the most compile time
      jaxcache gc s3://b/jax --max-age 30d --lifecycle-rule   the bucket's own rule

    One unit goes at a time: an entry with its signatures, its .used marker and JAX's -atime
    file. Last use is the latest of the entry's mtime, its -atime file's and its marker's,
    and its hits in your run records (never the filesystem's atime). gc deletes only regular
    files of yours, through the directory's descriptor, each checked just before to still be
    the file judged; in a directory others can write, only entries your origin ledger says
    your jobs wrote. Symlinks, folders,
    FIFOs, other users' files and unknown names are reported and left alone. Then the origin
    ledger is compacted: lines of entries that are gone or changed are dropped. See
    docs/reference/gc.md.

    In a gs:// or s3:// prefix a unit is an entry with its signature objects; entries
    without a signature are left, and every delete names the generation judged, so an
    object re-published meanwhile stays.

    Exit code: 0; 1 when the directory stays over --max-size (what is left is not gc's to
    delete); 2 bad input.
    """
    import time
    from dataclasses import replace

    from jaxcache import text
    from jaxcache.gc import collect, compaction, plan
    from jaxcache.report import gc as formats
    from jaxcache.trust.rules.target import is_url

    if args.generations:
        _generations(args)
    if args.keep is not None:
        common.usage(args, "--keep goes with --generations")
    if args.max_size is None and args.max_age is None:
        common.usage(args, "give --max-size, --max-age or both: gc deletes nothing unasked")
    try:
        max_size = text.parse_size(args.max_size) if args.max_size is not None else None
        max_age = text.parse_age(args.max_age) if args.max_age is not None else None
    except ValueError as exc:
        common.usage(args, str(exc))
    path = common.cache_path(args, args.path)
    if args.lifecycle_rule:
        _lifecycle_rule(args, path, max_size, max_age)
    order = plan.Order(args.order)
    now = time.time_ns()
    from jaxcache.records import key_uses

    if is_url(path):
        from jaxcache.gc.bucket_collect import collect_bucket
        from jaxcache.seal.objects import store_for_url as objects
        from jaxcache.trust.rules.target import parse_bucket

        url = parse_bucket(path)
        result = collect_bucket(objects.open_store(url), max_size=max_size, max_age_s=max_age,
                                dry_run=args.dry_run, now_ns=now, order=order,
                                uses=key_uses.of_records(url.text))
    else:
        import os

        result = collect.collect(path, max_size=max_size, max_age_s=max_age,
                                 dry_run=args.dry_run, now_ns=now, order=order,
                                 uses=key_uses.of_records(os.path.abspath(path)))
    result = replace(result, ledger=compaction.compact(dry_run=args.dry_run))
    common.finish(args, formats.FORMATS[args.fmt](result, now, bool(args.verbose)),
                  1 if result.over_by else 0)


def _lifecycle_rule(args: argparse.Namespace, path: str, max_size: int | None,
                    max_age: float | None) -> NoReturn:
    from jaxcache.report import gc as formats
    from jaxcache.trust.rules.target import is_url, parse_bucket

    if not is_url(path):
        common.usage(args, "--lifecycle-rule is for a gs:// or s3:// bucket; a directory is "
                           "collected by gc itself")
    if max_age is None or max_size is not None:
        common.usage(args, "--lifecycle-rule takes --max-age alone: a bucket rule knows ages "
                           "in days, no size")
    url = parse_bucket(path)
    if not url.prefix:
        common.usage(args, "--lifecycle-rule needs the cache's prefix (gs://BUCKET/PREFIX): a "
                           "rule on the whole bucket would delete everything in it")
    common.finish(args, formats.lifecycle_text(url, max_age) if args.fmt == "text" else
                  formats.lifecycle_json(url, max_age), 0)


def _generations(args: argparse.Namespace) -> NoReturn:
    """`gc STORE --generations`: collect a store of generations."""
    from jaxcache import text
    from jaxcache.report import generation as formats
    from jaxcache.seal.sweep import seal_and_verify as actions

    if not args.path:
        common.usage(args, "give the store of generations (a directory, gs:// or s3://)")
    if args.max_size is not None or args.lifecycle_rule or args.order != "lru":
        common.usage(args, "--max-size, --order and --lifecycle-rule are for a cache; a store "
                           "of generations keeps --keep N and those younger than --max-age")
    if args.keep is None and args.max_age is None:
        common.usage(args, "give --keep, --max-age or both: gc deletes nothing unasked")
    try:
        max_age = text.parse_age(args.max_age) if args.max_age is not None else None
    except ValueError as exc:
        common.usage(args, str(exc))
    done = actions.collect_generations(args.path, keep=args.keep, max_age_s=max_age,
                                       dry_run=args.dry_run)
    common.finish(args, formats.collect_json(done) if args.fmt == "json" else
                  formats.collect_text(done), 0)
