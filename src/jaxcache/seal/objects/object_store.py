"""The object-store interface a sealed cache in a bucket needs: get, put-if-absent,
replace-if (a compare and swap, for orphaned signatures), delete-if (gc), list, stat.

Kept this small so that another object store is one more module (gcs_store.py, s3_store.py).
Failures the store cannot judge (network, permission, a server error) are `StoreError`s with a
kind the record names; a missing object is `None`, not an error.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

NOT_FOUND, PERMISSION, NETWORK, ERROR = "not-found", "permission-denied", "network", "error"
OBJECT_NAME_MAX = 1024  # GCS and S3 object names: a signature is always <entry>.sig there


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """One object, as a listing or a stat shows it (the name is relative to the prefix)."""

    name: str
    size: int
    generation: str  # the store's version of the object (GCS: its generation number; S3: ETag)
    updated: float | None  # seconds since the epoch, when the store says
    # the store's clock when it answered (its Date header), None when it did not say: ages are
    # judged on the clock that stamped `updated`, never this process's (a publisher or gc a
    # day ahead would take a rival's publish in progress for a dead one)
    answered: float | None = None

    def age_s(self) -> float | None:
        """Seconds since the object was written, by the store's clock where it said it (else
        this process's); None when the store gave no time for the object."""
        if self.updated is None:
            return None
        now = self.answered if self.answered is not None else time.time()
        return max(0.0, now - self.updated)


class StoreError(Exception):
    """The store could not answer: the caller treats it as a miss and says why."""

    def __init__(self, kind: str, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.kind, self.message = kind, message
        self.transient = transient  # asking again may succeed (network, 5xx, throttled)


class ObjectStore(Protocol):
    url: str  # scheme://bucket/prefix, as the user gave it (normalized)
    # the longest name it holds, which names a signature beside its entry (tier_names.py):
    # a bucket's OBJECT_NAME_MAX, a directory's filesystem's NAME_MAX
    name_max: int

    def prepare(self) -> None:
        """Make the client now (its imports, its configuration), no request: a caller about
        to call from other threads while the process imports (prefetch) does it first."""

    def get(self, name: str, limit: int | None = None) -> bytes | None:
        """The object's bytes (at most `limit`), one download, the socket read no further
        whatever the server sends (answer_bounds.py); None if it does not exist. With no
        `limit` a bucket store reads what an answer may hold (ANSWER_MAX); Resilient asks for
        the whole object by its size."""

    def put_if_absent(self, name: str, data: bytes) -> bool:
        """Create the object only if no object has that name (first writer wins); False if
        one exists. Must be atomic on the server (GCS: ifGenerationMatch=0; S3:
        If-None-Match: *)."""

    def replace_if(self, name: str, data: bytes, generation: str) -> bool:
        """Replace the object only if it is still at `generation` (a compare and swap, atomic
        on the server: GCS ifGenerationMatch, S3 If-Match); False if it changed or is gone."""

    def delete_if(self, name: str, generation: str) -> bool:
        """Delete the object only if it is still at `generation` (atomic on the server: GCS
        ifGenerationMatch, S3 If-Match on DELETE), so one re-published meanwhile stays;
        False if it changed or is gone."""

    def stat(self, name: str) -> ObjectInfo | None:
        """The object's size and generation; None if it does not exist."""

    def list(self, folder: str = "") -> Iterator[ObjectInfo]:
        """Every object directly under the prefix, or under its `folder` (`objects/`: the
        names keep it, `objects/<digest>`); nothing deeper."""
