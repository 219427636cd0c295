"""Publish a generation: every entry of a directory whose audit passed, uploaded by digest where
the store does not hold it yet, then the manifest, its signature, and last the pointer.

The order is what makes it safe to read at any moment: an object is uploaded before any
manifest names it, a manifest is signed before any pointer names it, and the pointer is one
object replaced only if it is still what this publisher found before it listed the store (a
compare and swap: GCS ifGenerationMatch, S3 If-Match, a directory's lock), so a publisher
killed at any step
leaves the old generation current, and of two racing publishers one moves the pointer and the
other says so. Requests: one listing, one upload per object the store lacks, then a constant
(its lease, the gc lease's stat, manifest, signature, the pointer's stat, read and write, the
lease's release): a republish of an unchanged cache uploads no entry.

Beside a gc (collecting.py): the publisher writes its lease (`leases/publish-<name>`) before
it lists the store, and waits while a gc's lease is fresh; a gc takes its own lease before it
lists, and deletes no object while a publisher's lease is fresh. Whichever of the two writes
its lease second sees the other's, so an object a publisher found in the store and did not
upload again is never deleted under it. A publisher that has not moved its pointer within
manifest.LEASE_S (its lease stale) does not move it.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from jaxcache.errors import JaxcacheError
from jaxcache.seal.generations import manifest as m
from jaxcache.seal.objects.object_store import ObjectStore, StoreError
from jaxcache.seal.publishing.tier_files import Rejected, open_dir, read_whole
from jaxcache.seal.signing import digest as digestmod
from jaxcache.seal.signing import hittable
from jaxcache.seal.signing.signature_file import sign
from jaxcache.trust.kernel.entries import classify
from jaxcache.trust.rules.keyring import when

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.seal.signing.signature_file import Signer

UPLOADS = 16  # uploads in flight: a bucket's latency, not its bandwidth, bounds a small entry
POINTER_BYTES = 256  # a pointer holds a generation's name and a newline
GC_WAIT_S = 120.0  # how long a publisher waits for a running gc to end


@dataclass(frozen=True, slots=True)
class Published:
    """What a publish did: the generation, where the pointer stands, what was uploaded."""

    store: str
    name: str
    pointer: str
    previous: str | None  # the generation the pointer named before (None: it was new)
    moved: bool  # False: another publisher moved the pointer meanwhile; it was left alone
    entries: int
    size: int
    uploaded: int  # objects this publish uploaded (the others were there already)
    uploaded_bytes: int
    left_out: tuple[tuple[str, str], ...]  # (entry, why): never hit by a sealed reader
    problems: tuple[tuple[str, str], ...]  # (entry, why): could not be read or uploaded
    now_names: str | None = None  # when not moved: what the pointer names now
    # why the pointer was left where it was by this publisher's own choice (entries it could
    # not publish: readers keep the generation they had); None when it tried to move it
    held_back: str | None = None

    @property
    def ok(self) -> bool:
        return self.moved and not self.problems and not self.left_out


class NothingToPublish(JaxcacheError):
    """Every entry was left out (or there was none): no generation is written, exit code 1."""

    exit_code = 1


def new_name(now: float) -> str:
    """A generation's name (manifest.py's shape): when it was made, to the millisecond, and 8
    random hex digits."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now))
    return f"{stamp}.{int(now * 1000) % 1000:03d}Z-{secrets.token_hex(4)}"


def revision() -> str | None:
    """The source revision CI says it builds (GitHub Actions, GitLab CI), else None."""
    for name in ("GITHUB_SHA", "CI_COMMIT_SHA"):
        found = os.environ.get(name, "")
        if found and len(found) <= 64 and found.isalnum() and found.isascii():
            return found
    return None


def publish(directory: str, store: ObjectStore, signer: Signer, *, publisher: str,
            pointer: str = m.DEFAULT_POINTER, build: str | None = None,
            allow_unhittable: bool = False, now: float | None = None,
            progress: Callable[[int, int], None] | None = None,
            refused: Mapping[str, str] | None = None) -> Published:
    """Publish the entries of `directory` (the caller judged it: its audit passed) to
    `store` as a new generation signed by `signer`, and move `pointer` to it. `build`: the
    fingerprint id of the build that compiled them (this Python's: publish where they were
    made). `refused`: entries not to publish, with why (the caller's judgement of their
    signatures). StoreError: the store could not be written (nothing a reader sees has
    changed)."""
    started = time.monotonic()
    at = time.time() if now is None else now
    name = new_name(at)
    lease = m.PUBLISH_LEASE + name
    store.put_if_absent(lease, f"{when(at)}\n".encode())
    try:
        _wait_for_gc(store)
        return _publish(directory, store, signer, name, at, started, publisher=publisher,
                        pointer=pointer, build=build, allow_unhittable=allow_unhittable,
                        progress=progress, refused=refused or {})
    finally:
        _release(store, lease)


def _wait_for_gc(store: ObjectStore) -> None:
    """Wait while a gc holds its fresh lease (StoreError past GC_WAIT_S)."""
    deadline = time.monotonic() + GC_WAIT_S
    while True:
        info = store.stat(m.GC_LEASE)
        age = info.age_s() if info is not None else None
        if info is None or (age is not None and age >= m.LEASE_S):
            return
        if time.monotonic() >= deadline:
            raise StoreError("error", f"a gc of this store has held {m.GC_LEASE} for "
                                      f"{GC_WAIT_S:.0f} s: publish again when it has ended")
        time.sleep(1.0)


def _release(store: ObjectStore, lease: str) -> None:
    """Delete this publisher's lease (a failure leaves it to go stale: gc deletes it)."""
    try:
        info = store.stat(lease)
        if info is not None:
            store.delete_if(lease, info.generation)
    except StoreError:
        pass


def _publish(directory: str, store: ObjectStore, signer: Signer, name: str, at: float,
             started: float, *,
             publisher: str, pointer: str, build: str | None, allow_unhittable: bool,
             progress: Callable[[int, int], None] | None, refused: Mapping[str, str]
             ) -> Published:
    where = m.pointer_object(pointer)
    seen = store.stat(where)  # the pointer as this publish found it: moved only from there
    before = _named(store.get(where, POINTER_BYTES + 1)) if seen is not None else None
    fd = open_dir(directory)
    try:
        names = sorted(n for n in os.listdir(fd) if classify(n)[0] == "cache")
        held = {o.name: o.size for o in store.list(m.OBJECTS)}
        lock = threading.Lock()
        done = [0, 0, 0]  # entries judged, objects uploaded, their bytes

        def one(file: str) -> tuple[m.Entry | None, tuple[str, str] | None,
                                    tuple[str, str] | None]:
            """(the entry, None, None); or (None, left out, None); or (None, None, problem)."""
            if file in refused:
                return None, None, (file, refused[file])
            try:
                data = read_whole(fd, file, unread=True)
            except Rejected as exc:
                return None, None, (file, exc.reason)
            if data is None:
                return None, None, (file, "removed while publishing")
            why = hittable.why_never_hit(data)
            if why is not None and not allow_unhittable:
                return None, (file, why), None
            entry = m.Entry(file[:-len(m.ENTRY_SUFFIX)], digestmod.of(data).hex(), len(data),
                            build)
            with lock:
                found = held.get(entry.object_name)
                held[entry.object_name] = len(data)  # one upload of bytes two entries share
            sent = False
            if found != len(data):  # absent from the listing, or not these bytes' size
                sent = found is None and store.put_if_absent(entry.object_name, data)
                info = None if sent else store.stat(entry.object_name)
                if not sent and info is not None and info.size != len(data):
                    sent = store.replace_if(entry.object_name, data, info.generation)
                elif not sent and info is None:  # gone since the listing, or no object
                    sent = store.put_if_absent(entry.object_name, data)  # (a link, a folder)
                if not sent and (info is None or info.size != len(data)):
                    return None, None, (file, f"{entry.object_name} in the store is not these "
                                              "bytes, and could not be replaced")
            with lock:
                done[0] += 1
                if sent:
                    done[1] += 1
                    done[2] += len(data)
                if progress is not None:
                    progress(done[0], len(names))
            return entry, None, None

        with ThreadPoolExecutor(UPLOADS) as pool:
            results = list(pool.map(one, names))
    finally:
        os.close(fd)
    entries = tuple(e for e, _, _ in results if e is not None)
    left_out = tuple(x for _, x, _ in results if x is not None)
    problems = tuple(p for _, _, p in results if p is not None)
    if not entries:
        first = (problems or left_out or (("", "the directory holds no entry"),))[0]
        raise NothingToPublish(f"nothing to publish: no entry of {len(names)} could be "
                               f"published ({first[0] + ': ' if first[0] else ''}{first[1]}); "
                               "the pointer was not moved")
    made = m.Manifest(name, pointer, when(at), publisher, revision(), entries)
    data = made.to_bytes()
    if not store.put_if_absent(m.manifest_object(made.name), data):
        raise StoreError("error", f"generation {made.name} exists already")
    if not store.put_if_absent(m.signature_object(made.name),
                               sign(m.signed_key(made.name), data, signer, now=at)):
        raise StoreError("error", f"a signature of generation {made.name} was there before "
                                  "this publisher wrote its own (a writer of the store)")
    if time.monotonic() - started >= m.LEASE_S:  # a gc may take this publish's lease for stale
        raise StoreError("error", f"publishing took over {m.LEASE_S:.0f} s: generation "
                                  f"{made.name} was written but the pointer not moved to it")
    if problems:  # readers keep the generation they had: it holds what this one lacks
        return Published(store.url, made.name, pointer, before, False, len(entries),
                         made.size, done[1], done[2], left_out, problems, before,
                         f"{len(problems)} entries could not be published")
    text = (name + "\n").encode()
    moved = store.put_if_absent(where, text) if seen is None else \
        store.replace_if(where, text, seen.generation)
    now_names = None if moved else _named(store.get(where, POINTER_BYTES + 1))
    return Published(store.url, made.name, pointer, before, moved, len(entries), made.size,
                     done[1], done[2], left_out, problems, now_names)


def _named(data: bytes | None) -> str | None:
    """The generation a pointer's bytes name, or None when they name none."""
    if data is None or len(data) > POINTER_BYTES:
        return None
    text = data.decode("ascii", "replace").strip()
    return text if m.is_name(text) else None
