"""What the S3 API answers, through boto3's response dicts, parsed once into typed values for
s3_store.py: an object's info (HEAD, a listing page), a download's body, a ClientError's code,
status and message. Pure parsing: no request is made here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import cast

from jaxcache.seal.objects.http_answers import server_date
from jaxcache.seal.objects.object_store import ObjectInfo

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Protocol

    class Body(Protocol):
        """botocore's StreamingBody, as a download reads it."""

        def read(self, amt: int | None = ...) -> bytes: ...

        def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class S3Error:
    """A ClientError's code (its HTTP status as text where the answer had no body, as HEAD's),
    status (0: none) and message."""

    code: str
    status: int
    message: object

    @classmethod
    def of(cls, exc: BaseException) -> S3Error:
        resp = getattr(exc, "response", None) or {}
        error = resp.get("Error", {})
        status = resp.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        return cls(str(error.get("Code") or status), int(status), error.get("Message"))


def body(resp: Mapping[str, object]) -> Body:
    """GetObject's streaming body."""
    return cast("Body", resp["Body"])  # boto3's answers carry no types


def head_info(name: str, resp: Mapping[str, object]) -> ObjectInfo:
    """HeadObject's answer for the object `name`."""
    return _info(name, resp["ContentLength"], resp["ETag"], resp.get("LastModified"),
                 _answered(resp))


def listed(page: Mapping[str, object], start: str, folder: str = "") -> list[ObjectInfo]:
    """The objects directly under the prefix `start` in one ListObjectsV2 page, named from
    the store's prefix (`folder`, the part of `start` below it, first)."""
    out = []
    answered = _answered(page)
    objects = page.get("Contents", [])
    if not isinstance(objects, list):  # boto3 never answers so; s3_store._call: an ERROR
        raise TypeError("ListObjectsV2 answered Contents that is not a list")
    for obj in objects:
        rest = obj["Key"][len(start):]
        if rest and "/" not in rest:
            out.append(_info(folder + rest, obj["Size"], obj.get("ETag", ""),
                             obj.get("LastModified"), answered))
    return out


def _answered(resp: Mapping[str, object]) -> float | None:
    """The server's clock when it answered: the Date header boto3 keeps in ResponseMetadata."""
    meta = resp.get("ResponseMetadata")
    headers = meta.get("HTTPHeaders") if isinstance(meta, dict) else None
    return server_date(headers, "date") if isinstance(headers, dict) else None


def _info(name: str, size: object, etag: object, modified: object,
          answered: float | None) -> ObjectInfo:
    updated = modified.timestamp() if isinstance(modified, datetime) else None
    return ObjectInfo(name, size if isinstance(size, int) else 0, str(etag), updated, answered)
