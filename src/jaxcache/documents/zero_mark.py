"""The zero mark of `records stats CACHE --zero`: counting for one cache starts afresh.

A `records stats` document (jaxcache.records-stats/1) as it stood when zeroed, kept in the
state dir (stats-zero/<digest of the cache's name>.json, claimed as every output is:
documents/claim.py); no record is deleted. `records stats CACHE` then counts only the records
made after `since_ns`. This module reads it back (the edge where its keys are read).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from jaxcache.documents.fields import integer, text
from jaxcache.documents.kinds import prefix

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


@dataclass(frozen=True, slots=True)
class ZeroMark:
    schema: str | None
    cache: str | None  # the cache directory, as the mark names it
    since_ns: int | None  # when it was zeroed (ns since the epoch, UTC)

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> ZeroMark:
        return cls(text(doc.get("schema")), text(doc.get("cache")),
                   integer(doc.get("since_ns")))

    def of(self, cache: str) -> bool:
        """Whether this is jaxcache's zero mark of `cache`."""
        return (self.schema or "").startswith(prefix("records-stats")) and \
            self.cache == cache and self.since_ns is not None


def path_for(state_dir: str, cache: str) -> str:
    """Where the mark of `cache` (an absolute path, or a URL) is kept."""
    digest = hashlib.sha256(cache.encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return os.path.join(state_dir, "stats-zero", f"{digest}.json")
