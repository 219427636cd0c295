"""A signature file, the document beside an entry: its format and how it is written (how it is
read: signature_doc.py, the one parse).

`<entry>.sig` (and a co-signature `<entry>.<key id>.sig`) holds one JSON document: FORMAT, the
cache key, the BLAKE3-256 digest (seal/signing/digest.py) and size of the exact bytes, the signer's
public key and its Ed25519 signature over `message(...)`; optionally when it was made (under a
second signature, TIME_FORMAT), for a co-signature made on other keys' word, `relies_on`, and
the build that compiled the entry (`build`, a compact fingerprint: BUILD_FORMAT, under its own
signature `build_signature`). The optional pairs stay outside the primary message, so readers
before them (format jaxcache.seal/1, which accepts fields it does not know) still verify the
file; stripping a pair leaves a signature without that claim (for the build: "build unknown").
Nothing here decides whether an entry is accepted: that is signature_rule.py's one rule. What a
file claims (`claimed_signer`, `genuine`) is a claim until that rule has judged it.
"""

from __future__ import annotations

import base64
import json
import time

from jaxcache import validate as v
from jaxcache.fingerprint.model import SCHEMA, Fingerprint
from jaxcache.seal.signing import digest as digestmod
from jaxcache.seal.signing.signature_doc import (
    DOCUMENT,
    FORMAT,
    KEY_DOC_BYTES,
    MAX_BYTES,
    SignatureDoc,
)
from jaxcache.trust.inputs.public_keys import KeyFileError, PublicKey
from jaxcache.trust.inputs.signing_keys import SigningKey
from jaxcache.trust.kernel.entries import SIGNATURE_SUFFIX
from jaxcache.trust.rules import keyring as ringmod

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeAlias

    from jaxcache.seal.signing.keyless import KeylessSigner

    Signer: TypeAlias = "SigningKey | KeylessSigner"  # a key (file or HSM) or the job's identity

__all__ = ["BUILD_FORMAT", "DOCUMENT", "FORMAT", "KEY_DOC_BYTES", "MAX_BYTES", "SUFFIX",
           "TIME_FORMAT", "SignatureDoc", "build_claim", "build_message", "canonical",
           "claimed_build", "claimed_signer", "genuine", "is_cosignature", "message", "read",
           "sign", "time_message", "verifies"]

TIME_FORMAT = "jaxcache.seal-time/1"
BUILD_FORMAT = "jaxcache.seal-build/1"
SUFFIX = SIGNATURE_SUFFIX  # <module>-<hex>-cache.sig beside <module>-<hex>-cache


def _key_bytes(key: str) -> bytes:
    """The cache key as signed: JAX's keys are text; a name that is not (a planted entry's
    undecodable bytes) is signed as its raw bytes, so it can never crash a check."""
    return key.encode("utf-8", "surrogateescape")


def message(key: str, digest: bytes, size: int, relies_on: tuple[str, ...] | None = None
            ) -> bytes:
    signed = b"\n".join((FORMAT.encode(), _key_bytes(key), digest.hex().encode(),
                         str(size).encode()))
    if relies_on is not None:  # a co-signature on the word of these keys
        signed += b"\nrelies-on " + ",".join(relies_on).encode()
    return signed


def time_message(key: str, digest: bytes, size: int, signed_at: str) -> bytes:
    return b"\n".join((TIME_FORMAT.encode(), _key_bytes(key), digest.hex().encode(),
                       str(size).encode(), signed_at.encode()))


def canonical(claim: object) -> bytes:
    """The build claim as signed: its JSON with sorted keys, no spaces, ASCII only (the
    reader rebuilds it from the document it parsed, so the file's spacing does not matter)."""
    return json.dumps(claim, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True).encode()


def build_message(key: str, digest: bytes, size: int, claim: object) -> bytes:
    """What `build_signature` signs: the claim bound to this key, digest and size (a claim
    moved to another entry does not verify there)."""
    return b"\n".join((BUILD_FORMAT.encode(), _key_bytes(key), digest.hex().encode(),
                       str(size).encode(), canonical(claim)))


def build_claim(found: Fingerprint, room: int) -> dict[str, object] | None:
    """The compact claim of `found` that fits in `room` bytes of the signature file: the
    build digest, the machine and the CPU features always (what the rule judges), the
    versions, the CPU's vendor and model and the accelerator while they fit (shown, or
    judged only where both sides know them). None: no build to claim, or no room even for
    what is judged (the signature then says nothing of its build: "build unknown")."""
    if found.build is None:
        return None
    features = " ".join(sorted(found.cpu.features))
    accel = found.accelerator.to_json() if found.accelerator else None
    full: dict[str, object] = {
        "schema": SCHEMA, "build": {"digest": found.build.digest,
                                    "versions": dict(found.build.versions)},
        "machine": found.machine, "cpu": found.cpu.to_json(), "accelerator": accel}
    lean: dict[str, object] = {
        "schema": SCHEMA, "build": {"digest": found.build.digest}, "machine": found.machine,
        "cpu": {"vendor": "", "model": "", "features": features}}
    for claim in (full, {**full, "accelerator": None}, lean):
        if len(json.dumps(claim, sort_keys=True)) <= room:
            return claim
    return None


def sign(key: str, data: bytes, signer: Signer, now: float | None = None,
         relies_on: tuple[str, ...] | None = None, build: Fingerprint | None = None) -> bytes:
    """The signature file's content for `data` stored under cache key `key`; `relies_on`:
    a co-signature's keys whose signatures it vouches on (sorted ids; () for none);
    `build`: the fingerprint of the build that compiled `data` (the publisher's own), claimed
    under its own signature so a reader can refuse another build's entry unread."""
    if not isinstance(signer, SigningKey):  # keyless: the job's identity (keyless.py)
        return signer.document(key, data, relies_on, build)
    digest = digestmod.of(data)
    at = ringmod.when(time.time() if now is None else now)
    ids = tuple(sorted(relies_on)) if relies_on is not None else None
    doc = {"format": FORMAT, "key": key, "digest": digest.hex(), "size": len(data),
           "public_key": signer.public.text,
           "signature": base64.b64encode(signer.sign(message(key, digest, len(data),
                                                             ids))).decode(),
           "signed_at": at,
           "time_signature": base64.b64encode(signer.sign(
               time_message(key, digest, len(data), at))).decode()}
    if ids is not None:
        doc["relies_on"] = list(ids)
    if build is not None:
        # what is left for the claim once the rest (and its own signature's field) is written
        room = KEY_DOC_BYTES - len(json.dumps(doc, sort_keys=True)) - len(
            ', "build": , "build_signature": ""') - 88 - 1
        claim = build_claim(build, room)
        if claim is not None:
            doc["build"] = claim
            doc["build_signature"] = base64.b64encode(signer.sign(
                build_message(key, digest, len(data), claim))).decode()
    return (json.dumps(doc, sort_keys=True) + "\n").encode()


def read(sig: bytes) -> SignatureDoc:
    """The checked document of a signature file; ValueError or KeyFileError if it is none
    (too large, not JSON, a field missing or of the wrong type, no key)."""
    return SignatureDoc.parse(sig)


def claimed_build(doc: SignatureDoc, signer: PublicKey, key: str, digest: bytes, size: int
                  ) -> tuple[Fingerprint | None, str | None]:
    """The build a signature claims, verified under `signer` over this key, digest and size:
    (the claim, None); (None, None) where it makes none (an older signature, or one stripped
    of both fields); (None, why) where the claim is there but is no signer's word (one field
    without the other, a claim edited after signing, one that is no fingerprint)."""
    claim, raw = doc.build, doc.build_signature
    if doc.bundle is not None:  # keyless: the bundle signs the claim (keyless.artifact)
        return _keyless_build(claim)
    if claim is None and raw is None:
        return None, None
    if claim is None or raw is None:
        return None, ("its build claim is half there (build and build_signature go together): "
                      "edited after signing")
    try:
        signed = base64.b64decode(raw, validate=True)
    except ValueError:
        return None, "its build signature is not base64: edited after signing"
    if not verifies(signer, signed, build_message(key, digest, size, claim)):
        return None, ("its build claim does not verify: edited after signing (by a writer of "
                      "the cache, not the key's holder)")
    try:
        return Fingerprint.from_json(claim, "build"), None
    except v.Invalid as exc:
        return None, f"its build claim is no fingerprint ({exc})"


def _keyless_build(claim: dict[str, object] | None) -> tuple[Fingerprint | None, str | None]:
    """A keyless signature's build claim: verified with the bundle (which signs it with the
    rest), so only its shape is judged here."""
    if claim is None:
        return None, None
    try:
        return Fingerprint.from_json(claim, "build"), None
    except v.Invalid as exc:
        return None, f"its build claim is no fingerprint ({exc})"


def verifies(known: PublicKey, raw: bytes, signed: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature

    try:
        known.verifier().verify(raw, signed)
    except InvalidSignature:
        return False
    return True


def is_cosignature(sig: bytes) -> bool:
    """A signature made on other keys' word (relies_on): never a first signature
    (orphan_signatures.py: one copied over `<entry>.sig` would leave an entry older readers never
    verify)."""
    try:
        return read(sig).relies_on is not None
    except (ValueError, KeyFileError):
        return False


def claimed_signer(sig: bytes) -> PublicKey | None:
    """The key a signature file names (unverified: `ls` shows it; verify checks it)."""
    try:
        return read(sig).public  # None for a keyless one: its identity is the bundle's
    except (ValueError, KeyFileError):
        return None


def genuine(key: str, sig: bytes) -> bool:
    """Whether `sig` is somebody's real signature for `key`: it verifies under the key it
    names, over the key, digest and size it states. Says nothing of trust, only that a
    publisher made it (orphan_signatures.py: a rival's pending upload, not garbage)."""
    try:
        doc = read(sig)
        digest, size = bytes.fromhex(doc.digest), doc.size
    except (ValueError, KeyFileError):
        return False
    if doc.public is None:  # keyless: taken as a rival's upload while it names this key
        return size >= 0 and doc.key == key  # (judging it needs the trusted root: the rule)
    return size >= 0 and verifies(doc.public, doc.signature,
                                  message(key, digest, size, doc.relies_on))
