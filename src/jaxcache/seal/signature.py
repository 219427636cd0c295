"""The signature that travels beside an entry, and the one rule for accepting an entry.

Signed message: FORMAT, the cache KEY and the digest (seal/digest.py: BLAKE3-256) and
length of the exact bytes. The
verifier rebuilds the message from the key JAX asked for and the bytes it is about to hand
to JAX, so an entry moved to another key, changed, or truncated cannot verify, whatever the
signature file claims. The file's own fields serve only to say why a check failed.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

from jaxcache import validate as v
from jaxcache.display import safe
from jaxcache.seal import digest as digestmod
from jaxcache.seal.keys import KeyFileError, PublicKey, SigningKey, parse_public
from jaxcache.trust.entries import SIGNATURE_SUFFIX

FORMAT = "jaxcache.seal/1"
SUFFIX = SIGNATURE_SUFFIX  # <module>-<hex>-cache.sig beside <module>-<hex>-cache
MAX_BYTES = 4096

VALID, UNSIGNED, BAD, UNKNOWN_KEY = "valid", "unsigned", "bad-signature", "unknown-key"

# What a signature file must hold before any of it is used (the same validator as every
# document jaxcache reads back); a size is at most what an entry can be.
DOCUMENT = v.obj({"format": v.one_of(FORMAT), "key": v.TEXT, "digest": v.TEXT,
                  "size": v.INTEGER, "public_key": v.TEXT, "signature": v.TEXT})


@dataclass(frozen=True)
class Check:
    status: str  # valid | unsigned | bad-signature | unknown-key
    reason: str
    key_id: str | None = None  # the key that signed it, when one is named

    @property
    def ok(self) -> bool:
        return self.status == VALID


def message(key: str, digest: bytes, size: int) -> bytes:
    return b"\n".join((FORMAT.encode(), key.encode(), digest.hex().encode(), str(size).encode()))


def sign(key: str, data: bytes, signer: SigningKey) -> bytes:
    """The signature file's content for `data` stored under cache key `key`."""
    digest = digestmod.of(data)
    doc = {"format": FORMAT, "key": key, "digest": digest.hex(), "size": len(data),
           "public_key": signer.public.text,
           "signature": base64.b64encode(signer.sign(message(key, digest, len(data)))).decode()}
    return (json.dumps(doc, sort_keys=True) + "\n").encode()


def _signed(sig: bytes | None, trusted: dict[bytes, PublicKey]
            ) -> tuple[dict, PublicKey, PublicKey, bytes] | Check:
    """The signature file's fields, the key it names, the trusted key that is, and the raw
    signature; or the Check that rejects it before any verification (missing, unreadable,
    signed by a key nobody trusts)."""
    if sig is None:
        return Check(UNSIGNED, "no signature file")
    try:
        doc, public, raw = _fields(sig)
    except (ValueError, KeyFileError) as exc:  # Unreadable and Invalid are ValueErrors
        # KeyFileError: a public key text that is no key (a planted file's, never the user's)
        return Check(BAD, f"unreadable signature file ({exc})")
    known = trusted.get(public.raw)
    if known is None:
        return Check(UNKNOWN_KEY, f"signed by key {public.id}, which is not trusted", public.id)
    return doc, public, known, raw


def _fields(sig: bytes) -> tuple[dict, PublicKey, bytes]:
    """The checked document of a signature file, the key it names and the raw signature;
    ValueError or KeyFileError if it is none (too large, not JSON, a field missing or of
    the wrong type, no key)."""
    if len(sig) > MAX_BYTES:
        raise ValueError("too large")
    doc = v.parse_json(sig)
    DOCUMENT(doc, "")
    assert isinstance(doc, dict)
    return doc, parse_public(doc["public_key"]), base64.b64decode(doc["signature"],
                                                                  validate=True)


def _verifies(known: PublicKey, raw: bytes, signed: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature

    try:
        known.verifier().verify(raw, signed)
    except InvalidSignature:
        return False
    return True


def vouched_size(key: str, sig: bytes | None, trusted: dict[bytes, PublicKey]
                 ) -> tuple[Check, int | None]:
    """Before any byte of the entry is read: does a trusted key sign this key with the digest
    and size the signature file states? Then that size (a trusted signer's word) bounds the
    read; else the Check that rejects the entry unread. A planted signature's size is never
    taken on its own word: a writer cannot make a reader read more than a trusted key vouched
    for (check() still verifies the bytes read against the same message)."""
    parsed = _signed(sig, trusted)
    if isinstance(parsed, Check):
        return parsed, None
    doc, public, known, raw = parsed
    try:
        digest, size = bytes.fromhex(doc["digest"]), doc["size"]  # typed by DOCUMENT
    except ValueError as exc:
        return Check(BAD, f"unreadable signature file ({exc})", public.id), None
    if size < 0:
        return Check(BAD, "unreadable signature file (a negative size)", public.id), None
    if not _verifies(known, raw, message(key, digest, size)):
        why = (f"the signature is for another entry ({safe(str(doc.get('key'))[:90])}): moved or "
               "swapped" if doc.get("key") != key else "the signature does not verify")
        return Check(BAD, why, public.id), None
    return Check(VALID, f"signed by {known.holder or 'key'} {public.id}", public.id), size


def genuine(key: str, sig: bytes) -> bool:
    """Whether `sig` is somebody's real signature for `key`: it verifies under the key it
    names, over the key, digest and size it states. Says nothing of trust, only that a
    publisher made it (orphans.py: a rival's pending upload, not garbage)."""
    try:
        doc, public, raw = _fields(sig)
        digest, size = bytes.fromhex(doc["digest"]), doc["size"]
    except (ValueError, KeyFileError):
        return False
    return size >= 0 and _verifies(public, raw, message(key, digest, size))


def check(key: str, data: bytes, sig: bytes | None,
          trusted: dict[bytes, PublicKey]) -> Check:
    """Accept `data` for `key` only if a trusted key signed exactly this key and these bytes."""
    parsed = _signed(sig, trusted)
    if isinstance(parsed, Check):
        return parsed
    doc, public, known, raw = parsed
    digest = digestmod.of(data)
    if not _verifies(known, raw, message(key, digest, len(data))):
        return Check(BAD, _why_not(doc, key, digest, len(data)), public.id)
    return Check(VALID, f"signed by {known.holder or 'key'} {public.id}", public.id)


def _why_not(doc: dict, key: str, digest: bytes, size: int) -> str:
    if doc.get("key") != key:
        return (f"the signature is for another entry ({safe(str(doc.get('key'))[:90])}): moved "
                "or swapped")
    signed = doc.get("size")
    if isinstance(signed, int) and size > signed:
        return f"the entry is longer than the {signed} bytes signed: changed"
    if signed != size:
        return f"the entry has {size} bytes, its signature says {signed}: truncated or changed"
    if doc.get("digest") != digest.hex():
        return "the entry's bytes differ from what was signed"
    return "the signature does not verify"
