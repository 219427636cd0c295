"""Bucket URLs (gs://bucket/prefix) and the store that serves one.

The interface every store implements is object_types.py's (re-exported here, where callers have
always found it); a store module such as gcs.py imports that, not this module, so the factory
below can import the store without a cycle.
"""

from __future__ import annotations

import re

from jaxcache.display import safe
from jaxcache.errors import JaxcacheError
from jaxcache.seal.object_types import (
    ERROR,
    NETWORK,
    NOT_FOUND,
    PERMISSION,
    BucketUrl,
    ObjectInfo,
    ObjectStore,
    StoreError,
)

__all__ = ["ERROR", "NETWORK", "NOT_FOUND", "PERMISSION", "SCHEMES", "BucketUrl", "ObjectInfo",
           "ObjectStore", "StoreError", "is_url", "normalize", "open_store", "parse"]

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
