"""Every object-store call under one deadline, with bounded retries: the one place that decides
how long jaxcache waits for a bucket and how often it asks again.

The clients' own timeouts bound each socket read, not a request: a server that trickles a byte
now and then, or a body that never ends, would hold a job's compile for as long as it likes. So
each call runs in a helper thread and the caller waits at most its deadline: a base (20 s,
JAXCACHE_BUCKET_DEADLINE_S) plus the time the transfer takes at 5 MB/s, so a large entry is not
cut off on a slow but working link. A call that fails in a way that may pass (a network error,
a 5xx, a throttle) is tried again, at most three times in all, after a jittered backoff, and
never past the deadline; one that cannot pass (permission, not found, a 4xx) is not. A call the
deadline abandons keeps its thread until the client ends it (a socket read that gets a byte now
and then may not end soon); the thread is a daemon, so it never holds the process at exit.

Retrying a create-only or conditional write is safe: if an earlier attempt landed (a reset or a
5xx after the server applied it), the retry finds its precondition failed and would answer
False, "another writer got there first"; so after such an attempt a False is checked: a write
whose object now holds exactly these bytes, or a delete whose object is gone, was ours and
answers True. A call the deadline abandons may still land later: a create-only object or a
compare and swap cannot overwrite anything, and an entry that lands after its orphaned
signature was collected stays unsigned (a miss) until `seal` signs it.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from jaxcache.seal.objects.object_store import (
    ERROR,
    NETWORK,
    ObjectInfo,
    ObjectStore,
    StoreError,
)

T = TypeVar("T")
BASE_S = 20.0  # the deadline of a call that moves no bytes
RATE = 5e6  # bytes a second that still count as moving
ATTEMPTS = 3
BACKOFF_S = 0.2  # before the second attempt; doubled for the third, each jittered
ENV = "JAXCACHE_BUCKET_DEADLINE_S"
LIST_FACTOR = 10  # a listing's deadline, in bases: it may take many pages


def base_deadline() -> float:
    """The base deadline, from JAXCACHE_BUCKET_DEADLINE_S when set to a positive number."""
    try:
        value = float(os.environ.get(ENV, ""))
    except ValueError:
        return BASE_S
    return value if 0 < value < 86400 else BASE_S


class Resilient:
    """An ObjectStore that forwards to `store` under deadlines and bounded retries."""

    def __init__(self, store: ObjectStore, base_s: float | None = None) -> None:
        self.store = store
        self.url, self.name_max = store.url, store.name_max
        self.base_s = base_deadline() if base_s is None else base_s

    def __getattr__(self, name: str) -> object:  # the wrapped store's extras (where, ...)
        return getattr(self.store, name)

    def prepare(self) -> None:
        """Under the same deadline as a request: making a client may resolve credentials
        (a credential process, a metadata server) that never answer."""
        _within(time.monotonic() + self.base_s, self.base_s, "making the client for",
                self.url, self.store.prepare)

    def _deadline(self, nbytes: int) -> float:
        return self.base_s + nbytes / RATE

    def _call(self, what: str, nbytes: int, fn: Callable[[], T], *,
              seconds: float | None = None) -> tuple[T, bool]:
        """fn's answer, and whether an earlier attempt failed in a way that may have been
        applied on the server all the same (a reset or a 5xx after the write landed)."""
        limit = self._deadline(nbytes) if seconds is None else seconds
        deadline = time.monotonic() + limit
        maybe_applied = False
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return _within(deadline, limit, what, self.url, fn), maybe_applied
            except StoreError as exc:
                pause = BACKOFF_S * 2 ** (attempt - 1) * random.uniform(0.5, 1.5)  # noqa: S311
                if not exc.transient or attempt == ATTEMPTS or \
                        time.monotonic() + pause >= deadline:
                    raise
                maybe_applied = True
                time.sleep(pause)
        raise AssertionError("unreachable")  # pragma: no cover

    def _written(self, name: str, data: bytes, done: bool, maybe_applied: bool) -> bool:
        """A conditional write that answered False after an attempt that may have landed:
        True when the object now holds exactly `data` (that attempt was ours)."""
        if done or not maybe_applied:
            return done
        return self.get(name, limit=len(data) + 1) == data

    # --- ObjectStore ---------------------------------------------------------------------
    def get(self, name: str, limit: int | None = None) -> bytes | None:
        if limit is None:  # a whole object: as far as its size, and its deadline from it
            info = self.stat(name)
            if info is None:
                return None
            data = self.get(name, info.size + 1)  # a byte more tells one that grew
            if data is not None and len(data) > info.size:
                raise StoreError(ERROR, f"download {name} in {self.url}: longer than the "
                                        f"{info.size} bytes it had a moment before (written "
                                        f"meanwhile, or a server that sends more): not read")
            return data
        return self._call(f"download {name}", limit, lambda: self.store.get(name, limit))[0]

    def put_if_absent(self, name: str, data: bytes) -> bool:
        done, maybe = self._call(f"upload {name}", len(data),
                                 lambda: self.store.put_if_absent(name, data))
        return self._written(name, data, done, maybe)

    def replace_if(self, name: str, data: bytes, generation: str) -> bool:
        done, maybe = self._call(f"upload {name}", len(data),
                                 lambda: self.store.replace_if(name, data, generation))
        return self._written(name, data, done, maybe)

    def delete_if(self, name: str, generation: str) -> bool:
        done, maybe = self._call(f"delete {name}", 0,
                                 lambda: self.store.delete_if(name, generation))
        return done or (maybe and self.stat(name) is None)  # gone: that attempt was ours

    def stat(self, name: str) -> ObjectInfo | None:
        return self._call(f"stat {name}", 0, lambda: self.store.stat(name))[0]

    def list(self, folder: str = "") -> Iterator[ObjectInfo]:
        """One deadline for the whole listing, LIST_FACTOR bases: pages of 1,000 objects
        take a fraction of a second each, so a prefix of a million objects still fits."""
        return iter(self._call(f"list {folder}".rstrip(), 0,
                               lambda: list(self.store.list(folder)),
                               seconds=self.base_s * LIST_FACTOR)[0])


def _within(deadline: float, limit: float, what: str, url: str, fn: Callable[[], T]) -> T:
    """fn() in a daemon thread, waited for until `deadline`; a StoreError past it. Where no
    thread may start (an atexit handler on Python 3.12, gh-113964) fn runs here, bounded by
    the client's own timeouts alone."""
    result: list[T] = []
    error: list[BaseException] = []
    done = threading.Event()

    def run() -> None:
        try:
            result.append(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller as it is
            error.append(exc)
        finally:
            done.set()

    try:
        threading.Thread(target=run, daemon=True, name="jaxcache-store").start()
    except RuntimeError:
        return fn()
    if not done.wait(max(0.0, deadline - time.monotonic())):
        raise StoreError(NETWORK, f"{what} in {url}: no answer within its deadline of "
                                  f"{limit:.0f} s ({ENV}, plus 1 s per 5 MB)")
    if error:
        raise error[0]
    return result[0]
