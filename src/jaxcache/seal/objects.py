"""The object-store interface a sealed cache in a bucket needs: get, put-if-absent, list, stat.

Kept this small so that another object store (S3 is the likely next) is one more module.
Failures the store cannot judge (network, permission, a server error) are `StoreError`s with a
kind the record names; a missing object is `None`, not an error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from jaxcache.display import safe
from jaxcache.errors import JaxcacheError

NOT_FOUND, PERMISSION, NETWORK, ERROR = "not-found", "permission-denied", "network", "error"


@dataclass(frozen=True)
class ObjectInfo:
    """One object, as a listing or a stat shows it (the name is relative to the prefix)."""

    name: str
    size: int
    generation: str  # the store's version of the object (GCS: its generation number)
    updated: float | None  # seconds since the epoch, when the store says


class StoreError(Exception):
    """The store could not answer: the caller treats it as a miss and says why."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind, self.message = kind, message


class ObjectStore(Protocol):
    url: str  # scheme://bucket/prefix, as the user gave it (normalized)

    def get(self, name: str, limit: int | None = None) -> bytes | None:
        """The object's bytes (at most `limit`), one download; None if it does not exist."""

    def put_if_absent(self, name: str, data: bytes) -> bool:
        """Create the object only if no object has that name (first writer wins); False if
        one exists. Must be atomic on the server (GCS: ifGenerationMatch=0)."""

    def stat(self, name: str) -> ObjectInfo | None:
        """The object's size and generation; None if it does not exist."""

    def list(self) -> Iterator[ObjectInfo]:
        """Every object under the prefix."""


@dataclass(frozen=True)
class BucketUrl:
    scheme: str
    bucket: str
    prefix: str  # no leading or trailing slash; may be empty

    @property
    def text(self) -> str:
        return f"{self.scheme}://{self.bucket}" + (f"/{self.prefix}" if self.prefix else "")

    def object(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name


_BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")  # GCS bucket names
SCHEMES = ("gs",)


def is_url(text: str) -> bool:
    return re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", text) is not None


def parse(text: str) -> BucketUrl:
    """gs://bucket[/prefix] -> BucketUrl; anything else is one clear JaxcacheError."""
    scheme, _, rest = text.partition("://")
    if scheme not in SCHEMES:
        raise JaxcacheError(f"{safe(text)}: a sealed cache in object storage supports "
                            f"{', '.join(s + '://' for s in SCHEMES)} only")
    bucket, _, prefix = rest.partition("/")
    if not _BUCKET.match(bucket):
        raise JaxcacheError(f"{safe(text)}: {safe(bucket)!r} is not a valid bucket name")
    prefix = prefix.strip("/")
    if any(part in ("", ".", "..") for part in prefix.split("/")) and prefix:
        raise JaxcacheError(f"{safe(text)}: the prefix has an empty, '.' or '..' component")
    if "\0" in prefix or "\n" in prefix:
        raise JaxcacheError(f"{safe(text)}: the prefix holds a control character")
    return BucketUrl(scheme, bucket, prefix)


def normalize(text: str) -> str:
    """The one spelling of a bucket URL that policies and records compare."""
    return parse(text).text


def open_store(url: BucketUrl) -> ObjectStore:
    """The store for `url` (the client is imported only here: the audit never needs it)."""
    from jaxcache.seal import gcs

    return gcs.GcsStore(url)
