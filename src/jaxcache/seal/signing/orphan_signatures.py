"""A signature whose entry never came: what a publisher may do about it, one rule for the
sealed directory and the bucket.

A publisher creates the signature and then the entry, each create-only, so the first writer
wins and no reader ever finds an entry without its signature. Killed between the two, it
leaves a signature with no entry; every later publisher's create-only signature then fails,
and every reader recompiles that module on every run. So a publisher that finds a signature
and no entry judges the signature (read bounded, as a reader would):

- COMPLETE: it is a trusted key's signature of exactly these bytes (this publisher's own
  earlier upload, or a rival's of the same compile): upload the entry, create-only;
- REPLACE: it is no signature at all (unreadable, or it does not verify under the key it
  names), or a genuine one older than ORPHAN_AFTER_S (its publisher is gone: no upload of one
  entry takes an hour): replace it, only if it is still the very object judged (a compare
  and swap: a rival's newer signature is never lost), then upload the entry;
- WAIT: a genuine, recent signature of other bytes: a rival publisher may still be uploading
  its entry; first writer wins, so this one writes nothing.

A complete entry (entry and signature both there) is never touched: first writer wins.
"""

from __future__ import annotations

from jaxcache.seal.signing import signature_file as sigfile
from jaxcache.seal.signing import signature_rule as signature
from jaxcache.trust.inputs.public_keys import PublicKey
from jaxcache.trust.rules import keyring
from jaxcache.trust.rules.keyring import KeyRing

COMPLETE, REPLACE, WAIT = "complete", "replace", "wait"
ORPHAN_AFTER_S = 3600.0


def judge(key: str, value: bytes, existing: bytes | None,
          trusted: KeyRing | dict[bytes, PublicKey], age_s: float | None) -> str:
    """What to do about the signature `existing` (None: gone meanwhile) found for `key` with
    no entry beside it, when this publisher holds `value`; `age_s` is how long ago it was
    written (None: unknown, never taken as old)."""
    if existing is None:
        return REPLACE  # nothing left to judge: the create-only upload decides again
    ring = keyring.of(trusted.values() if isinstance(trusted, dict) else trusted).single()
    if sigfile.is_cosignature(existing):
        return REPLACE  # a co-signature copied over the first signature's name: not one
    if signature.check(key, value, existing, ring).ok:
        return COMPLETE
    if not sigfile.genuine(key, existing):
        return REPLACE
    if age_s is not None and age_s > ORPHAN_AFTER_S:
        return REPLACE
    return WAIT
