"""The one rule for accepting an entry, from the signatures that travel beside it (their
file format: signature_file.py).

Signed message: FORMAT, the cache KEY and the digest (seal/signing/digest.py: BLAKE3-256) and
length of the exact bytes. The verifier rebuilds the message from the key JAX asked for and
the bytes it is about to hand to JAX, so an entry moved to another key, changed, or truncated
cannot verify, whatever a signature file claims. The files' own fields serve only to say why a
check failed.

An entry has its first signature in `<entry>.sig` and may have co-signatures by other keys in
`<entry>.<key id>.sig` (tier_names.py), each the same document, each created only if absent. It is
valid when `needed` signatures by trusted keys that may count now (keyring.py: not revoked,
inside their validity) signed exactly its key, digest and length, and no two of them share a
holder in their words (below): one key's several signatures, and one holder's several keys
(the rotation window trusts the old and the new key of one publisher), count once. A reader
looks for co-signatures only where the first signature is not enough, and only under the
names of keys it trusts.

A co-signature made on the word of other keys (a rotation: `seal --add-signature`) names
them, `relies_on`, inside what it signs: revoking one of them revokes that co-signature too,
since a thief holding the revoked key could have signed what the co-signer then vouched for.
One made from the co-signer's own build (`--from DIR`) relies on nobody. A signature's word is
the holders (keyring.holder_of) of its key and of the keys it relies on, read from that
signature alone and the ring (a relied-on key the ring does not know could be anyone's, and
meets every word): the count is the most valid signatures no two of whose words meet
(_counted). So whatever other files say, are lost or damaged, and whichever keys are retired,
one holder's word counts once, and taking any signature or key away can only lower the count
(issue 39).

A signature may also claim when it was made (`signed_at`, under a second signature of its
own, `time_signature`): readers before it ignore both fields, so the format stays
jaxcache.seal/1. The claim is used only for keys marked trust_signing_time (keyring.py).

Likewise a signature may claim the build that compiled the entry (`build`, under
`build_signature`: signature_file.py). A claim that does not verify makes its signature BAD (a
writer of the cache edited it); a verified one is judged against the reader's own fingerprint before
the entry is read (build_claims.py's build_check: OTHER_BUILD is a miss). Stripping both fields
leaves a signature older readers made too: "build unknown", loaded unless the policy says
`require_build` (then BUILD_UNKNOWN, a miss).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import TypeAlias

from jaxcache.fingerprint.model import Fingerprint
from jaxcache.seal.signing import digest as digestmod
from jaxcache.seal.signing.signature_file import (
    SignatureDoc,
    claimed_build,
    message,
    read,
    time_message,
    verifies,
)
from jaxcache.text import safe
from jaxcache.trust.inputs.public_keys import KeyFileError, PublicKey
from jaxcache.trust.rules import keyring as ringmod
from jaxcache.trust.rules.identities import SeenIdentity
from jaxcache.trust.rules.keyring import EXPIRED as EXPIRED_KEY
from jaxcache.trust.rules.keyring import NOT_YET_VALID as NOT_YET_VALID_KEY
from jaxcache.trust.rules.keyring import REVOKED as REVOKED_KEY
from jaxcache.trust.rules.keyring import KeyRing


class Status(StrEnum):
    """What the rule says of an entry's signatures (the record's `rejections[].status`, verify's
    statuses): a closed set, each one word."""

    VALID = "valid"
    UNSIGNED = "unsigned"
    BAD = "bad-signature"
    UNKNOWN_KEY = "unknown-key"
    REVOKED = REVOKED_KEY  # the key ring's refusals of a key that signed (keyring.py)
    EXPIRED = EXPIRED_KEY
    NOT_YET_VALID = NOT_YET_VALID_KEY
    TOO_FEW = "too-few-signatures"
    # valid signatures, but of an entry this host must not load (build_claims.build_check)
    OTHER_BUILD = "other-build"
    BUILD_UNKNOWN = "build-unknown"


VALID, UNSIGNED, BAD, UNKNOWN_KEY = Status.VALID, Status.UNSIGNED, Status.BAD, Status.UNKNOWN_KEY
REVOKED, EXPIRED, NOT_YET_VALID = Status.REVOKED, Status.EXPIRED, Status.NOT_YET_VALID
TOO_FEW, OTHER_BUILD, BUILD_UNKNOWN = Status.TOO_FEW, Status.OTHER_BUILD, Status.BUILD_UNKNOWN
Fetch = Callable[[str], "bytes | None"]  # a trusted key's id -> its co-signature, if any
Trusted: TypeAlias = "KeyRing | list[PublicKey] | dict[bytes, PublicKey]"  # or plain keys
__all__ = ["BAD", "BUILD_UNKNOWN", "EXPIRED", "NOT_YET_VALID", "OTHER_BUILD", "REVOKED",
           "TOO_FEW", "UNKNOWN_KEY", "UNSIGNED", "VALID", "Status"]
# which reason a rejected entry is reported with, when its signatures fail differently
_WORST = (REVOKED, EXPIRED, NOT_YET_VALID, BAD, UNKNOWN_KEY)


@dataclass(frozen=True, slots=True)
class Check:
    status: Status
    reason: str
    key_id: str | None = None  # the key that signed it, when one is named
    signers: tuple[str, ...] = ()  # valid: the ids of the distinct keys counted
    # valid: each key that signed these bytes, with the keys its signature relies on (its
    # chain); a co-signer names them in what it signs
    lineage: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # the identities the keyless signatures judged were made by, as their verified
    # certificates state them (whatever their status: a rejection names who it saw)
    identities: tuple[SeenIdentity, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == VALID


@dataclass(frozen=True, slots=True)
class _Judged:
    """One signature file, judged before the entry is read: VALID when it verifies over the
    key, digest and size it states and its key may count now; else why not."""

    status: Status
    reason: str
    public: PublicKey | None = None  # the trusted key (with its name), else the one it names
    digest: bytes | None = None
    size: int | None = None
    raw: bytes | None = None
    doc: SignatureDoc | None = None
    relies: frozenset[str] = frozenset()  # a co-signature's chain: the keys it vouched on
    build: Fingerprint | None = None  # the build it claims compiled the entry (verified)
    seen: SeenIdentity | None = None  # keyless: who its verified certificate says signed


@dataclass(frozen=True, slots=True)
class Vouch:
    """What the signatures say before the entry is read: `size` is what `needed` distinct
    usable keys vouched for (None: rejected unread, `check` says why)."""

    check: Check
    size: int | None
    judged: tuple[_Judged, ...] = ()


def _signed_time(doc: SignatureDoc, known: PublicKey, key: str, digest: bytes, size: int
                 ) -> float | None:
    """The time the signature claims, if its own signature verifies (else None: no claim)."""
    at, tsig = doc.signed_at, doc.time_signature
    if at is None or tsig is None:
        return None
    try:
        moment = datetime.strptime(at, "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=UTC).timestamp()
        raw = base64.b64decode(tsig, validate=True)
    except ValueError:
        return None
    return moment if verifies(known, raw, time_message(key, digest, size, at)) else None


def _judge(key: str, sig: bytes, ring: KeyRing, named: str | None = None) -> _Judged:
    """One signature file (`named`: the key id a co-signature's file name gives)."""
    try:
        doc = read(sig)
    except (ValueError, KeyFileError) as exc:  # Unreadable and Invalid are ValueErrors
        # KeyFileError: a public key text that is no key (a planted file's, never the user's)
        return _Judged(BAD, f"unreadable signature file ({exc})")
    if doc.public is None:
        return _judge_identity(key, doc, ring, named)
    public, raw = doc.public, doc.signature
    if named is not None and public.id != named:
        return _Judged(BAD, f"the co-signature file of key {named} holds a signature by key "
                            f"{public.id}", public)
    if ring.is_revoked(public.raw):
        return _Judged(REVOKED, f"signed by key {public.id}, which the policy revokes", public)
    known = ring.get(public.raw)
    if known is None:
        return _Judged(UNKNOWN_KEY, f"signed by key {public.id}, which is not trusted", public)
    try:
        digest, size = bytes.fromhex(doc.digest), doc.size
    except ValueError as exc:
        return _Judged(BAD, f"unreadable signature file ({exc})", known)
    if size < 0:
        return _Judged(BAD, "unreadable signature file (a negative size)", known)
    relies = doc.relies_on
    if not verifies(known, raw, message(key, digest, size, relies)):
        why = (f"the signature is for another entry ({safe(doc.key[:90])}): moved or "
               "swapped" if doc.key != key else "the signature does not verify")
        return _Judged(BAD, why, known)
    gone = [i for i in relies or () if ring.revoked_id(i)]
    if gone:
        return _Judged(REVOKED, f"co-signed by {known.label} on the word of key {gone[0]}, "
                                "which the policy revokes", known)
    state = ring.unusable(known, _signed_time(doc, known, key, digest, size)
                          if known.signing_time else None)
    if state is not None:
        return _Judged(Status(state[0]), f"signed by {state[1]}", known)
    build, edited = claimed_build(doc, known, key, digest, size)
    if edited is not None:
        return _Judged(BAD, f"signed by {known.label}, but {edited}", known)
    return _Judged(VALID, f"signed by {known.holder or known.kind.word} {known.label}", known,
                   digest,
                   size, raw, doc, frozenset(relies or ()), build)


def _judge_identity(key: str, doc: SignatureDoc, ring: KeyRing, named: str | None
                    ) -> _Judged:
    """A keyless signature (keyless.py): its bundle verified offline against the policy's
    trusted root over exactly this key, digest, size (and build claim), its certificate's
    identity admitted by the policy's trusted identities as sigstore's own policies
    (identity_policy.py), which then say which one matched and whether a revoked one does
    (revocation wins). Validity is the certificate's at the log's (or timestamp authority's)
    time, which sigstore checks; the signer claims no time of its own."""
    from jaxcache.seal.signing import identity_policy, keyless
    from jaxcache.trust.inputs.public_keys import identity_signer

    try:
        digest, size = bytes.fromhex(doc.digest), doc.size
    except ValueError as exc:
        return _Judged(BAD, f"unreadable signature file ({exc})")
    if size < 0:
        return _Judged(BAD, "unreadable signature file (a negative size)")
    if not ring.identities:
        return _Judged(UNKNOWN_KEY, "signed keyless (by a CI identity), but the policy trusts "
                                    "no identity ([[trusted_identities]])")
    assert doc.bundle is not None
    signed = keyless.artifact(key, digest, size, doc.relies_on, doc.build)
    try:
        seen = keyless.verify(doc.bundle, signed, ring.trust_root, ring.identities)
    except keyless.Untrusted as exc:
        seen = exc.seen  # its certificate chained: what it claims is worth saying
    except keyless.KeylessError as exc:
        why = (f"the signature is for another entry ({safe(doc.key[:90])}): moved or "
               "swapped" if doc.key != key else f"its Sigstore bundle does not verify ({exc})")
        return _Judged(BAD, why)
    judged = identity_policy.judge(seen, ring.identities, ring.revoked_identities)
    if judged.standing is identity_policy.Standing.REVOKED:
        assert judged.identity is not None
        return _Judged(REVOKED, f"signed by identity {seen.text}, which the policy revokes "
                                f"({judged.identity.label})", seen=seen)
    trusted = judged.identity
    if trusted is None:
        return _Judged(UNKNOWN_KEY, f"signed by identity {seen.text}, which is not trusted "
                                    f"({judged.differs})", seen=seen)
    public = identity_signer(trusted)
    if named is not None and public.id != named:
        return _Judged(BAD, f"the co-signature file of {named} holds a signature by identity "
                            f"{seen.text}", public, seen=seen)
    gone = [i for i in doc.relies_on or () if ring.revoked_id(i)]
    if gone:
        return _Judged(REVOKED, f"co-signed by identity {trusted.label} on the word of key "
                                f"{gone[0]}, which the policy revokes", public, seen=seen)
    build, edited = claimed_build(doc, public, key, digest, size)
    if edited is not None:
        return _Judged(BAD, f"signed by identity {trusted.label}, but {edited}", public,
                       seen=seen)
    return _Judged(VALID, f"signed by identity {public.label} (job {seen.run_uri or '?'})",
                   public, digest, size, b"", doc, frozenset(doc.relies_on or ()), build, seen)


_ANYONE = "anyone"  # the holder of a relied-on key the ring does not know: it may be anyone's


def _word(j: _Judged, ring: KeyRing) -> frozenset[str]:
    """Whose word a valid signature is: the holder of its key and of each key it relies on
    (keyring.holder_of). A relied-on key the ring does not know (retired from trusted_keys,
    or never trusted) could be any holder's, so its word is _ANYONE's and meets every other."""
    assert j.public is not None
    relied = {ring.holder_by_id(i) for i in j.relies}
    return frozenset({ringmod.holder_of(j.public), *(
        h if h is not None else _ANYONE for h in relied)})


def _meet(a: frozenset[str], b: frozenset[str]) -> bool:
    return bool(a & b) or _ANYONE in a or _ANYONE in b


def _counted(valid: list[_Judged], ring: KeyRing) -> set[bytes]:
    """The keys that count among these valid signatures of one digest and size: the most
    signatures whose words share no holder, a signature's word being the holders of its own
    key and of the keys it relies on (its chain, under its own signature). One holder's word,
    whether it signed with several keys (a rotation trusts its old and new key at once) or
    was repeated by any number of co-signers, is one. Each word is read from its own signature
    and the ring, never from what other files say, and a key leaving the ring only widens the
    words that relied on it (to _ANYONE): losing a file or a key only takes candidates away or
    makes them meet more, so the count can only drop (issue 39: deduplicating against the
    signatures present made a lost one split a group into two; counting keys let one holder's
    two keys count twice)."""
    words: dict[frozenset[str], bytes] = {}
    for j in valid:
        if j.public:
            words.setdefault(_word(j, ring), j.public.raw)
    # a word that holds another meets all the smaller one meets: keep the smallest
    ordered = sorted(words, key=lambda w: (len(w), sorted(w)))
    minimal = [w for i, w in enumerate(ordered) if not any(o < w for o in ordered[:i])]
    best: list[frozenset[str]] = []

    def pack(chosen: list[frozenset[str]], rest: list[frozenset[str]]) -> None:
        """The largest set of words no two of which meet: at most one per trusted key (a
        reader fetches no more), each signed by a trusted key, so small."""
        nonlocal best
        if len(chosen) > len(best):
            best = chosen
        for i, w in enumerate(rest):
            if len(chosen) + len(rest) - i <= len(best):
                return
            pack([*chosen, w], [o for o in rest[i + 1:] if not _meet(o, w)])
    pack([], minimal)
    return {words[w] for w in best}


def _enough(judged: list[_Judged], ring: KeyRing) -> bool:
    return len(_counted([j for j in judged if j.status == VALID], ring)) >= ring.needed


def _gather(key: str, sig: bytes, ring: KeyRing, more: Fetch | None) -> tuple[_Judged, ...]:
    """The first signature judged and, where it is not enough, the co-signatures of each
    other trusted key (fetched by that key's id: a reader looks only for keys it trusts)."""
    judged = [_judge(key, sig, ring)]
    if more is None or _enough(judged, ring):
        return tuple(judged)
    seen = {j.public.raw for j in judged if j.public is not None}
    from jaxcache.trust.inputs.public_keys import identity_signer

    signers = [*ring.keys.values(), *(identity_signer(i) for i in ring.identities)]
    for k in signers:  # a trusted identity's co-signature is named by its id, as a key's
        if k.raw in seen:
            continue
        extra = more(k.id)
        if extra is not None:
            judged.append(_judge(key, extra, ring, named=k.id))
    return tuple(judged)


def _rejected(judged: tuple[_Judged, ...], ring: KeyRing, good: set[bytes],
              valid: list[_Judged] | tuple[_Judged, ...] = ()) -> Check:
    """The Check of an entry that too few usable keys vouch for (`valid`: the signatures
    `good` was counted from, to name those that only repeated a counted key's word)."""
    first = judged[0].public.id if judged and judged[0].public else None
    if good:
        labels = ", ".join(sorted({j.public.label for j in judged
                                   if j.public and j.public.raw in good and j.status == VALID}))
        again = sorted({j.public.label for j in valid if j.public and j.public.raw not in good})
        also = f"; {', '.join(again)} only repeated a word already counted (a holder in " \
            "common: the same holder's key, or a co-signature on its word)" if again else ""
        return Check(TOO_FEW, f"signed by {len(good)} distinct usable key(s) of as many holders "
                              f"({labels}){also}; the policy needs {ring.needed} holders",
                     first)
    for status in _WORST:
        for j in judged:
            if j.status == status:
                return Check(status, j.reason, j.public.id if j.public else first)
    return Check(UNSIGNED, "no signature file")


def vouch(key: str, sig: bytes | None, trusted: Trusted,
          more: Fetch | None = None) -> Vouch:
    """Before any byte of the entry is read: do usable keys of enough distinct holders sign
    this key with one digest and size? Then that size (trusted signers' word) bounds the
    read; else the Check that rejects the entry unread. A planted signature's size is never
    taken on its own word: a writer cannot make a reader read more than trusted keys vouched
    for (confirm still verifies the bytes read against the same messages)."""
    ring = _ring(trusted)
    if sig is None:
        return Vouch(Check(UNSIGNED, "no signature file"), None)
    judged = _gather(key, sig, ring, more)
    seen = _seen(judged)
    groups: dict[tuple[bytes, int], list[_Judged]] = {}
    for j in judged:
        if j.status == VALID and j.public and j.digest is not None and j.size is not None:
            groups.setdefault((j.digest, j.size), []).append(j)
    if groups:
        (digest, size), valid = max(groups.items(), key=lambda kv: len(_counted(kv[1], ring)))
        signers = _counted(valid, ring)
        if len(signers) >= ring.needed:
            lead = next(j for j in valid if j.public and j.public.raw in signers)
            return Vouch(Check(VALID, _signed_by(judged, signers), lead.public.id
                               if lead.public else None, _ids(judged, signers),
                               _lineage(valid), seen), size, tuple(valid))
        return Vouch(replace(_rejected(judged, ring, signers, valid), identities=seen), None,
                     judged)
    return Vouch(replace(_rejected(judged, ring, set()), identities=seen), None, judged)


def _seen(judged: tuple[_Judged, ...]) -> tuple[SeenIdentity, ...]:
    """The identities the keyless signatures among `judged` were made by (verified), once
    each."""
    out: list[SeenIdentity] = []
    for j in judged:
        if j.seen is not None and j.seen not in out:
            out.append(j.seen)
    return tuple(out)


def _lineage(valid: list[_Judged] | tuple[_Judged, ...]
             ) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return tuple(sorted({(j.public.id, tuple(sorted(j.relies))) for j in valid if j.public}))


def confirm(key: str, data: bytes, found: Vouch, trusted: Trusted
            ) -> Check:
    """After the read: accept `data` only if usable keys of enough distinct holders signed
    exactly this key and these bytes. `vouch` verified each signature over the key, the digest
    and the size its file states; the bytes just read must have exactly that digest and size.
    (A second Ed25519 verification over the same message could only agree: comparing the
    digest is the same judgement without ~60 µs per signature on every warm load.)"""
    ring = _ring(trusted)
    if found.size is None:
        return found.check
    digest = digestmod.of(data)
    valid = [j for j in found.judged
             if j.status == VALID and j.public and j.digest == digest and j.size == len(data)]
    good = _counted(valid, ring)
    if len(good) >= ring.needed:
        return Check(VALID, _signed_by(found.judged, good), found.check.key_id,
                     _ids(found.judged, good), _lineage(valid), found.check.identities)
    if good:
        return replace(_rejected(found.judged, ring, good, valid),
                       identities=found.check.identities)
    lead = next((j for j in found.judged if j.status == VALID and j.doc), None)
    reason = _why_not(lead.doc, key, digest, len(data)) if lead and lead.doc else \
        "the signature does not verify"
    return Check(BAD, reason, found.check.key_id, identities=found.check.identities)


def still_valid(key: str, found: Vouch, trusted: Trusted) -> Check:
    """For bytes confirmed earlier against `found` (a fetch ahead), at the moment they are
    loaded: do the signatures that counted still count by the ring's clock now (a key may have
    expired, or not be valid yet, since)? As vouch judges each key's usability, on the very
    signatures it judged: nothing read, verified or hashed again. VALID, or why not."""
    ring = _ring(trusted)
    if found.size is None:
        return found.check
    usable: list[_Judged] = []
    refused: Check | None = None
    for j in found.judged:
        if j.status != VALID or j.public is None:
            continue
        when = _signed_time(j.doc, j.public, key, j.digest, j.size) \
            if j.public.signing_time and j.doc is not None and j.digest is not None \
            and j.size is not None else None
        state = ring.unusable(j.public, when)
        if state is None:
            usable.append(j)
        elif refused is None:
            refused = Check(Status(state[0]), f"signed by {state[1]}", j.public.id)
    if len(_counted(usable, ring)) >= ring.needed:
        return found.check
    return refused or Check(TOO_FEW, "too few of its signatures count now", found.check.key_id)


def check(key: str, data: bytes, sig: bytes | None,
          trusted: Trusted, more: Fetch | None = None) -> Check:
    """Accept `data` for `key` only if enough usable keys signed exactly this key and these
    bytes (vouch, then confirm: the same rule, for a caller that already holds the bytes)."""
    ring = _ring(trusted)
    found = vouch(key, sig, ring, more)
    return found.check if found.size is None else confirm(key, data, found, ring)


def _signed_by(judged: tuple[_Judged, ...], signers: set[bytes]) -> str:
    seen: list[str] = []
    for j in judged:
        if j.status == VALID and j.public and j.public.raw in signers:
            text = f"{j.public.holder or j.public.kind.word} {j.public.label}"
            if text not in seen:
                seen.append(text)
    return "signed by " + " and ".join(seen)


def _ids(judged: tuple[_Judged, ...], signers: set[bytes]) -> tuple[str, ...]:
    return tuple(sorted({j.public.id for j in judged if j.public and j.public.raw in signers}))


def _ring(trusted: Trusted) -> KeyRing:
    if isinstance(trusted, dict):
        return ringmod.of(trusted.values())
    return ringmod.of(trusted)


def _why_not(doc: SignatureDoc, key: str, digest: bytes, size: int) -> str:
    if doc.key != key:
        return (f"the signature is for another entry ({safe(doc.key[:90])}): moved "
                "or swapped")
    signed = doc.size
    if size > signed:
        return f"the entry is longer than the {signed} bytes signed: changed"
    if signed != size:
        return f"the entry has {size} bytes, its signature says {signed}: truncated or changed"
    if doc.digest != digest.hex():
        return "the entry's bytes differ from what was signed"
    return "the signature does not verify"
