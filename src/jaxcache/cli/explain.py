"""`jaxcache explain`: why modules were or were not cached, and why a later process missed."""

from __future__ import annotations

import argparse

from jaxcache.cli import common
from jaxcache.errors import JaxcacheError


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("records", nargs="*", metavar="RECORD",
                   help="Run records (from jaxcache run --record), or directories of them.")
    common.format_flag(p)
    common.unverified_flag(p)


def handle(args: argparse.Namespace, tail: list[str] | None) -> None:
    """Why modules were or were not cached, and why a later process missed.

      jaxcache explain cold.json warm.json     run records from `jaxcache run --record`
      jaxcache explain runs/                   a directory: every record in it (one per rank)
      jaxcache explain -- python train.py      run the job twice (fresh private cache) and explain

    For each compiled module: input shapes, compile seconds, entry size, outcome and the rule
    that applied (thresholds with both numbers, not process 0, host callbacks, cache disabled
    or set too late, a corrupt entry blocking its key...). Across records it names the cache-key
    component that changed and its likely cause. It suggests benching a lower threshold only
    when what it leaves out is material (>= 2 s and >= 20% of start-up) or near the line of
    1 s and 10% (within a factor of 2, where a machine's load moves a job; near it, the exit
    code is 0 and the text says so).

    In a directory, a .json file that is not a readable run record (a symlink, malformed,
    newer schema) is skipped and named on stderr; a record named on the command line is not.

    Exit code: 0 everything that could be cached was; 1 something expensive was not cached;
    2 bad input (missing, malformed or newer-schema records; a directory with none readable);
    with -- CMD, 126 the program is not executable, 127 not found.
    """
    if tail is not None and args.records:
        common.usage(args, "give either record files or -- CMD, not both")
    if tail is not None and not tail:
        common.usage(args, "no command after --")
    if tail is None and not args.records:
        common.usage(args, "give run records (from jaxcache run --record) or -- CMD")
    from jaxcache.explain import reasons as explainmod

    if tail is not None:
        records = explainmod.run_twice(tail)
    else:
        from jaxcache.records import run_record as recordmod

        skipped: list[tuple[str, str]] = []
        records = recordmod.load_all(args.records, skipped)  # each read once
        if skipped:
            import os
            import sys

            from jaxcache.text import safe

            for path, why in skipped:  # named, so nothing is left out silently
                sys.stderr.write(f"jaxcache: skipped {safe(os.path.basename(path))}: {why}\n")
    for path, record in records:
        if record.unverified and not args.unverified_jax:
            from jaxcache.text import safe

            raise JaxcacheError(f"{safe(path)}: {safe(record.unverified)}. Pass "
                                "--unverified-jax to explain it anyway, marked unverified")
    result = explainmod.explain_records(records)
    from jaxcache.report import explain as formats

    common.finish(args, formats.FORMATS[args.fmt](result), result.exit_code)
