"""`jaxcache verify`: every entry of a sealed cache checked as a sealed reader would."""

from __future__ import annotations

import argparse
from typing import NoReturn

from jaxcache.cli import common

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.seal.sweep.dir_sweep import ScanResult


def scan_flags(p: argparse.ArgumentParser, dir_help: str) -> None:
    """What seal and verify share: DIR, the keys to trust, the format."""
    p.add_argument("dir", nargs="?", metavar="DIR", help=dir_help)
    common.option(p, "--trusted-key", dest="trusted_keys", action="append", metavar="KEY",
                  help="A trusted public key (ed25519:... or a .pub file; repeatable).")
    common.option(p, "--policy", dest="policy_path", metavar="FILE",
                  help="Trust policy (TOML) whose trusted_keys for DIR count too.")
    common.format_flag(p)


def scan_output(args: argparse.Namespace, result: ScanResult, action: str,
                ok: bool | None = None) -> NoReturn:
    from jaxcache.report import seal as formats

    shown = (formats.render_json(result, action) if args.fmt == "json" else
             formats.render_text(result, action, verbose=args.verbose))
    # --quiet: both say their answer first; exit 1 also for entries seal would not sign
    # because a sealed reader never hits them (unless --allow-unhittable)
    common.finish(args, shown, 0 if (result.ok if ok is None else ok) else 1)


def options(p: argparse.ArgumentParser) -> None:
    scan_flags(p, "The sealed cache: a directory, gs:// or s3://BUCKET/PREFIX (default: "
                  "$JAX_COMPILATION_CACHE_DIR, else the directory `jaxcache init` makes).")
    common.option(p, "--strict", action="store_true",
                  help="The gate after a CI restore (docs/how-to/ci.md): exit 1 also for entries a "
                       "sealed reader would never hit and for leftovers (orphan signatures, "
                       "interrupted writes), so the step passes only when everything that "
                       "came in with the cache was signed by a trusted key.")
    common.option(p, "--quarantine", metavar="QDIR",
                  help="Move every entry a sealed reader rejects (with its sidecars) into QDIR, "
                       "made private on the cache's filesystem, instead of leaving it at its "
                       "key, where it blocks the next publish (first writer wins); nothing is "
                       "deleted. The answer is then about what is left, and its first line "
                       "says what was moved and where (each moved entry listed under it).")


def handle(args: argparse.Namespace, tail: None) -> None:
    """Check every entry of a sealed cache: valid, unsigned, bad signature, unknown key.

      jaxcache verify /shared/jax-cache
      jaxcache verify /shared/jax-cache --trusted-key ci.key.pub --format json

    Entries are read exactly as a sealed reader reads them (directory fd, no symlinks, one
    read), so "valid" means a sealed reader trusting these keys loads it. Trusted keys: every
    --trusted-key, plus the policy's trusted_keys for DIR. Nothing is changed. Without DIR:
    $JAX_COMPILATION_CACHE_DIR, else the directory `jaxcache init` makes. Entries a sealed
    reader would never hit (made with XLA's sub-caches on: another cache key) are named with
    why; they do not change the exit code.

    A rejected entry stays at its key otherwise (a reader only misses it) and blocks the next
    publish of that key: --quarantine QDIR moves such entries aside, never deleting them.

    Exit code: 0 every entry is valid (with --quarantine: every one left); 1 any is not
    (--strict: or any would never be hit, or anything else was left beside them); 2 bad
    input.
    """
    from jaxcache.seal.sweep import seal_and_verify as actions

    path = common.cache_path(args, args.dir)
    keys = tuple(args.trusted_keys or ())
    policy = common.policy(args)  # once: verify and the check after a quarantine share it
    if args.quarantine is not None:
        from jaxcache.trust.rules.target import is_url

        if is_url(path):
            common.usage(args, "--quarantine moves entries of a directory, not of a bucket")
        # what was moved is part of the answer, about what is left (report/seal.py)
        result = actions.verify_quarantined(path, args.quarantine, keys, policy)
    else:
        result = actions.verify_dir(path, keys, policy)
    scan_output(args, result, "verify", result.strict_ok if args.strict else None)
