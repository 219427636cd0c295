"""What an object store's HTTP answer says beside its body, parsed once: the server's clock,
and how long the body may be (the Range its request asked, the length its framing gives).

An object's age is judged on the clock that stamped it (the store's), never this process's
(a publisher or gc a day ahead would take a rival's publish in progress for a dead one). Both
stores send it as the HTTP `Date` header: boto3 keeps the headers in its answers'
ResponseMetadata (s3_responses.py); the Cloud Storage client's answers are JSON only, so its
store keeps the header from a response hook (gcs_store.py).
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


def server_date(headers: Mapping[str, object] | None, name: str = "Date") -> float | None:
    """The time (seconds since the epoch) the answer's Date header gives, None without one or
    for anything that is not an HTTP date. `name`: the header as the client spells its keys
    (requests: any case; boto3: lower case)."""
    value = headers.get(name) if headers is not None else None
    if not isinstance(value, str):
        return None
    from email.utils import parsedate_to_datetime  # 8 ms: only once a store has answered

    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


_RANGE = re.compile(r"bytes=(\d+)-(\d+)")


def asked_length(request: Mapping[str, object]) -> int | None:
    """The bytes a request's `Range: bytes=A-B` asks for; None for no range or any other
    form. (Both clients' header mappings take any case.)"""
    value = request.get("Range")
    found = _RANGE.fullmatch(value.strip()) if isinstance(value, str) else None
    if found is None or int(found[2]) < int(found[1]):
        return None
    return int(found[2]) - int(found[1]) + 1


def body_length(answer: Mapping[str, object]) -> int | None:
    """The body's length as the answer's framing gives it; None for chunks or no usable
    length (the client then reads until the connection closes)."""
    if "chunked" in str(answer.get("Transfer-Encoding") or "").lower():
        return None
    value = str(answer.get("Content-Length") or "").strip()
    return int(value) if value.isdigit() else None
