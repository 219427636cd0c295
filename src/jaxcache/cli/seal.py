"""`jaxcache seal`: sign the unsigned entries of a cache directory you trust."""

from __future__ import annotations

import argparse
import sys

from jaxcache.cli import common
from jaxcache.cli.verify import GenerationKind, scan_flags, scan_output
from jaxcache.trust.rules.target import is_url


class _DeprecatedKey(argparse.Action):
    """`--key`, the old name of --signing-key: still accepted, hidden from the help."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        sys.stderr.write("jaxcache: seal --key is deprecated: use --signing-key (the name "
                         "run --sealed uses)\n")
        namespace.signing_key = values


def options(p: argparse.ArgumentParser) -> None:
    scan_flags(p, "The directory (or gs:// or s3://BUCKET/PREFIX) whose entries to sign.")
    common.option(p, "--generation", metavar="STORE", action=GenerationKind,
                  help="Publish DIR's entries as a new generation in STORE (a directory, "
                       "gs:// or s3://BUCKET/PREFIX) instead of signing them in place: the "
                       "entries stored by digest (only those STORE lacks are uploaded), one "
                       "signed manifest naming them all, then the pointer moved to it "
                       "(docs/how-to/generations.md).")
    common.option(p, "--pointer", default="current", show_default=True,
                  help="With --generation: the pointer to move to the new generation (a "
                       "name such as a branch's).")
    common.option(p, "--signing-key", metavar="KEYFILE",
                  help="The signing key (from `jaxcache keygen`, or a pkcs11: URI naming a "
                       "key in an HSM: docs/how-to/hsm.md).")
    p.add_argument("--key", dest="signing_key", action=_DeprecatedKey, metavar="KEYFILE",
                   help=argparse.SUPPRESS)
    common.identity_options(p, "Instead of --signing-key: sign")
    common.option(p, "--trust-bucket-writers", action="store_true",
                  help="For gs:// and s3://: you checked by hand that only your publisher can "
                       "write there (jaxcache cannot read a bucket's IAM or policy); sealing "
                       "vouches for every entry.")
    common.option(p, "--allow-unhittable", action="store_true",
                  help="Sign entries a sealed reader would never hit (made with XLA's "
                       "sub-caches on) instead of leaving them unsigned and exiting 1; each is "
                       "still reported.")
    common.option(p, "--add-signature", action="store_true",
                  help="Co-sign: add this key's signature (<entry>.<key id>.sig, created only "
                       "if absent) beside every entry the other trusted keys already vouch for "
                       "as the policy needs (a key rotation without a cold cache; the "
                       "co-signature names them, and is revoked with any of them), or with "
                       "--from, that your own build reproduces. Other entries are reported "
                       "and left. The key must itself be trusted (policy or --trusted-key).")
    common.option(p, "--from", dest="own_dir", metavar="DIR",
                  help="With --add-signature: co-sign only entries whose bytes are those in "
                       "DIR, your own build of the same jobs (a private cache): an "
                       "independent second signature for signatures_needed > 1. Without it, "
                       "co-signing vouches on the other keys' word (a key rotation).")
    common.option(p, "--succeeds", metavar="KEY",
                  help="With --add-signature, in a rotation under signatures_needed > 1: the "
                       "old key (id, ed25519:... or .pub) this one takes over from; its "
                       "co-signatures then rely on that key alone and keep counting beside "
                       "the other keys once it is retired.")
    common.option(p, "--require-origin", action="store_true",
                  help="Refuse to sign entries no job jaxcache watched wrote (restored, "
                       "copied, from a base image), as under CI it always does, unless the "
                       "policy names their source (restored_from). Without it, outside CI, "
                       "each one is named on stderr as it is vouched for.")


def handle(args: argparse.Namespace, tail: None) -> None:
    """Sign the unsigned entries of a cache directory you trust (e.g. one CI just filled).

      jaxcache seal ci-cache/ --signing-key /etc/jaxcache/ci.key
      jaxcache seal ci-cache/ --identity ci        (keyless, in CI: docs/how-to/ci.md)

    Refused unless DIR's audit is PRIVATE or SHARED-BY-POLICY: sealing vouches for whatever
    any writer put there, and, under CI or with --require-origin, for entries of unknown
    origin (docs/how-to/ci.md) unless they are signed already. Entries whose signature does not
    verify are reported, never replaced (that would delete a file). Entries a sealed reader
    would never hit (made with XLA's sub-caches on, which sealed readers turn off: another
    cache key) are left unsigned and reported, each with why, unless --allow-unhittable. Per
    entry: what was signed now, what a sealed reader never hits, and problems (-v: the
    already signed ones too).

    With --generation STORE, publish DIR's entries as a new signed generation in STORE
    (a directory, gs:// or s3://) and move its pointer (--pointer, default current) to it;
    readers see the old generation or the new one, never a part (docs/how-to/generations.md):

      jaxcache seal ci-cache/ --signing-key ci.key --generation gs://team-jax/gens

    With --add-signature, co-sign instead (key rotation, thresholds: docs/how-to/sealed-cache.md):

      jaxcache seal /shared/jax-cache --signing-key ci-2027-01.key --add-signature

    Exit code: 0 every entry is now valid (with --add-signature: carries this key's
    signature); 1 some are not, or some would never be hit (without --allow-unhittable);
    2 bad input.
    """
    from jaxcache.seal.sweep import seal_and_verify as actions

    if not args.dir:
        common.usage(args, "give the directory to seal")
    if not args.signing_key and not args.identity:
        common.usage(args, "the following arguments are required: --signing-key (or "
                           "--identity ci, keyless)")
    if args.signing_key and args.identity:
        common.usage(args, "--signing-key and --identity are two ways to sign: give one")
    if args.sigstore_config and not args.identity:
        common.usage(args, "--sigstore-config goes with --identity")
    signing = actions.SigningChoice(args.signing_key, args.identity, args.sigstore_config)
    keys = tuple(args.trusted_keys or ())
    policy = common.policy(args)  # once, for every part of the command

    def warn(text: str) -> None:
        sys.stderr.write(f"jaxcache: warning: {text}\n")

    if args.generation is not None:
        if args.add_signature or args.own_dir or args.succeeds or args.trust_bucket_writers:
            common.usage(args, "--generation publishes a new generation: --add-signature, "
                               "--from, --succeeds and --trust-bucket-writers do not apply")
        if is_url(args.dir):
            common.usage(args, "--generation publishes from a directory of yours, not a bucket")
        done = actions.publish_generation(
            args.dir, args.generation, signing, keys, policy, pointer=args.pointer,
            allow_unhittable=args.allow_unhittable, require_origin=args.require_origin,
            warn=warn)
        from jaxcache.report import generation as formats

        common.finish(args, formats.publish_json(done) if args.fmt == "json" else
                      formats.publish_text(done), 0 if done.ok else 1)
    if args.pointer != "current":
        common.usage(args, "--pointer goes with --generation")
    if args.add_signature:
        if args.allow_unhittable or args.trust_bucket_writers or args.require_origin:
            common.usage(args, "--add-signature co-signs only what trusted keys signed: "
                               "--allow-unhittable, --trust-bucket-writers and --require-origin "
                               "do not apply")
        if args.own_dir and args.succeeds:
            common.usage(args, "--from and --succeeds are two reasons to co-sign: give one")
        from jaxcache.records.used_dirs import jobs_of

        scan_output(args, actions.cosign(args.dir, signing, keys, policy,
                                         args.own_dir, args.succeeds, jobs_of), "cosign")
    if args.own_dir or args.succeeds:
        common.usage(args, "--from and --succeeds go with --add-signature")
    if is_url(args.dir):
        scan_output(args, actions.seal_bucket(args.dir, signing, keys,
                                              args.trust_bucket_writers, policy,
                                              args.allow_unhittable, warn), "seal")
    if args.trust_bucket_writers:
        common.usage(args, "--trust-bucket-writers is for bucket prefixes (gs://, s3://) only")
    scan_output(args, actions.seal_dir(args.dir, signing, keys, policy,
                                       args.allow_unhittable, require_origin=args.require_origin,
                                       warn=warn), "seal")
