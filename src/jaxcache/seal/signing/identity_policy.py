"""The policy's identities as sigstore's own verification policies, and a certificate judged
by them: the one place that decides whether a keyless signer is trusted, revoked or neither.

Each [[trusted_identities]] table becomes sigstore's `AllOf` of one policy per claim it pins
(trust/rules/identities.py `claims()`: the issuer, the workflow that signed (`Identity`, the
SAN), the repository, the source ref, the workflow the run started from, the event), and the
trusted ones together an `AnyOf`: what keyless.verify hands sigstore's verifier, which applies
it to a certificate only after the certificate chained to Fulcio's root with a valid SCT. The
same objects tell afterwards which identity matched (its holder counts once), whether a revoked
one does (revocation wins), and, for a reason, the first claim that differs.

Kept here because sigstore lacks it: a claim matched against a `*` pattern (a policy's
`<field>_glob`), read from the certificate as sigstore reads its own (the DER UTF8String of
Fulcio's v2 extensions, through cryptography's decoder).

Imported only where a keyless signature is made or judged: it needs the jaxcache[sigstore]
extra.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache

from cryptography import x509
from cryptography.hazmat import asn1
from cryptography.hazmat.primitives import serialization
from sigstore.errors import VerificationError
from sigstore.verify import policy as sp

from jaxcache.trust.rules.identities import Claim, Pattern, SeenIdentity, TrustedIdentity

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from jaxcache.trust.rules.keyring import KeyRing

_EXACT: dict[Claim, Callable[[str], sp.VerificationPolicy]] = {
    Claim.ISSUER: sp.OIDCIssuerV2, Claim.REPOSITORY: sp.OIDCSourceRepositoryURI,
    Claim.COMMIT: sp.OIDCSourceRepositoryDigest, Claim.REF: sp.OIDCSourceRepositoryRef,
    Claim.CALLER: sp.OIDCBuildConfigURI, Claim.EVENT: sp.OIDCBuildTrigger,
    Claim.RUN: sp.OIDCRunInvocationURI}
_LEGACY_ISSUER = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.1")  # raw text, before .8


def claim_of(cert: x509.Certificate, which: Claim) -> str | None:
    """One claim as the certificate states it (None: it states none that can be read)."""
    if which is Claim.WORKFLOW:
        try:
            san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except x509.ExtensionNotFound:
            return None
        names = [*san.get_values_for_type(x509.UniformResourceIdentifier),
                 *san.get_values_for_type(x509.RFC822Name)]
        return names[0] if names else None
    raw = _extension(cert, x509.ObjectIdentifier(which.value))
    if raw is None:
        return None
    try:
        return asn1.decode_der(str, raw)
    except ValueError:
        return None


def _extension(cert: x509.Certificate, oid: x509.ObjectIdentifier) -> bytes | None:
    try:
        value = cert.extensions.get_extension_for_oid(oid).value
    except x509.ExtensionNotFound:
        return None
    raw = getattr(value, "value", None)  # an extension cryptography does not know: its bytes
    return raw if isinstance(raw, bytes) else None


def seen_of(cert: x509.Certificate) -> SeenIdentity:
    """The claims of a certificate, for reasons and reports (what decides is judge())."""
    issuer = claim_of(cert, Claim.ISSUER)
    if issuer is None:  # a certificate from before Fulcio's v2 extensions: the raw text
        legacy = _extension(cert, _LEGACY_ISSUER)
        issuer = legacy.decode("utf-8", "replace") if legacy is not None else ""
    der = cert.public_bytes(serialization.Encoding.DER)
    return SeenIdentity(
        issuer, claim_of(cert, Claim.WORKFLOW) or "",
        repository_uri=claim_of(cert, Claim.REPOSITORY), ref=claim_of(cert, Claim.REF),
        commit=claim_of(cert, Claim.COMMIT), run_uri=claim_of(cert, Claim.RUN),
        caller=claim_of(cert, Claim.CALLER), event=claim_of(cert, Claim.EVENT),
        certificate=hashlib.sha256(der).hexdigest(), der=der)


class _Glob:
    """sigstore's VerificationPolicy for one claim against a `*` pattern (`<field>_glob`)."""

    def __init__(self, claim: Claim, pattern: Pattern) -> None:
        self.claim, self.pattern = claim, pattern

    def verify(self, cert: x509.Certificate) -> None:
        value = claim_of(cert, self.claim)
        if not self.pattern.matches(value):
            raise VerificationError(f"the certificate's {self.claim.word} {value} does not "
                                    f"match {self.pattern.text}")


def _policy(claim: Claim, pattern: Pattern) -> sp.VerificationPolicy:
    if pattern.glob:
        return _Glob(claim, pattern)
    if claim is Claim.WORKFLOW:
        return sp.Identity(identity=pattern.text)
    return _EXACT[claim](pattern.text)


def policy_of(identity: TrustedIdentity) -> sp.AllOf:
    """The identity as sigstore's policy: every claim it pins must hold."""
    return _all_of(identity.claims())


@lru_cache(maxsize=256)
def _all_of(claims: tuple[tuple[Claim, Pattern], ...]) -> sp.AllOf:
    return sp.AllOf([_policy(c, p) for c, p in claims])


def any_of(identities: tuple[TrustedIdentity, ...]) -> sp.AnyOf:
    """The trusted identities as one policy, for sigstore's verifier (empty: refuses all)."""
    return sp.AnyOf(list(map(policy_of, identities)))


@lru_cache(maxsize=64)
def _certificate(der: bytes) -> x509.Certificate:
    return x509.load_der_x509_certificate(der)


def _holds(policy: sp.VerificationPolicy, cert: x509.Certificate) -> bool:
    try:
        policy.verify(cert)
    except Exception:  # noqa: BLE001 - VerificationError, or a claim it cannot read: no
        return False
    return True


class Standing(Enum):
    """What the policy makes of a certificate's identity."""

    TRUSTED = "trusted"
    REVOKED = "revoked"
    UNTRUSTED = "untrusted"


@dataclass(frozen=True)
class Judged:
    """judge()'s answer: the standing, the identity that decided it (the trusted one matched,
    or the revoked one), and for UNTRUSTED the first claim that differs from the policy's
    first identity."""

    standing: Standing
    identity: TrustedIdentity | None = None
    differs: str | None = None


def judge(seen: SeenIdentity, trusted: tuple[TrustedIdentity, ...],
          revoked: tuple[TrustedIdentity, ...] = ()) -> Judged:
    """`seen`'s certificate against the policy's identities: revoked first (revocation wins),
    then the first trusted one it matches. Only ever asked of a certificate sigstore verified
    (keyless.verify), or of a claim shown as a claim (ls)."""
    if not seen.der:
        return Judged(Standing.UNTRUSTED, differs="no certificate to judge")
    cert = _certificate(seen.der)
    gone = next((i for i in revoked if _holds(policy_of(i), cert)), None)
    if gone is not None:
        return Judged(Standing.REVOKED, gone)
    match = next((i for i in trusted if _holds(policy_of(i), cert)), None)
    if match is not None:
        return Judged(Standing.TRUSTED, match)
    return Judged(Standing.UNTRUSTED, differs=_differs(trusted[0], seen, cert)
                  if trusted else "the policy trusts no identity")


def _differs(identity: TrustedIdentity, seen: SeenIdentity, cert: x509.Certificate) -> str:
    """The first claim of `identity` the certificate does not hold, as people read it."""
    for claim, pattern in identity.claims():
        if not _holds(_policy(claim, pattern), cert):
            return f"{claim.word} {seen.claim(claim)}, not {pattern.text}"
    return "another identity"


def rejection(ring: KeyRing, seen: SeenIdentity) -> str | None:
    """Why readers with this ring reject every signature of `seen` (a keyless publisher's
    own identity, as its certificate states it: revoked, or not trusted), in one sentence
    (not escaped: whoever shows it does); None where they accept it."""
    judged = judge(seen, ring.identities, ring.revoked_identities)
    if judged.standing is Standing.REVOKED:
        assert judged.identity is not None
        return (f"this job signs keyless as identity {seen.text}, which the policy "
                f"revokes ({judged.identity.label}): every reader rejects what it signs")
    if judged.standing is Standing.TRUSTED:
        return None
    closest = f" ({judged.differs})" if ring.identities else ""
    return (f"this job signs keyless as identity {seen.text}, which is not among the "
            f"policy's trusted identities{closest}: every reader with this policy rejects "
            "what it signs (add it to [[trusted_identities]], or sign from the trusted "
            "workflow)")


def trusted_label(ring: KeyRing, seen: SeenIdentity) -> str:
    """`identity <label>`: by the policy's name for it where the ring trusts it."""
    judged = judge(seen, ring.identities)
    return "identity " + (judged.identity.label if judged.identity is not None else seen.text)
