"""Read a generation: resolve a pointer to a generation's name, verify its manifest's signature
once against the reader's keys (the one rule entries are judged by: signature_rule.py, with
revocation, validity, signatures_needed and keyless identities), and check objects by digest.

The manifest's bytes are read bounded (manifest.MAX_BYTES) and judged by their signature
before any of them is parsed: an untrusted or revoked signer's manifest is refused unread. A
pointer is unsigned: it only chooses among signed generations (a writer of the store can point
it at an older one, never at bytes no trusted signer published; docs/how-to/generations.md).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum

from jaxcache.errors import JaxcacheError
from jaxcache.seal.generations import manifest as m
from jaxcache.seal.generations.publishing import POINTER_BYTES, UPLOADS
from jaxcache.seal.objects.object_store import ObjectStore, StoreError
from jaxcache.seal.publishing.tier_files import Rejected
from jaxcache.seal.signing.signature_doc import MAX_BYTES as SIGNATURE_BYTES
from jaxcache.seal.signing.signature_rule import Check, Trusted, check
from jaxcache.text import quoted, safe

NO_GENERATION, BAD_MANIFEST = "no-generation", "bad-manifest"
OTHER_POINTER = "other-pointer"  # signed for another pointer than the one followed


class Refused(JaxcacheError):
    """No generation may be read: no pointer, no manifest, a signature the reader's keys do not
    accept, a manifest that is none. One line; exit code 1 (a verdict, not bad input).
    `status`: NO_GENERATION, BAD_MANIFEST or the signature rule's status (a run record's
    rejections name it)."""

    exit_code = 1

    def __init__(self, message: str, status: str = NO_GENERATION) -> None:
        super().__init__(message)
        self.status = status


class ObjectStatus(StrEnum):
    """What an entry's object is, judged by the manifest that names it."""

    VALID = "valid"
    MISSING = "missing"
    WRONG_SIZE = "wrong-size"
    WRONG_DIGEST = "wrong-digest"
    UNREADABLE = "unreadable"


@dataclass(frozen=True, slots=True)
class Verified:
    """A generation whose manifest's signature the reader's keys accept."""

    manifest: m.Manifest
    signature: Check  # the rule's word (its signers, keyless identities)


@dataclass(frozen=True, slots=True)
class ObjectCheck:
    entry: m.Entry
    status: ObjectStatus
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Listed:
    """A generation or a pointer as the store lists it (unverified: names and sizes)."""

    name: str
    size: int
    age_s: float | None


@dataclass(frozen=True, slots=True)
class Inspected:
    """`verify --generation`'s answer: one generation verified, each object judged, and what
    else the store lists."""

    store: str
    pointer: str | None  # the pointer followed (None: the generation was named)
    generation: Verified
    objects: tuple[ObjectCheck, ...]
    generations: tuple[Listed, ...]
    pointers: dict[str, str | None]

    @property
    def ok(self) -> bool:
        return all(o.status is ObjectStatus.VALID for o in self.objects)


def store_at(where: str) -> ObjectStore:
    """The store generations live in: a bucket prefix (gs://, s3://) or a directory (that
    exists: JaxcacheError, one line, otherwise)."""
    from jaxcache.trust.rules import target

    if target.is_url(where):
        from jaxcache.seal.objects import store_for_url as objects

        return objects.open_store(target.parse_bucket(where))
    from jaxcache.seal.objects.directory_objects import GenerationDirectory

    try:
        return GenerationDirectory(where)
    except StoreError as exc:
        raise JaxcacheError(safe(exc.message)) from None


def pointed(store: ObjectStore, pointer: str) -> str:
    """The name of the generation `pointer` names; Refused when there is none."""
    data = store.get(m.pointer_object(pointer), POINTER_BYTES + 1)
    if data is None:
        raise Refused(f"{store.url} has no pointer {quoted(pointer, 70)}: nothing published "
                      "under it")
    text = data.decode("ascii", "replace").strip() if len(data) <= POINTER_BYTES else ""
    if not m.is_name(text):
        raise Refused(f"pointer {quoted(pointer, 70)} in {store.url} names no generation")
    return text


def load(store: ObjectStore, name: str, ring: Trusted, pointer: str | None = None
         ) -> Verified:
    """Generation `name`'s manifest, its signature verified once against `ring`; Refused,
    saying why, for anything short of that, or when `pointer` (the one followed to it) is
    not the one it was published for."""
    if not m.is_name(name):
        raise Refused(f"{quoted(name, 70)} is no generation's name")
    data = store.get(m.manifest_object(name), m.MAX_BYTES + 1)
    if data is None:
        raise Refused(f"{store.url} holds no generation {name}")
    if len(data) > m.MAX_BYTES:
        raise Refused(f"generation {name}: its manifest is larger than "
                      f"{m.MAX_BYTES >> 20} MiB: refused unread", BAD_MANIFEST)
    sig = store.get(m.signature_object(name), SIGNATURE_BYTES + 1)
    judged = check(m.signed_key(name), data, sig, ring)
    if not judged.ok:
        raise Refused(f"generation {name}: {judged.status.value}: {judged.reason}",
                      judged.status.value)
    try:
        found = m.Manifest.parse(data, name)
    except m.ManifestError as exc:  # signed, yet no manifest: its signer's mistake
        raise Refused(f"generation {name}: {exc}", BAD_MANIFEST) from None
    if pointer is not None and found.pointer != pointer:
        raise Refused(f"generation {name} was published for pointer {found.pointer}, not "
                      f"{pointer}: pointed at by a writer of the store", OTHER_POINTER)
    return Verified(found, judged)


def check_objects(store: ObjectStore, found: m.Manifest) -> tuple[ObjectCheck, ...]:
    """Each entry's object read (at most its size and a byte) and judged by its digest."""
    def one(entry: m.Entry) -> ObjectCheck:
        try:
            data = store.get(entry.object_name, entry.size + 1)
        except (StoreError, Rejected) as exc:
            return ObjectCheck(entry, ObjectStatus.UNREADABLE, str(exc))
        if data is None:
            return ObjectCheck(entry, ObjectStatus.MISSING, "no object holds its digest")
        if len(data) != entry.size:
            return ObjectCheck(entry, ObjectStatus.WRONG_SIZE,
                               f"{len(data)} bytes or more, not {entry.size}"
                               if len(data) > entry.size else
                               f"{len(data)} bytes, not {entry.size}")
        if not entry.holds(data):
            return ObjectCheck(entry, ObjectStatus.WRONG_DIGEST,
                               "its bytes are not the ones the manifest names")
        return ObjectCheck(entry, ObjectStatus.VALID)

    with ThreadPoolExecutor(UPLOADS) as pool:
        return tuple(pool.map(one, found.entries))


def listed(store: ObjectStore) -> tuple[tuple[Listed, ...], dict[str, str | None]]:
    """The generations the store lists (newest first) and what each pointer names (None: no
    generation's name), unverified: for showing, never for choosing what to load."""
    gens: list[Listed] = []
    for info in store.list(m.GENERATIONS):
        name = info.name[len(m.GENERATIONS):-len(".json")]
        if info.name.endswith(".json") and m.is_name(name):
            gens.append(Listed(name, info.size, info.age_s()))
    return tuple(sorted(gens, key=lambda g: g.name, reverse=True)), pointers(store)


def pointers(store: ObjectStore) -> dict[str, str | None]:
    """What each pointer of the store names (None: no generation's name), unverified."""
    found: dict[str, str | None] = {}
    for info in store.list(m.POINTERS):
        pointer = info.name[len(m.POINTERS):]
        if m.is_pointer(pointer):
            try:
                found[pointer] = pointed(store, pointer)
            except Refused:
                found[pointer] = None
    return found
