"""The keys a sealed reader trusts, as the policy states them at this moment.

A key alone is not enough to judge a signature: the policy may revoke it (`revoked_keys`),
bound when it is trusted (`not_before` / `not_after`) and ask for several distinct holders per
entry (`signatures_needed`, as Nix's `--sigs-needed` and TUF's thresholds). The ring holds
all of that, and says of one key whether it may count now and whose word it is (holder_of):
one holder's several keys (a rotation trusts the old and the new at once) are one approval.

Time is the reader's clock: `not_after` rejects from that moment on, whatever a signature
claims, because a thief holding the key can sign any time claim. Only a key marked
`trust_signing_time` accepts, after its `not_after`, signatures whose signed time claim falls
inside its window: that is exactly as good as the key's holder, and says nothing after a leak.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from jaxcache.errors import JaxcacheError
from jaxcache.text import safe

TYPE_CHECKING = False  # PublicKey is inputs/public_keys.py's, above (its loader audits)
if TYPE_CHECKING:
    from jaxcache.trust.inputs.public_keys import PublicKey
    from jaxcache.trust.rules.identities import TrustedIdentity
    from jaxcache.trust.rules.policy_rules import Rule

REVOKED, EXPIRED, NOT_YET_VALID = "revoked-key", "expired-key", "not-yet-valid-key"
EXPIRING_S = 30 * 86400.0  # audit --sealed warns of keys that expire within 30 days


class KeyRingError(JaxcacheError):
    """Trusted keys that contradict themselves (a revoked key also trusted, a threshold no
    set of the keys can meet)."""


def key_id(raw: bytes) -> str:
    """A public key's id (keys.PublicKey.id) from its raw bytes: revocations name keys by it."""
    return hashlib.sha256(raw).hexdigest()[:16]


def holder_of(key: PublicKey) -> str:
    """Whose word a key's signatures are: its declared holder; a key with none (given by the
    caller: --trusted-key, trusted_keys=) is its own holder, distinct from every other. A
    trusted identity (a keyless signer) likewise: every job of one identity is one word."""
    return f"holder {key.holder}" if key.holder is not None else f"{key.kind.word} {key.id}"


def when(seconds: float) -> str:
    """RFC 3339 in UTC, to the second: how reports and signatures write a moment."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class KeyState:
    """One trusted key as reports show it: by name and id, with its state now."""

    id: str
    name: str | None
    holder: str | None
    state: str  # trusted | expiring | expired | not-yet-valid
    not_before: str | None = None  # RFC 3339, UTC
    not_after: str | None = None

    @property
    def label(self) -> str:
        return f"{self.name} ({self.id})" if self.name else self.id


@dataclass(frozen=True)
class KeyRing:
    keys: Mapping[bytes, PublicKey]  # trusted, by raw public key
    revoked: frozenset[bytes] = frozenset()  # raw public keys the policy revokes
    revoked_ids: frozenset[str] = frozenset()  # or their ids, where only the id was given
    needed: int = 1  # distinct holders whose usable keys must sign an entry
    clock: Callable[[], float] = field(default=time.time, compare=False)
    # keyless signers (trust/rules/identities.py): trusted and revoked CI identities, and the
    # Sigstore trusted root their signatures are verified against (None: the public-good one)
    identities: tuple[TrustedIdentity, ...] = ()
    revoked_identities: tuple[TrustedIdentity, ...] = ()
    trust_root: str | None = None

    def __post_init__(self) -> None:
        both = [k for k in self.keys.values() if self.is_revoked(k.raw)]
        if both:
            raise KeyRingError(f"key {safe(both[0].label)} is both trusted and revoked: remove "
                               "it from trusted_keys (revocation wins, but say which you mean)")
        twice = [i for i in self.identities if i in self.revoked_identities]
        if twice:
            raise KeyRingError(f"identity {safe(twice[0].label)} is both trusted and revoked: "
                               "remove it from trusted_identities")
        if self.needed < 1:
            raise KeyRingError(f"signatures_needed must be 1 or more, not {self.needed}")
        holders = {holder_of(k) for k in self.keys.values()} | {
            i.holder_word for i in self.identities}
        signers = len(self.keys) + len(self.identities)
        if signers and self.needed > len(holders):
            raise KeyRingError(
                f"signatures_needed = {self.needed}, but the {signers} trusted key(s) and "
                f"identities have {len(holders)} distinct holder(s) "
                f"({safe(', '.join(sorted(holders)))}): one holder's keys count once, so no "
                "entry could ever verify (trust a key of another holder, or lower "
                "signatures_needed)")

    def __bool__(self) -> bool:
        return bool(self.keys) or bool(self.identities)

    def __len__(self) -> int:
        return len(self.keys) + len(self.identities)

    def with_identity(self, identity: TrustedIdentity) -> KeyRing:
        """Also trusting `identity` (a keyless publisher trusts what its job signs); the
        policy's revoked identities still apply to every signature judged."""
        if identity in self.identities or identity in self.revoked_identities:
            return self  # revocation wins: a revoked publisher trusts nothing of its own
        from dataclasses import replace

        return replace(self, identities=(*self.identities, identity))

    def get(self, raw: bytes) -> PublicKey | None:
        return self.keys.get(raw)

    def holder_by_id(self, wanted: str) -> str | None:
        """The holder (holder_of) of the trusted key with this id (a co-signature names the
        keys it relies on by id), or None: a key this ring does not know, whose holder could
        be anyone's."""
        return next((holder_of(k) for k in self.keys.values() if k.id == wanted), None)

    def is_revoked(self, raw: bytes) -> bool:
        return raw in self.revoked or (bool(self.revoked_ids) and
                                       key_id(raw) in self.revoked_ids)

    def revoked_id(self, wanted: str) -> bool:
        """Whether the key with this id is revoked (a co-signature names keys by id)."""
        return wanted in self.revoked_ids or any(key_id(r) == wanted for r in self.revoked)

    def unusable(self, key: PublicKey, signed_at: float | None = None
                 ) -> tuple[str, str] | None:
        """Why a trusted key may not count now (status, reason), or None. `signed_at`: the
        time the signature claims, under its own signature; used only by a key marked
        trust_signing_time, after its not_after."""
        now = self.clock()
        if key.not_before is not None and now < key.not_before:
            return NOT_YET_VALID, (f"key {key.label} is trusted only from "
                                   f"{when(key.not_before)}")
        if key.not_after is not None and now >= key.not_after:
            if key.signing_time and signed_at is not None and signed_at < key.not_after and (
                    key.not_before is None or signed_at >= key.not_before):
                return None
            return EXPIRED, f"key {key.label} expired at {when(key.not_after)}"
        return None

    def state(self, key: PublicKey) -> str:
        """trusted | expiring (within 30 days) | expired | not-yet-valid | revoked: what
        audit --sealed, verify and the run record say of each key."""
        if self.is_revoked(key.raw):
            return "revoked"
        why = self.unusable(key)
        if why is not None:
            return "expired" if why[0] == EXPIRED else "not-yet-valid"
        if key.not_after is not None and key.not_after - self.clock() < EXPIRING_S:
            return "expiring"
        return "trusted"

    def states(self) -> tuple[KeyState, ...]:
        return tuple(KeyState(k.id, k.name, k.holder, self.state(k),
                              when(k.not_before) if k.not_before is not None else None,
                              when(k.not_after) if k.not_after is not None else None)
                     for k in self.keys.values())

    def usable(self) -> list[PublicKey]:
        return [k for k in self.keys.values() if self.unusable(k) is None]

    def single(self) -> KeyRing:
        """The same keys, one signature enough (a publisher's own check of what it wrote)."""
        return self.restricted(self.keys, 1)

    def restricted(self, keys: Mapping[bytes, PublicKey], needed: int) -> KeyRing:
        """These revocations and clock over `keys`, `needed` of them (a co-signer's view)."""
        return KeyRing(keys, self.revoked, self.revoked_ids, needed, self.clock,
                       self.identities, self.revoked_identities, self.trust_root)

    def with_key(self, key: PublicKey) -> KeyRing:
        """Also trusting `key` (a publisher trusts what it signs), unless the policy revokes
        it: then one line, since publishing with it would only make readers recompile."""
        if self.is_revoked(key.raw):
            raise KeyRingError(f"the signing key {safe(key.label)} is revoked by the policy: "
                               "sign with a new key (jaxcache keygen --name ...)")
        known = self.keys.get(key.raw)
        if known is not None:
            state = self.unusable(known)
            if state is not None:
                raise KeyRingError(f"cannot sign with {safe(known.label)}: {state[1]}; readers "
                                   "would reject its signatures (sign with a current key)")
            return self
        return self.restricted({**self.keys, key.raw: key}, self.needed)


def of(trusted: KeyRing | Iterable[PublicKey]) -> KeyRing:
    """A ring from a ring or from plain keys (a caller that knows no policy state)."""
    if isinstance(trusted, KeyRing):
        return trusted
    return KeyRing({k.raw: k for k in trusted})


def for_rule(rule: Rule, extra: Iterable[PublicKey] = ()) -> KeyRing:
    """The ring of a policy rule (trusted_keys, revoked_keys, signatures_needed, the trusted
    and revoked identities, the Sigstore trust root) plus keys the caller gives
    (--trusted-key): a given key the policy revokes is refused (KeyRingError), not silently
    dropped."""
    from dataclasses import replace

    revoked = rule.revoked_keys
    raws = frozenset(r for r in revoked if isinstance(r, bytes))
    ids = frozenset(r for r in revoked if isinstance(r, str))
    probe = KeyRing({}, raws, ids)
    keys: dict[bytes, PublicKey] = {}
    for k in rule.trusted_keys:
        seen = keys.get(k.raw)
        # listed twice (the top level and a path, or one list): the stricter of both
        keys[k.raw] = k if seen is None else replace(
            seen, not_before=_latest(seen.not_before, k.not_before),
            not_after=_earliest(seen.not_after, k.not_after),
            signing_time=seen.signing_time and k.signing_time, name=seen.name or k.name)
    for k in extra:  # given by the caller: the policy's word on the same key wins
        if probe.is_revoked(k.raw):
            raise KeyRingError(f"key {safe(k.label)} (given as --trusted-key, trusted_keys=, "
                               "or as the signing key) is revoked by the policy")
        keys.setdefault(k.raw, k)
    return KeyRing(keys, raws, ids, rule.signatures_needed or 1,
                   identities=tuple(rule.trusted_identities),
                   revoked_identities=tuple(rule.revoked_identities),
                   trust_root=rule.sigstore_trust_root)


def _latest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def _earliest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)
