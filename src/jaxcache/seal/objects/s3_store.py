"""The S3 store (the interface: object_store.py), through boto3: AWS S3 and the services
that speak its API (R2, MinIO, CoreWeave, SeaweedFS).

The endpoint, region and credentials come from boto3's standard chain (AWS_ENDPOINT_URL,
AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, AWS_PROFILE and ~/.aws, instance roles); with no
credentials at all, requests go unsigned, which can read a public bucket and write nothing. The
client is made at the first call, never at import or enable time: a network or credential
failure is then a miss the caller records, not an error that stops the job. Socket timeouts
are bounded and botocore's own retries are off (one attempt): deadlines and the bounded retries
are resilient.py's, the same for both stores.

Create-only: `put_object(IfNoneMatch='*')`, which S3 (since 2024-08) and SeaweedFS enforce on
the server (412 on an existing key); compare and swap: `IfMatch=<ETag>`. The ETag is the
object's version here (an MD5 of the bytes for a single PUT: equal bytes, equal ETag, which is
all a swap of judged bytes needs). Never `upload_fileobj`: it refuses IfNoneMatch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from jaxcache.errors import JaxcacheError
from jaxcache.seal.objects.answer_bounds import TooLong, bounded
from jaxcache.seal.objects.object_store import (
    ERROR,
    NETWORK,
    NOT_FOUND,
    OBJECT_NAME_MAX,
    PERMISSION,
    ObjectInfo,
    StoreError,
)
from jaxcache.seal.objects.s3_responses import S3Error, body, head_info, listed
from jaxcache.text import safe
from jaxcache.trust.rules.target import BucketUrl

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypeVar

    T = TypeVar("T")

CONNECT_S, READ_S = 5.0, 10.0  # per connection attempt, per socket read (not per download)
RETRIES = {"total_max_attempts": 1, "mode": "standard"}  # one attempt: resilient.py retries
_BUSY = {"SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout", "Throttling",
         "ThrottlingException"}  # may pass when asked again
MISSING = "pip install 'jaxcache[s3]'"
CLIENT = "boto3"  # the client's module (store_for_url.check_client finds it without importing)
NO_CLIENT = f"an s3:// cache needs the boto3 client: {MISSING}"
READ_GRANT = ("the reader's credentials are wrong, or its principal lacks s3:GetObject on the "
              "prefix and s3:ListBucket on the bucket")  # for a permission-denied miss
_DENIED = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken",
           "InvalidToken", "TokenRefreshRequired", "AllAccessDisabled", "AccountProblem"}
_LOST = {"PreconditionFailed", "ConditionalRequestConflict"}  # 412; 409: a racing conditional
# write (S3 asks to retry it: a rival is writing that key, so first-writer-wins says we lost)


def _boto3() -> Any:  # the boto3 module: the client has no type information
    try:
        import boto3
    except ImportError:
        raise JaxcacheError(NO_CLIENT) from None
    return boto3


class S3Store:
    """`s3://bucket/prefix` as an ObjectStore."""

    name_max = OBJECT_NAME_MAX

    def __init__(self, url: BucketUrl) -> None:
        _boto3()  # fail now, with the install hint, not at the first load
        self.where = url
        self.url = url.text
        self._client: Any = None  # a boto3 S3 client, made at the first call
        self._lock = threading.Lock()

    def _s3(self) -> Any:
        with self._lock:
            if self._client is None:
                import botocore
                from botocore.config import Config

                session = _boto3().session.Session()  # sessions are not thread-safe: one here
                unsigned = {} if session.get_credentials() is not None else \
                    {"signature_version": botocore.UNSIGNED}  # no credentials: a public bucket
                self._client = session.client("s3", config=Config(
                    connect_timeout=CONNECT_S, read_timeout=READ_S, retries=RETRIES,
                    **unsigned))
                _bound_answers(self._client)
            return self._client

    def prepare(self) -> None:
        from botocore import exceptions  # noqa: F401 - what _call catches

        self._s3()

    def _call(self, what: str, name: str, fn: Callable[[object], T]) -> T:
        """Run one request; every failure becomes a StoreError naming the object."""
        from botocore import exceptions as bexc

        where = f"s3://{self.where.bucket}/{self.where.object(name)}"
        try:
            return fn(self._s3())
        except TooLong as exc:  # the server's fault, not the network's: no use asking again
            raise StoreError(ERROR, f"{what} {safe(where)}: {exc}") from None
        except bexc.ClientError as exc:
            code, status = _code(exc)
            if code in _DENIED or status in (401, 403):
                raise StoreError(PERMISSION, f"{what} {safe(where)}: permission denied "
                                             f"({safe(code)}: {_short(exc)})") from None
            if code == "NoSuchBucket":
                raise StoreError(NOT_FOUND, f"{what} {safe(where)}: the bucket "
                                            f"{safe(self.where.bucket)} does not exist") from None
            raise StoreError(ERROR, f"{what} {safe(where)}: {safe(code)} (HTTP {status}): "
                                    f"{_short(exc)}", transient=status >= 500 or
                             status == 429 or code in _BUSY) from None
        except (bexc.NoCredentialsError, bexc.PartialCredentialsError,
                bexc.CredentialRetrievalError) as exc:
            raise StoreError(PERMISSION, f"{what} {safe(where)}: no usable credentials "
                                         f"({_short(exc)})") from None
        except (bexc.HTTPClientError, bexc.ConnectionError, bexc.IncompleteReadError,
                OSError) as exc:  # refused, timed out, cut off mid-download
            raise StoreError(NETWORK, f"{what} {safe(where)}: {type(exc).__name__}: "
                                      f"{_short(exc)}", transient=True) from None
        except Exception as exc:  # noqa: BLE001 - a bad endpoint, a client bug: still a miss
            raise StoreError(ERROR, f"{what} {safe(where)}: {type(exc).__name__}: "
                                    f"{_short(exc)}") from None

    def get(self, name: str, limit: int | None = None) -> bytes | None:
        from botocore import exceptions as bexc

        def download(s3: Any) -> bytes | None:
            ranged = {} if limit is None else {"Range": f"bytes=0-{max(limit - 1, 0)}"}
            try:
                resp = s3.get_object(Bucket=self.where.bucket, Key=self.where.object(name),
                                     **ranged)
            except bexc.ClientError as exc:
                code, status = _code(exc)
                if code in ("NoSuchKey", "NotFound") or (status == 404 and
                                                         code != "NoSuchBucket"):
                    return None
                if code == "InvalidRange" or status == 416:  # an empty object, ranged
                    return b""
                raise
            stream = body(resp)
            try:  # never more than limit, whatever the server sends (and the socket read
                # no further: _bound_answers)
                data: bytes = stream.read() if limit is None else stream.read(max(limit, 0))
            finally:
                stream.close()
            return data

        return self._call("download", name, download)

    def put_if_absent(self, name: str, data: bytes) -> bool:
        return self._put(name, data, IfNoneMatch="*")

    def replace_if(self, name: str, data: bytes, generation: str) -> bool:
        return self._put(name, data, IfMatch=generation)

    def _put(self, name: str, data: bytes, **condition: str) -> bool:
        """One PUT, only while the condition holds on the server (412: it does not)."""
        from botocore import exceptions as bexc

        def upload(s3: Any) -> bool:
            try:
                s3.put_object(Bucket=self.where.bucket, Key=self.where.object(name), Body=data,
                              ContentType="application/octet-stream", **condition)
            except bexc.ClientError as exc:
                code, status = _code(exc)
                if code in _LOST or status in (409, 412) or (
                        status == 404 and "IfMatch" in condition and code != "NoSuchBucket"):
                    return False  # first writer wins; or changed (or gone) since judged
                raise
            return True

        return self._call("upload", name, upload)

    def delete_if(self, name: str, generation: str) -> bool:
        from botocore import exceptions as bexc

        def delete(s3: Any) -> bool:
            try:
                s3.delete_object(Bucket=self.where.bucket, Key=self.where.object(name),
                                 IfMatch=generation)
            except bexc.ClientError as exc:
                code, status = _code(exc)
                if status in (404, 409, 412) and code != "NoSuchBucket":
                    return False  # re-published since it was judged, or gone already
                raise
            return True

        return self._call("delete", name, delete)

    def stat(self, name: str) -> ObjectInfo | None:
        from botocore import exceptions as bexc

        def head(s3: Any) -> ObjectInfo | None:
            try:
                resp = s3.head_object(Bucket=self.where.bucket, Key=self.where.object(name))
            except bexc.ClientError as exc:
                if _code(exc)[1] == 404:  # HEAD has no body: no error code to tell a bucket
                    return None
                raise
            return head_info(name, resp)

        return self._call("stat", name, head)

    def list(self, folder: str = "") -> Iterator[ObjectInfo]:
        start = self.where.object(folder)

        def listing(s3: Any) -> list[ObjectInfo]:
            out = []
            pages = s3.get_paginator("list_objects_v2").paginate(
                Bucket=self.where.bucket, Prefix=start, Delimiter="/")
            for page in pages:
                out += listed(page, start, folder)
            return out

        return iter(self._call("list", "", listing))


Store = S3Store  # what objects.open_store makes for this scheme


def _bound_answers(client: Any) -> None:
    """Every answer's body read through answer_bounds.bounded. botocore's session reads an
    error's or a listing's body whole as it answers, and has no hook between the answer's
    head and that read; but botocore takes an answer a before-send handler gives: so the
    request is sent here, through the endpoint's own session (its timeouts, proxies,
    certificates) as a streamed one, and the body read as the session would have, within its
    bound. A botocore without that session is left as it is (a download still reads no more
    than `limit`: get)."""
    from botocore.exceptions import HTTPClientError

    http = getattr(getattr(client, "_endpoint", None), "http_session", None)
    if http is None or not callable(getattr(http, "send", None)):
        return

    def send(request: Any, **_: object) -> Any:
        whole = not request.stream_output
        request.stream_output = True  # the session leaves the body to us
        try:
            response = http.send(request)
        finally:
            request.stream_output = not whole
        response.raw = bounded(response.raw, request.method, response.status_code,
                               request.headers, response.headers)
        if whole:  # read now, as the session reads it, its failures named as it names them
            try:
                response.content  # noqa: B018 - read here, kept by the response
            except TooLong:
                raise
            except Exception as exc:  # noqa: BLE001 - cut off, timed out: the network's
                raise HTTPClientError(error=exc) from None
        return response

    client.meta.events.register("before-send.s3", send)


def _code(exc: BaseException) -> tuple[str, int]:
    """The error code and HTTP status of a ClientError (HEAD errors have only the status)."""
    error = S3Error.of(exc)
    return error.code, error.status


def _short(exc: BaseException) -> str:
    text = S3Error.of(exc).message or str(exc)
    return safe(" ".join(str(text).split())[:200])
