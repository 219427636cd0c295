"""Which keys a sealed bucket reader fetches ahead (prefetch.py): only names shaped as JAX cache
keys, once each, at most MAX_KEYS. Apart from the fetch itself so that `jaxcache run`, which
plans before the job starts, imports none of the signing code the fetch needs."""

from __future__ import annotations

import re
from collections.abc import Iterable

MAX_KEYS = 512  # keys planned from one record: more are left to JAX's own order
# a JAX cache key: `<module>-<64 hex>`, the module a name JAX makes from the function's
_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,200}-[0-9a-f]{64}$")


def plan_keys(keys: Iterable[object], limit: int = MAX_KEYS) -> tuple[str, ...]:
    """The keys to fetch, in order, once each: only what is shaped as a JAX cache key (a
    record's hostile names are dropped, never turned into object names), at most `limit`."""
    out: dict[str, None] = {}
    for key in keys:
        if len(out) >= limit:
            break
        if isinstance(key, str) and _KEY.fullmatch(key):
            out.setdefault(key, None)
    return tuple(out)
