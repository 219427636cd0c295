"""`bench --sealed --bucket gs://B/P` (or s3://B/P): each run set gets a fresh prefix of its own.

A bench must start every trial from an empty cache and must not touch anything else in a
shared bucket: all its objects go under `P/jaxcache-bench-<random>/<trial>`, a prefix checked
empty before use. jaxcache deletes nothing in a bucket; the command's report names the prefix.
"""

from __future__ import annotations

import secrets

from jaxcache.errors import JaxcacheError
from jaxcache.text import safe


class Fresh:
    """Hands out new, verified-empty prefixes under one random bench prefix."""

    def __init__(self, url: str) -> None:
        from jaxcache.seal.objects import store_for_url as objects
        from jaxcache.trust.rules import target

        self._objects, self._target = objects, target
        self.base = f"{target.parse_bucket(url).text}/jaxcache-bench-{secrets.token_hex(6)}"

    def take(self, name: str) -> str:
        """`base/name`, after checking that the bucket holds nothing under it."""
        url = f"{self.base}/{name}"
        store = self._objects.open_store(self._target.parse_bucket(url))
        try:
            found = next(iter(store.list()), None)
        except self._objects.StoreError as exc:
            raise JaxcacheError(f"cannot list {safe(url)} ({exc.kind}): {exc.message}") from None
        if found is not None:
            raise JaxcacheError(f"{safe(url)} is not empty ({safe(found.name)}): a bench needs "
                                "a fresh prefix and never writes into one in use")
        return url
