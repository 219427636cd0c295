"""`jaxcache init`: make a private cache directory, or accept one that already is."""

from __future__ import annotations

import argparse

from jaxcache.cli import common


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", nargs="?", metavar="PATH")
    common.option(p, "--name", metavar="NAME",
                  help="Sub-directory under your cache dir, when PATH is not given (default: "
                       "$JAX_COMPILATION_CACHE_DIR if set, as for run, else 'jax').")
    common.option(p, "--policy", dest="policy_path", metavar="FILE",
                  help="Trust policy (TOML); default: your config dir's jaxcache/policy.toml.")
    common.format_flag(p)


def handle(args: argparse.Namespace, tail: None) -> None:
    """Create a private cache directory (mode 0700), or accept one that already is private.

    Without PATH it uses $JAX_COMPILATION_CACHE_DIR (the directory `jaxcache run` and JAX would
    use), else ~/.cache/jaxcache/NAME (your platform's cache dir; NAME: jax). Every missing
    component is created 0700 without races; every parent is audited. An existing directory is
    never modified: if it is not private you get the findings, and nothing changes.
    --verbose adds the audit of the directory it accepted.

    Exit code: 0 made, or accepted as private; 1 refused (the findings say why; nothing was
    changed); 2 usage or input error (a bad policy file, a path that cannot be made).
    """
    from jaxcache.report import audit as audit_report
    from jaxcache.report import init as formats
    from jaxcache.trust import create
    from jaxcache.trust.inputs import policy
    from jaxcache.trust.kernel.principals import Accounts

    default = create.default_cache_dir()  # what a plain `jaxcache run` would use
    target = args.path if args.path is not None else (
        create.default_dir(args.name) if args.name is not None else default)
    result = create.init(target, policy=policy.load(args.policy_path, Accounts()))
    code = 0 if result.ok else 1
    if args.fmt == "json":
        common.finish(args, formats.render_json(result), code)
    if result.ok:
        shown = formats.render_text(result, default_dir=default)
        if args.verbose:
            shown += "\n" + audit_report.render_text(result.report, verbose=True)
    else:
        shown = formats.render_refused(result, default_dir=default, detail=not args.quiet)
    common.finish(args, shown, code)
