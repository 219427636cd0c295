"""`jaxcache ls`: the inventory alone, reached through the same fd walk as the audit."""

from __future__ import annotations

import os
from dataclasses import dataclass

from jaxcache.errors import JaxcacheError
from jaxcache.text import safe
from jaxcache.trust.kernel import entries
from jaxcache.trust.kernel.principals import Accounts
from jaxcache.trust.kernel.walk import walk_open
from jaxcache.trust.rules import target

TYPE_CHECKING = False  # for type checkers only
if TYPE_CHECKING:
    from collections.abc import Callable

    from jaxcache.fingerprint.model import Fingerprint
    from jaxcache.trust.provenance.origin import Origins

    Also = Callable[[entries.Inventory, int, str, Accounts], None]

ATTENTION = frozenset({"foreign-owner", "group-writable", "other-writable",
                       "group+other-writable", "acl", "hard-link", "symlink", "not-regular",
                       "unexpected-dir", "acl-unreadable"})


@dataclass(frozen=True, slots=True)
class Listing:
    """What ls shows: the inventory, the path it resolved to, each entry's origin (None when
    not judged), and the users the policy trusts to write there (a team share's other writers:
    their files are foreign-owned, as JAX made them, not a flag to act on)."""

    inventory: entries.Inventory
    resolved: str
    origins: Origins | None
    trusted_owners: frozenset[int] = frozenset()


def list_dir(given: str) -> tuple[entries.Inventory, str]:
    listed = list_with_origin(given, origin=False)
    return listed.inventory, listed.resolved


def list_with_origin(given: str, origin: bool = True, also: Also | None = None,
                     fingerprint: Callable[[], Fingerprint] | None = None,
                     policy: str | None = None) -> Listing:
    """The inventory, and (`origin`) each compiled entry's origin by your ledger
    (trust/provenance/origin.py) and the ledgers of writers the policy trusts there (its
    trusted_ledgers: `policy`, else your policy file, read by the loader the audit uses, and
    judged as the audit judges them: origin_findings.trusted_ledgers()), judged through the
    same directory descriptor, with the build that
    wrote each of yours judged for the caller's fingerprint (`fingerprint()`, asked for once
    the directory is known to be there: the first run after an install hashes, and a
    mistyped path must not wait for it nor be told of it); `also` is called with
    the inventory, that descriptor, the resolved path and the accounts while it is open (ls
    reads each signature file's claimed signer there: seal/sweep/dir_sweep.py's signed_by)."""
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
        trusted: frozenset[int] = frozenset()
        if origin and not inv.unreadable:
            from jaxcache.trust.inputs import ledger
            from jaxcache.trust.inputs import policy as policymod
            from jaxcache.trust.judgement import origin_findings
            from jaxcache.trust.provenance import origin as originmod

            rule = policymod.load(policy, accounts).declared(w.resolved)
            trusted = origin_findings.trusted_writers(rule, accounts)
            mine = ledger.load(accounts=accounts)
            origins = originmod.judge(inv, fd, mine, w.resolved,
                                      fingerprint() if fingerprint is not None else None,
                                      origin_findings.trusted_ledgers(mine, rule, accounts))
        if also is not None and not inv.unreadable:
            also(inv, fd, w.resolved, accounts)
    finally:
        os.close(fd)
    if inv.unreadable:
        raise JaxcacheError(f"{inv.unreadable}: {safe(w.resolved)}")
    return Listing(inv, w.resolved, origins, trusted)


def needs_attention(listed: Listing) -> bool:
    """A flag JAX would not have made (a file the policy trusts its owner to write there is
    not foreign), or an entry changed since a watched job wrote it, or written by another
    build on this host."""
    origins = listed.origins
    return any((set(e.flags) - ({"foreign-owner"} if e.uid in listed.trusted_owners else set()))
               & ATTENTION for e in listed.inventory.entries) or bool(
        origins and (origins.count("changed") or origins.other_build()))
