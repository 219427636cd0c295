"""`jaxcache keygen`: an Ed25519 signing key for a sealed cache."""

from __future__ import annotations

import argparse
import sys

from jaxcache.cli import common


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("keyfile", metavar="KEYFILE", nargs="?",
                   help="Where to write the private key.")
    common.option(p, "--public-of", metavar="KEY",
                  help="Make no key: print the public key (ed25519:...) of KEY, a key in a "
                       "token (a pkcs11: URI, docs/how-to/hsm.md) or a private key file.")
    common.option(p, "--name", metavar="NAME",
                  help="A name for the key, carried by its public key text "
                       "(NAME:ed25519:...): e.g. ci-2026-12, a new one at each rotation.")
    common.format_flag(p)


def handle(args: argparse.Namespace, tail: None) -> None:
    """Create an Ed25519 signing key for a sealed cache, and print its public key.

      jaxcache keygen /etc/jaxcache/ci.key
      jaxcache keygen --name ci-2026-12 /etc/jaxcache/ci-2026-12.key

    The private key is written 0600 (never over an existing file, never inside a cache
    directory), the public key beside it as KEYFILE.pub. Missing folders above KEYFILE are
    created 0700, each one named. Readers trust the public key in their
    policy: trusted_keys = [{ holder = "ci-publisher", key = "ed25519:..." }] for the cache's
    path. See docs/how-to/sealed-cache.md. --quiet prints only the public key line.

      jaxcache keygen --public-of 'pkcs11:token=ci;object=jaxcache?module-path=...'

    prints the public key of a key kept in a token (an HSM, SoftHSM2: docs/how-to/hsm.md), or of a
    private key file, and makes nothing. With the URI's PIN (pin-source) the token's public
    key must verify a signature of its private key (refused otherwise: another pair's public
    object under the same name); without one it is printed with a warning that it was not
    checked.

    Exit code: 0 written (or printed); 2 usage or input error (KEYFILE exists: it is never
    replaced; a folder that cannot be made private; a key that cannot be read).
    """
    from jaxcache.seal.signing import key_pair_files
    from jaxcache.text import safe
    from jaxcache.trust.inputs import signing_keys as keys

    if args.public_of is not None:
        public_of(args)
    if not args.keyfile:
        common.usage(args, "give KEYFILE, where to write the new private key (or --public-of "
                           "KEY to print the public key of an existing one)")
    key = keys.generate(args.name)
    created: list[str] = []
    path = key_pair_files.save(key, args.keyfile, created)
    if args.fmt == "json":
        from jaxcache.report import keygen as keygen_json

        common.finish(args, keygen_json.render_json(path, key.public, created), 0)
    made = "".join(f"created folder {safe(d)} (mode 0700)\n" for d in created)
    common.finish(args, f"{made}wrote {safe(path)} (private, mode 0600) and {safe(path)}.pub\n"
                        f"public key: {key.public.named_text}\n"
                        f"key id:     {key.public.id}\n", 0,
                  common.lines_starting("public key:"))


def public_of(args: argparse.Namespace) -> None:
    """--public-of KEY: its public key line, as a reader pastes it into the policy."""
    from jaxcache.trust.inputs import pkcs11
    from jaxcache.trust.inputs import public_keys as trustkeys
    from jaxcache.trust.inputs import signing_keys as keys

    if args.keyfile or args.name:
        common.usage(args, "--public-of makes no key: give KEY alone, without KEYFILE or --name")
    if args.fmt != "text":
        common.usage(args, "--public-of prints text only (the one ed25519:... line)")
    if pkcs11.is_uri(args.public_of):
        found = pkcs11.public_of(args.public_of)
        if found.unchecked is not None:  # said even with --quiet: it is about trusting it
            sys.stderr.write(f"jaxcache: warning: {found.unchecked}\n")
        public = trustkeys.PublicKey(found.raw)
    else:
        public = keys.load_signing(args.public_of).public
    common.finish(args, f"{public.text}\n", 0)
