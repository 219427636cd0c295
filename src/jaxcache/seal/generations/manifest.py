"""A generation's manifest: the document that names every entry of a warmed cache (its cache key,
the BLAKE3-256 digest and size of its bytes, the build that compiled it), the pointer it was
published for, who published it, when, and from which source revision; and the names under
which a store keeps it all.

A store (a directory, gs://, s3://) holds, under its prefix:

    objects/<digest>                  an entry's bytes, named by their digest (shared by every
                                      generation that holds them: a republish uploads none)
    generations/<name>.json           a manifest (immutable: created only if absent)
    generations/<name>.json.sig       its signature (signature_file.py's format, over the
                                      manifest's bytes under the key `generation/<name>`)
    pointers/<pointer>                the name of the generation a pointer (`current`, a branch)
                                      names: one object, moved by a conditional write
    leases/publish-<name>             a publisher at work (its objects are not yet named by a
                                      manifest): gc deletes no object while one is fresh
    leases/gc                         a gc at work: a publisher waits for it to end

The manifest is read once, bounded (MAX_BYTES), and is valid only in its canonical form (its
own bytes are what `to_bytes` writes of what they parse to): two readers, or a reader and a
reviewer, can never see two meanings in one signed document. Nothing here verifies a
signature: reading.py does, with the one rule entries are judged by (signature_rule.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from jaxcache import validate as v
from jaxcache.seal.signing import digest as digestmod
from jaxcache.text import quoted
from jaxcache.trust.kernel.entries import classify

FORMAT = "jaxcache.generation/1"
# 2,000 entries take ~0.4 MB; a cache of 100,000 about 20 MB: far below, and read once
MAX_BYTES = 64 << 20
MAX_ENTRY_BYTES = 1 << 36  # a size past this is no compiled program's
OBJECTS, GENERATIONS, POINTERS, LEASES = "objects/", "generations/", "pointers/", "leases/"
GC_LEASE = LEASES + "gc"
PUBLISH_LEASE = LEASES + "publish-"
# how long a lease holds: a publisher that has not moved its pointer by then gives up, and a
# lease older than this is a killed process's (gc then deletes it); objects and manifests
# younger than this are never collected
LEASE_S = 3600.0
SIGNED_PREFIX = "generation/"  # the key a manifest is signed under: never a cache key's shape
ENTRY_SUFFIX = "-cache"  # JAX's file for cache key K is K-cache (jaxcompat/guard.py)
DEFAULT_POINTER = "current"

# 20261207T221500.123Z-1a2b3c4d: when it was made, to the millisecond (names sort by age), and
# 8 random hex digits (two publishers in one millisecond never share one)
_NAME = re.compile(r"[0-9]{8}T[0-9]{6}\.[0-9]{3}Z-[0-9a-f]{8}")
_POINTER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_DIGEST = re.compile(r"[0-9a-f]{64}")
_BUILD = re.compile(r"[0-9a-f]{16,128}")

_ENTRY = v.obj({"key": v.TEXT, "digest": v.TEXT, "size": v.INTEGER,
                "build": v.nullable(v.TEXT)})
_DOCUMENT = v.obj({"format": v.one_of(FORMAT), "name": v.TEXT, "pointer": v.TEXT,
                   "created": v.TEXT, "publisher": v.TEXT, "revision": v.nullable(v.TEXT),
                   "entries": v.list_of(_ENTRY)})


class ManifestError(ValueError):
    """The bytes are no manifest this reader may use; the message is one line, safe to print."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a generation: the cache key JAX asks for and what its bytes must be."""

    key: str
    digest: str  # BLAKE3-256 of the bytes, hex
    size: int
    build: str | None  # the digest of the build that compiled it (fingerprint.py), if known

    @property
    def object_name(self) -> str:
        return OBJECTS + self.digest

    def holds(self, data: bytes) -> bool:
        """`data` is this entry's bytes: its size, and its digest."""
        return len(data) == self.size and digestmod.of(data).hex() == self.digest


@dataclass(frozen=True, slots=True)
class Manifest:
    """A generation as its publisher signed it (a claim until reading.py has verified it)."""

    name: str
    # the pointer it was published for: a reader following another refuses it (a writer of
    # the store pointing `main` at what was published for a branch)
    pointer: str
    created: str  # RFC 3339, UTC, to the second
    publisher: str  # the signer as the publisher named it (a key id, or the CI identity)
    revision: str | None  # the source revision CI built it from, when CI said
    entries: tuple[Entry, ...]

    @property
    def size(self) -> int:
        return sum(e.size for e in self.entries)

    def to_bytes(self) -> bytes:
        """Its one form: sorted keys, no spaces, ASCII only."""
        doc = {"format": FORMAT, "name": self.name, "pointer": self.pointer,
               "created": self.created,
               "publisher": self.publisher, "revision": self.revision,
               "entries": [{"key": e.key, "digest": e.digest, "size": e.size,
                            "build": e.build} for e in self.entries]}
        return json.dumps(doc, sort_keys=True, separators=(",", ":"),
                          ensure_ascii=True).encode()

    @classmethod
    def parse(cls, data: bytes, name: str) -> Manifest:
        """The manifest of generation `name` from its bytes, or ManifestError (too large, not
        JSON, not in its canonical form, another generation's, an entry named twice or whose
        key, digest or size is not one)."""
        if len(data) > MAX_BYTES:
            raise ManifestError(f"the manifest is larger than {MAX_BYTES >> 20} MiB")
        try:
            doc = v.parse_json(data)
            _DOCUMENT(doc, "")
        except ValueError as exc:  # Unreadable, Invalid
            raise ManifestError(f"the manifest is not one: {exc}") from None
        assert isinstance(doc, dict)
        if doc["name"] != name:
            raise ManifestError(f"the manifest names generation {quoted(doc['name'], 40)}, "
                                f"not {name}: moved from another name")
        if not is_pointer(doc["pointer"]):
            raise ManifestError("the manifest's pointer is no pointer name")
        entries = tuple(_entry(e, i) for i, e in enumerate(doc["entries"]))
        keys = set()
        for e in entries:
            if e.key in keys:
                raise ManifestError(f"the manifest names cache key {quoted(e.key, 90)} twice")
            keys.add(e.key)
        found = cls(name, doc["pointer"], doc["created"], doc["publisher"], doc["revision"],
                    entries)
        if found.to_bytes() != data:
            raise ManifestError("the manifest is not in its canonical form (sorted keys, no "
                                "spaces, no field twice, no field of its own)")
        return found


def _entry(doc: dict[str, object], at: int) -> Entry:
    key, digest, size, build = doc["key"], doc["digest"], doc["size"], doc["build"]
    assert isinstance(key, str) and isinstance(digest, str) and isinstance(size, int)
    if not is_cache_key(key):
        raise ManifestError(f"entries[{at}].key {quoted(key, 90)} is no cache key")
    if not _DIGEST.fullmatch(digest):
        raise ManifestError(f"entries[{at}].digest is no BLAKE3-256 digest (64 hex digits)")
    if not 0 <= size <= MAX_ENTRY_BYTES:
        raise ManifestError(f"entries[{at}].size {size} is no entry's size")
    if build is not None and not (isinstance(build, str) and _BUILD.fullmatch(build)):
        raise ManifestError(f"entries[{at}].build is no build digest")
    return Entry(key, digest, size, build if isinstance(build, str) else None)


def is_cache_key(key: str) -> bool:
    """A key JAX names an entry by (`<module>-<64 hex>`), whose file is one name in a folder."""
    name = key + ENTRY_SUFFIX
    return "/" not in key and "\0" not in key and len(name.encode("utf-8", "surrogateescape")) \
        <= 255 and classify(name)[0] == "cache"


def is_name(text: str) -> bool:
    return bool(_NAME.fullmatch(text))


def is_pointer(text: str) -> bool:
    return bool(_POINTER.fullmatch(text))


def not_a_pointer(given: str) -> str:
    """Why `given` (as the user wrote it) is refused as a pointer's name: one line."""
    return (f"{quoted(given, 70)} is no pointer name (letters, digits, '.', '_' and '-', at "
            "most 64, starting with a letter or digit)")


def manifest_object(name: str) -> str:
    return f"{GENERATIONS}{name}.json"


def signature_object(name: str) -> str:
    return f"{GENERATIONS}{name}.json.sig"


def pointer_object(pointer: str) -> str:
    return POINTERS + pointer


def signed_key(name: str) -> str:
    """What a manifest's signature names as its key: the generation's name, so a signature
    moved to another generation does not verify, and no entry's signature is one."""
    return SIGNED_PREFIX + name
