"""Bucket URLs (gs://bucket/prefix, s3://bucket/prefix) and the store that serves one.

The interface every store implements is object_types.py's (re-exported here, where callers have
always found it); a store module (gcs.py, s3.py) imports that, not this module, so the factory
below can import the store without a cycle. What differs per service beyond the interface (its
bucket names, what an audit cannot see of its access control) is asked of the store's module
through the scheme, here: nothing else in jaxcache knows which service it talks to.
"""

from __future__ import annotations

import re
from types import ModuleType

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
from jaxcache.text import safe
from jaxcache.trust.target import is_url

__all__ = ["ERROR", "NETWORK", "NOT_FOUND", "PERMISSION", "SCHEMES", "BucketUrl", "ObjectInfo",
           "ObjectStore", "StoreError", "is_url", "normalize", "open_store", "parse", "service",
           "unchecked", "write_grants"]

_BUCKETS = {
    "gs": re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$"),  # GCS bucket names
    "s3": re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"),  # S3: 3-63, no '_' or capitals
}
SCHEMES = ("gs", "s3")


def parse(text: str) -> BucketUrl:
    """gs://bucket[/prefix] or s3://... -> BucketUrl; anything else is one clear
    JaxcacheError."""
    scheme, _, rest = text.partition("://")
    if scheme not in SCHEMES:
        raise JaxcacheError(f"{safe(text)}: a sealed cache in object storage supports "
                            f"{', '.join(s + '://' for s in SCHEMES)} only")
    bucket, _, prefix = rest.partition("/")
    if not _valid_bucket(scheme, bucket):
        raise JaxcacheError(f"{safe(text)}: {safe(bucket)!r} is not a valid bucket name")
    prefix = prefix.strip("/")
    if any(part in ("", ".", "..") for part in prefix.split("/")) and prefix:
        raise JaxcacheError(f"{safe(text)}: the prefix has an empty, '.' or '..' component")
    if "\0" in prefix or "\n" in prefix:
        raise JaxcacheError(f"{safe(text)}: the prefix holds a control character")
    return BucketUrl(scheme, bucket, prefix)


def _valid_bucket(scheme: str, bucket: str) -> bool:
    if not _BUCKETS[scheme].match(bucket):
        return False
    if scheme == "s3":  # no '..', no '.-' or '-.', not an IP address
        return not re.search(r"\.\.|\.-|-\.", bucket) and \
            not re.match(r"^\d+\.\d+\.\d+\.\d+$", bucket)
    return True


def normalize(text: str) -> str:
    """The one spelling of a bucket URL that policies and records compare."""
    return parse(text).text


def service(scheme: str) -> ModuleType:
    """The store module of a scheme (importing it imports no client: that waits for a call)."""
    if scheme == "s3":
        from jaxcache.seal import s3

        return s3
    from jaxcache.seal import gcs

    return gcs


def open_store(url: BucketUrl) -> ObjectStore:
    """The store for `url` (the client is imported only here: the audit never needs it)."""
    return service(url.scheme).Store(url)


def unchecked(url: BucketUrl, publishers: list[str]) -> tuple[str, str]:
    """What an audit cannot see of who may write `url`, and how to check it by hand."""
    return service(url.scheme).unchecked(url, publishers)


def write_grants(scheme: str) -> str:
    """The service's names for write access, for a plain reader's finding (a scheme jaxcache
    does not serve gets Cloud Storage's, as an example)."""
    return service(scheme).WRITE_GRANTS
