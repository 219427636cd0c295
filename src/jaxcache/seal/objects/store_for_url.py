"""The store that serves a bucket URL (gs://bucket/prefix, s3://...; parsed by
trust/rules/target.py).

The interface every store implements is object_store.py's (re-exported here, where callers have
always found it); a store module (gcs_store.py, s3_store.py) imports that, not this module, so the
factory below can import the store without a cycle. What differs per service beyond the interface
(its bucket names, what an audit cannot see of its access control) is asked of the store's module
through the scheme, here: nothing else in jaxcache knows which service it talks to.
"""

from __future__ import annotations

from types import ModuleType

from jaxcache.seal.objects.object_store import (
    ERROR,
    NETWORK,
    NOT_FOUND,
    PERMISSION,
    ObjectInfo,
    ObjectStore,
    StoreError,
)
from jaxcache.trust.rules.target import BucketUrl, is_url

__all__ = ["ERROR", "NETWORK", "NOT_FOUND", "PERMISSION", "BucketUrl", "ObjectInfo",
           "ObjectStore", "StoreError", "check_client", "is_url", "open_store", "service"]

def service(scheme: str) -> ModuleType:
    """The store module of a scheme (importing it imports no client: that waits for a call)."""
    if scheme == "s3":
        from jaxcache.seal.objects import s3_store as s3

        return s3
    from jaxcache.seal.objects import gcs_store as gcs

    return gcs


def check_client(url: BucketUrl) -> None:
    """The store's client is installed (else JaxcacheError, one line with the install hint),
    found without importing it (boto3 costs ~0.2 s): `jaxcache run` checks before the job,
    whose probe imports it."""
    import importlib.util

    from jaxcache.errors import JaxcacheError

    store = service(url.scheme)
    try:
        found = importlib.util.find_spec(store.CLIENT)
    except (ImportError, ValueError):  # a parent package missing or broken
        found = None
    if found is None:
        raise JaxcacheError(store.NO_CLIENT)


def open_store(url: BucketUrl) -> ObjectStore:
    """The store for `url` (the client is imported only here: the audit never needs it),
    every call under a deadline with bounded retries (resilient.py)."""
    from jaxcache.seal.objects.resilient import Resilient

    return Resilient(service(url.scheme).Store(url))
