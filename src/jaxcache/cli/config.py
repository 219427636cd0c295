"""`jaxcache config`: the settings every command and enable() take from the project file, and
where each came from."""

from __future__ import annotations

import argparse
import os

from jaxcache.cli import common


def options(p: argparse.ArgumentParser) -> None:
    common.option(p, "--cache-dir", metavar="DIR",
                  help="Show the settings as a command given --cache-dir DIR would take them.")
    common.threshold_flags(p, "the settings shown (as run, bench and decide take it)")
    common.format_flag(p)


def handle(args: argparse.Namespace, tail: None) -> None:
    """Show the project's settings: each one's value and where it came from.

      jaxcache config
      jaxcache config --format json

    A project file holds a project's defaults for every command and for jaxcache.enable():
    `.jaxcache.toml`, or the `[tool.jaxcache]` table of pyproject.toml. The nearest folder
    holding either, from the working directory up, ends the search (there .jaxcache.toml wins;
    a pyproject.toml without the table means no settings). For example, in pyproject.toml:

      [tool.jaxcache]
      cache_dir = "build/jax-cache"   # relative: to the file's folder
      min_compile_time = 0.5          # seconds (JAX's default: 1.0)
      min_entry_size = 0              # bytes

      [tool.jaxcache.records]
      dir = "build/jax-runs"          # where `jaxcache run` writes its records
      keep = 100                      # `jaxcache records prune`'s --keep

      [tool.jaxcache.bench]
      trials = 8                      # -t of bench, decide -- CMD and demo
      warm = 2                        # -k

    (in .jaxcache.toml the same keys, without `tool.jaxcache`: [records], [bench]). A flag
    wins over JAX's variable (JAX_COMPILATION_CACHE_DIR, JAX_PERSISTENT_CACHE_MIN_*), which
    wins over the file, which wins over the default. A cache directory named there is
    audited like any other. Trust settings (trusted_users, trusted_groups, trusted_keys,
    restored_from, ... : anything the policy holds) are refused there, as are unknown keys,
    wrong types, a symlink and a file another user owns or anyone can change: one line, exit
    2, for every command. They belong in the protected policy (docs/reference/policy-file.md).

    Exit code: 0 shown; 2 a project file jaxcache refuses, or bad input.
    """
    from jaxcache.bench.trials import BenchConfig
    from jaxcache.project import chosen, effective
    from jaxcache.report import config as report

    start, found, _ = effective.looked()
    settings = chosen.settings(os.environ, cache_flag=args.cache_dir,
                               compile_flag=args.min_compile_time,
                               size_flag=args.min_entry_size,
                               bench_defaults=(BenchConfig.trials, BenchConfig.warm))
    render = report.render_json if args.fmt == "json" else report.render_text
    common.finish(args, render(start, found, settings), 0)
