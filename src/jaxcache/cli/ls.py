"""`jaxcache ls`: the entries of a cache directory, or of a gs:// or s3:// prefix."""

from __future__ import annotations

import argparse

from jaxcache.cli import common
from jaxcache.trust.rules.target import is_url


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", nargs="?", metavar="PATH",
                   help="The cache directory, gs:// or s3://BUCKET/PREFIX (default: "
                        "$JAX_COMPILATION_CACHE_DIR, else the directory `jaxcache init` "
                        "makes).")
    common.option(p, "--policy", dest="policy_path", metavar="FILE",
                  help="Trust policy (TOML) whose trusted_ledgers say which entries writers it "
                       "trusts here wrote (ORIGIN vouched); default: your config dir's "
                       "jaxcache/policy.toml.")
    common.format_flag(p)


def _summary(text: str) -> str:
    """--quiet: the count line, which ends the listing."""
    lines = text.splitlines()
    return lines[-1] + "\n" if lines else ""


def handle(args: argparse.Namespace, tail: None) -> None:
    """Inventory of a cache directory: module, size, owner, mode, age, links and flags.

    Flags mark what JAX would not have made: entries owned by other users, group- or
    other-writable entries, hard links, symlinks, non-regular files, ACLs, unexpected names.
    ORIGIN tells who wrote each compiled entry, by your origin ledger: yours (a job jaxcache
    watched wrote exactly these bytes), vouched (a line of the origin ledger of a writer your
    policy trusts here, named in its trusted_ledgers, names these bytes: the count line says
    whose), unknown (no watched job wrote it: restored, copied, baked into an image, or
    written by JAX without jaxcache, or bytes other than what a watched job wrote for that
    key in another directory), changed (rewritten since a watched job wrote it here);
    FLAGS says other-build where the ledger says another build of jaxlib (or another CPU)
    wrote an entry of yours (an upgrade or rebuild in place: fingerprint.rule).
    KEY names the key each signature file claims (by your policy's name for it where it
    trusts it), or for a keyless one the CI identity its certificate names (`identity
    <workflow>`): a claim, which `jaxcache verify` checks. BUILD names the build each
    signature claims compiled its entry, judged for this host: this build, compatible (the
    writer's CPU features are all here), another build <digest> or another host (a sealed
    reader here misses it), build unknown (signed before build binding). Without PATH:
    $JAX_COMPILATION_CACHE_DIR, else the directory `jaxcache init` makes. Exit code 1 when
    any entry is flagged beyond an unexpected name (not foreign-owner where the policy
    trusts the owner to write there), changed since written or written by another build
    (for a bucket,
    when an entry has no signature object beside it).
    """
    path = common.cache_path(args, args.path)
    if is_url(path):
        _bucket(args, path)
    from jaxcache import fingerprint
    from jaxcache.seal.signing.build_claims import BuildView
    from jaxcache.seal.sweep import dir_sweep as scan
    from jaxcache.trust import listing

    signers: dict[str, str] = {}
    builds: dict[str, BuildView] = {}
    listed = listing.list_with_origin(
        path, also=lambda inv, fd, where, accounts: signers.update(
            scan.signed_by(inv, fd, where, accounts, builds, args.policy_path)),
        fingerprint=lambda: fingerprint.current(on_hashing=None if args.quiet else
                                                common.hashing_notice),
        policy=args.policy_path)
    from jaxcache.report import ls as formats

    shown = formats.FORMATS[args.fmt](listed.resolved, listed.inventory, origins=listed.origins,
                                      signers=signers, builds=builds)
    common.finish(args, shown, 1 if listing.needs_attention(listed) else 0, _summary)


def _bucket(args: argparse.Namespace, url: str) -> None:
    """`ls gs://bucket/prefix` (or s3://): its entries and whether a signature object sits
    beside each (`verify` checks them). Exit 1 when an entry has none."""
    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.seal.sweep import bucket_sweep as bucket_scan
    from jaxcache.trust.rules import target

    found = bucket_scan.listing(objects.open_store(target.parse_bucket(url)))
    from jaxcache.report import bucket_ls

    shown = bucket_ls.FORMATS[args.fmt](found)
    common.finish(args, shown, 1 if bucket_scan.unsigned(found) else 0, _summary)
