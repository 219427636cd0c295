"""`jaxcache verify`: every entry of a sealed cache checked as a sealed reader would."""

from __future__ import annotations

import argparse
from typing import NoReturn

from jaxcache.cli import common

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.seal.sweep.dir_sweep import ScanResult


class GenerationKind(argparse.Action):
    """--generation: the answer is a generation's document (jaxcache.generation/1), which is
    what -o FILE must then hold or replace."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, True if self.nargs == 0 else values)
        namespace.kind = "generation"


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
    common.option(p, "--generation", action=GenerationKind, nargs=0, default=None,
                  help="DIR is a store of generations (`seal --generation`): verify the "
                       "generation its pointer names, its manifest's signature once and every "
                       "entry by its digest, as its readers will; the store's other "
                       "generations and pointers are listed.")
    common.option(p, "--pointer", default="current", show_default=True,
                  help="With --generation: the pointer to follow.")
    common.option(p, "--name", dest="generation_name", metavar="GENERATION",
                  help="With --generation: verify this generation (its name, as listed) "
                       "instead of the one the pointer names.")


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

    With --generation, DIR is a store of generations (a directory, gs:// or s3://):

      jaxcache verify gs://team-jax/gens --generation --trusted-key ci.key.pub

    Exit code: 0 every entry is valid (with --quarantine: every one left); 1 any is not
    (--strict: or any would never be hit, or anything else was left beside them); 2 bad
    input.
    """
    from jaxcache.seal.sweep import seal_and_verify as actions

    if args.generation:
        _generation(args)
    if args.pointer != "current" or args.generation_name is not None:
        common.usage(args, "--pointer and --name go with --generation")
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


def _generation(args: argparse.Namespace) -> NoReturn:
    """`verify STORE --generation`: one generation verified as its readers will."""
    from jaxcache.report import generation as formats
    from jaxcache.seal.sweep import seal_and_verify as actions

    if not args.dir:
        common.usage(args, "give the store of generations (a directory, gs:// or s3://)")
    if args.generation_name is not None and args.pointer != "current":
        common.usage(args, "--name and --pointer are two ways to choose a generation: give one")
    if args.quarantine is not None or args.strict:
        common.usage(args, "--quarantine and --strict are for a sealed cache, not a "
                           "store of generations")
    found = actions.verify_generation(args.dir, tuple(args.trusted_keys or ()),
                                      common.policy(args), pointer=args.pointer,
                                      name=args.generation_name)
    common.finish(args, formats.verify_json(found) if args.fmt == "json" else
                  formats.verify_text(found), 0 if found.ok else 1)
