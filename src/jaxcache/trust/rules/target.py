"""Turn what the user typed into the path JAX would use, with JAX's own semantics, or into a
bucket URL (gs://, s3://) a sealed cache can live in.

JAX does not expand `~` (it creates a directory literally named `~` under the cwd), treats a
relative path as relative to the current directory, and hands URLs to etils/epath.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

from jaxcache.errors import JaxcacheError
from jaxcache.text import quoted, safe

_SCHEME = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")


def is_url(text: str) -> bool:
    """A URL (scheme://...: a letter, then letters, digits, '+', '.' or '-'), which JAX hands
    to etils/epath, not a local path. Without a pattern: every run record asks, and a
    compiled pattern costs the import of this module on `run`'s path."""
    scheme, sep, _ = text.partition("://")
    return bool(sep and scheme) and scheme[0] in _SCHEME and scheme[0] not in "0123456789+.-" \
        and all(c in _SCHEME for c in scheme)


class Target(NamedTuple):
    given: str
    path: str | None  # absolute path JAX would use; None for a URL
    url: str | None
    notes: tuple[tuple[str, str], ...]  # (finding code, text): path.tilde, path.relative

    @property
    def tilde(self) -> bool:
        """JAX would take a leading '~' literally: callers that create or enable refuse it."""
        return any(code == "path.tilde" for code, _ in self.notes)


def resolve(given: str, cwd: str | None = None) -> Target:
    if given == "":
        raise JaxcacheError("the cache path is empty")
    if "\0" in given:
        raise JaxcacheError("the cache path contains a NUL byte")
    if is_url(given):
        return Target(given, None, given, ())
    notes = []
    if given == "~" or given.startswith("~/") or re.match(r"^~[^/]*(/|$)", given):
        notes.append((
            "path.tilde",
            f"JAX does not expand '~': {quoted(given)} means a directory literally named "
            f"{quoted(given.split('/', 1)[0])} under the current directory. Pass an absolute "
            "path (your shell expands ~ only when it is unquoted at the start of a word)."))
    if not given.startswith("/"):
        base = cwd if cwd is not None else os.getcwd()
        notes.append(("path.relative",
                      f"relative path: JAX resolves it against the current directory "
                      f"{safe(base)}, so it differs between jobs started elsewhere"))
        path = base.rstrip("/") + "/" + given
    else:
        path = given
    return Target(given, path, None, tuple(notes))


class BucketUrl(NamedTuple):
    scheme: str
    bucket: str
    prefix: str  # no leading or trailing slash; may be empty

    @property
    def text(self) -> str:
        return f"{self.scheme}://{self.bucket}" + (f"/{self.prefix}" if self.prefix else "")

    def object(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name


_BUCKETS = {  # compiled on first use (re's cache): not every importer parses a bucket
    "gs": r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$",  # GCS bucket names
    "s3": r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$",  # S3: 3-63, no '_' or capitals
}
SCHEMES = ("gs", "s3")


def parse_bucket(text: str) -> BucketUrl:
    """gs://bucket[/prefix] or s3://... -> BucketUrl; anything else is one clear
    JaxcacheError."""
    scheme, _, rest = text.partition("://")
    if scheme not in SCHEMES:
        raise JaxcacheError(f"{safe(text)}: a sealed cache in object storage supports "
                            f"{', '.join(s + '://' for s in SCHEMES)} only")
    bucket, _, prefix = rest.partition("/")
    if not _valid_bucket(scheme, bucket):
        raise JaxcacheError(f"{safe(text)}: {quoted(bucket)} is not a valid bucket name")
    prefix = prefix.strip("/")
    if any(part in ("", ".", "..") for part in prefix.split("/")) and prefix:
        raise JaxcacheError(f"{safe(text)}: the prefix has an empty, '.' or '..' component")
    if "\0" in prefix or "\n" in prefix:
        raise JaxcacheError(f"{safe(text)}: the prefix holds a control character")
    return BucketUrl(scheme, bucket, prefix)


def _valid_bucket(scheme: str, bucket: str) -> bool:
    if not re.match(_BUCKETS[scheme], bucket):
        return False
    if scheme == "s3":  # no '..', no '.-' or '-.', not an IP address
        return not re.search(r"\.\.|\.-|-\.", bucket) and \
            not re.match(r"^\d+\.\d+\.\d+\.\d+$", bucket)
    return True


def normalize_bucket(text: str) -> str:
    """The one spelling of a bucket URL that policies and records compare."""
    return parse_bucket(text).text
