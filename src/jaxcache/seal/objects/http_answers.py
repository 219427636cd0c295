"""What an object store's HTTP answer says beside its body, parsed once: the server's clock.

An object's age is judged on the clock that stamped it (the store's), never this process's
(a publisher or gc a day ahead would take a rival's publish in progress for a dead one). Both
stores send it as the HTTP `Date` header: boto3 keeps the headers in its answers'
ResponseMetadata (s3_responses.py); the Cloud Storage client's answers are JSON only, so its
store keeps the header from a response hook (gcs_store.py).
"""

from __future__ import annotations

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
