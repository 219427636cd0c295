"""`jaxcache ls`: the inventory alone, reached through the same fd walk as the audit."""

from __future__ import annotations

import os

from jaxcache.display import safe
from jaxcache.errors import JaxcacheError
from jaxcache.trust import entries, target
from jaxcache.trust.principals import Accounts
from jaxcache.trust.walk import walk_open

ATTENTION = frozenset({"foreign-owner", "group-writable", "other-writable",
                       "group+other-writable", "acl", "hard-link", "symlink", "not-regular",
                       "unexpected-dir", "acl-unreadable"})


def list_dir(given: str) -> tuple[entries.Inventory, str]:
    tgt = target.resolve(given)
    if tgt.path is None:
        raise JaxcacheError(f"ls lists local directories; {safe(given)} is a URL")
    w, fd = walk_open(tgt.path)
    try:
        if w.blocked:
            raise JaxcacheError(w.blocked)
        if w.missing:
            raise JaxcacheError(f"no such directory: {safe(w.resolved)}")
        inv = entries.inventory_at(fd, w.resolved, frozenset({0, os.geteuid()}), Accounts())
    finally:
        os.close(fd)
    if inv.unreadable:
        raise JaxcacheError(f"{inv.unreadable}: {safe(w.resolved)}")
    return inv, w.resolved


def needs_attention(inv: entries.Inventory) -> bool:
    return any(set(e.flags) & ATTENTION for e in inv.entries)
