"""`jaxcache ls`: the inventory alone, reached through the same fd walk as the audit."""

from __future__ import annotations

import os

from jaxcache.errors import JaxcacheError
from jaxcache.text import safe
from jaxcache.trust import entries, target
from jaxcache.trust.principals import Accounts
from jaxcache.trust.walk import walk_open

if False:  # for type checkers only
    from jaxcache.trust.origin import Origins

ATTENTION = frozenset({"foreign-owner", "group-writable", "other-writable",
                       "group+other-writable", "acl", "hard-link", "symlink", "not-regular",
                       "unexpected-dir", "acl-unreadable"})


def list_dir(given: str) -> tuple[entries.Inventory, str]:
    inv, resolved, _ = list_with_origin(given, origin=False)
    return inv, resolved


def list_with_origin(given: str, origin: bool = True, signers: dict[str, str] | None = None
                     ) -> tuple[entries.Inventory, str, Origins | None]:
    """The inventory, and (`origin`) each compiled entry's origin by your ledger
    (trust/origin.py), judged through the same directory descriptor."""
    tgt = target.resolve(given)
    if tgt.path is None:
        raise JaxcacheError(f"ls lists local directories; {safe(given)} is a URL")
    w, fd = walk_open(tgt.path)
    try:
        if w.blocked:
            raise JaxcacheError(w.blocked)
        if w.missing:
            raise JaxcacheError(f"no such directory: {safe(w.resolved)}")
        accounts = Accounts()
        inv = entries.inventory_at(fd, w.resolved, frozenset({0, os.geteuid()}), accounts)
        origins = None
        if origin and not inv.unreadable:
            from jaxcache.trust import ledger
            from jaxcache.trust import origin as originmod

            origins = originmod.judge(inv, fd, ledger.load(accounts=accounts))
        if signers is not None and not inv.unreadable:
            signers.update(signed_by(inv, fd, w.resolved, accounts))
    finally:
        os.close(fd)
    if inv.unreadable:
        raise JaxcacheError(f"{inv.unreadable}: {safe(w.resolved)}")
    return inv, w.resolved, origins


def signed_by(inv: entries.Inventory, fd: int, resolved: str, accounts: Accounts
              ) -> dict[str, str]:
    """Each signature file's claimed signer (read bounded, never following a link), by the
    name your policy gives that key where it trusts it: a claim, which `verify` checks."""
    from jaxcache.errors import JaxcacheError as _Error
    from jaxcache.seal import signature
    from jaxcache.seal.store import _read, _Rejected
    from jaxcache.trust import policy as policymod

    try:
        known = {k.raw: k for k in policymod.load(None, accounts).rule_for(resolved).trusted_keys}
    except _Error:
        known = {}  # names are labels: a policy that does not load only leaves them out
    out = {}
    for e in inv.entries:
        if e.kind != "signature" or e.type != "file":
            continue
        try:
            data = _read(fd, e.name, limit=signature.MAX_BYTES + 1)
        except _Rejected:
            continue
        public = signature.claimed_signer(data) if data is not None else None
        if public is not None:
            out[e.name] = (known.get(public.raw) or public).label
    return out


def needs_attention(inv: entries.Inventory, origins: Origins | None = None) -> bool:
    """A flag JAX would not have made, or an entry changed since a watched job wrote it."""
    return any(set(e.flags) & ATTENTION for e in inv.entries) or bool(
        origins and origins.count("changed"))
