"""`jaxcache audit`: who can change what JAX loads from PATH."""

from __future__ import annotations

import argparse

from jaxcache.cli import common


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", nargs="?", metavar="PATH",
                   help="The cache directory (default: $JAX_COMPILATION_CACHE_DIR, else the "
                        "directory `jaxcache init` makes).")
    common.option(p, "--policy", dest="policy_path", metavar="FILE",
                  help="Trust policy (TOML); default: your config dir's jaxcache/policy.toml. "
                       "Never read from inside the audited tree.")
    common.format_flag(p, common.FORMATS)
    common.option(p, "--user", dest="as_user", metavar="NAME",
                  help="Judge for this user (who besides NAME and root can write). Default: "
                       "you.")
    common.option(p, "--no-processes", action="store_true",
                  help="Skip the scan for other processes using it (and for write handles "
                       "other users' processes hold on it).")
    common.option(p, "--must-exist", action="store_true",
                  help="Exit 1 when PATH does not exist (a typo in a CI gate), whatever the "
                       "verdict its nearest existing ancestor gets.")
    common.option(p, "--require-origin", action="store_true",
                  help="Judge entries no job jaxcache watched wrote (restored, copied, baked "
                       "into an image) as `run --require-origin` does, and as under CI it "
                       "always does: UNSAFE unless the policy names their source "
                       "(restored_from). Without it, outside CI: a warning.")
    common.sealed_reader_flags(p)


def handle(args: argparse.Namespace, tail: None) -> None:
    """Who can change what JAX loads from PATH, through which path, on which filesystem.

    PATH is read as JAX reads it: '~' is not expanded, a relative path is relative to the
    current directory, a path that does not exist yet is judged by its nearest existing
    ancestor, and URLs (gs://..., s3://...) are UNVERIFIABLE. Without PATH:
    $JAX_COMPILATION_CACHE_DIR, else the directory `jaxcache init` makes (as run uses).

    Verdicts:
      PRIVATE           only you and root can create, replace or rename entries or any parent
      SHARED-BY-POLICY  extra writers exist and your policy declares every one trusted
      SEALED            (with --sealed) others may write, but the reader loads only entries
                        signed by trusted keys whose holders are declared writers
      UNSAFE            undeclared writers; each shown with its chain of reasons
      UNVERIFIABLE      network filesystem, URL, unreadable parent... fails closed
    Each compiled entry's origin is told too (yours / unknown / changed, by your origin
    ledger): entries no job jaxcache watched wrote are a warning, and UNSAFE under CI or with
    --require-origin unless the policy's restored_from names their source (docs/how-to/ci.md); so
    are entries of yours that another build of jaxlib (or another CPU) wrote, by the
    fingerprint the ledger names for each (an upgrade or rebuild in place: `jaxcache
    fingerprint`). Each finding ends with its code: `jaxcache explain-finding CODE` says what
    it means, why it matters and what to do.
    Exit code 0 for PRIVATE / SHARED-BY-POLICY / SEALED, 1 for UNSAFE / UNVERIFIABLE (and, with
    --must-exist, for a path that does not exist), 2 for bad input. --verbose also lists
    trusted writers and notes; --quiet only the verdict line.
    """
    from jaxcache import api

    path = common.cache_path(args, args.path)
    report = api.audit(path, policy=args.policy_path, as_user=args.as_user,
                       scan_processes=not args.no_processes,
                       scan_handles=not args.no_processes, sealed=args.sealed,
                       sealed_keys=common.public_keys(args),
                       require_origin=args.require_origin,
                       on_hashing=None if args.quiet else common.hashing_notice)
    from jaxcache.report import audit as formats

    shown = formats.FORMATS[args.fmt](report, verbose=args.verbose)
    from jaxcache.trust.finding_codes import PATH_UNREADABLE

    missing = bool(report.missing) and not any(f.code == PATH_UNREADABLE
                                               for f in report.findings)
    if missing and args.must_exist:
        common.out(args, shown if not args.quiet or args.fmt != "text" else "")
        common.flush_output(args)
        common.fail(f"{report.resolved or report.requested} does not exist (--must-exist)", 1)
    common.finish(args, shown, 0 if report.verdict.ok else 1,
                  common.lines_starting("NOT FOUND", "verdict"))
