"""`jaxcache keygen`: an Ed25519 signing key for a sealed cache."""

from __future__ import annotations

import argparse

from jaxcache.cli import common


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("keyfile", metavar="KEYFILE", help="Where to write the private key.")
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
    path. See docs/sealed-cache.md. --quiet prints only the public key line.
    """
    from jaxcache.display import safe
    from jaxcache.seal import keys

    key = keys.generate(args.name)
    created: list[str] = []
    path = keys.save(key, args.keyfile, created)
    if args.fmt == "json":
        from jaxcache.report import keygen_json

        common.finish(args, keygen_json.render(path, key.public, created), 0)
    made = "".join(f"created folder {safe(d)} (mode 0700)\n" for d in created)
    common.finish(args, f"{made}wrote {safe(path)} (private, mode 0600) and {safe(path)}.pub\n"
                        f"public key: {key.public.named_text}\n"
                        f"key id:     {key.public.id}\n", 0,
                  common.lines_starting("public key:"))
