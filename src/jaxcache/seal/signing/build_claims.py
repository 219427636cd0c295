"""Which build compiled a sealed entry, as its signatures claim, judged for this host.

A signature may name the fingerprint of the build that compiled its entry (signature_file.py's
`build`, signed in its own message: signature_rule.py). The rule is fingerprint/rule.py's: the
build digest and machine exact, the writer's CPU features a subset of the host's. The sealed
reader asks build_check() before it reads an entry (another build is a miss, never a load);
verify and ls show the same judgement per entry (BuildView).
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxcache import fingerprint
from jaxcache.fingerprint import rule
from jaxcache.fingerprint.model import Fingerprint
from jaxcache.fingerprint.rule import Field, Judgement, Outcome
from jaxcache.seal.signing import signature_file as sigfile
from jaxcache.seal.signing import signature_rule as signature
from jaxcache.trust.inputs.public_keys import PublicKey


@dataclass(frozen=True, slots=True)
class BuildView:
    """Which build a valid entry's signatures say compiled it, judged against this host
    (fingerprint/rule.py): `state` this-build | compatible | other-build | unknown."""

    state: str
    words: str  # "this build", "compatible", "another build <short digest>", "build unknown"
    writer: str | None  # the claimed build's short digest, if one is claimed
    reason: str  # the rule's words (what differs, or why it is unknown)


_STATES = {Outcome.SAME: "this-build", Outcome.COMPATIBLE: "compatible",
           Outcome.DIFFERENT: "other-build", Outcome.UNKNOWN: "unknown"}


def build_view(claimed: tuple[Fingerprint, ...], judged: Judgement) -> BuildView:
    """How verify and ls name an entry's build: `judged` is the rule's answer for it here."""
    writer = next((c.build.short for c in claimed if c.build is not None), None)
    state = _STATES[judged.outcome]
    words = {"this-build": "this build", "compatible": "compatible",
             "other-build": f"another build {writer or ''}".rstrip(),
             "unknown": "build unknown"}[state]
    if state == "other-build" and writer is not None and not any(
            d.field is Field.BUILD for d in judged.differences):
        words = "another host"  # this build, made on a machine or CPU this one is not
    return BuildView(state, words, writer, judged.reason)


def host() -> Fingerprint:
    """The fingerprint verify and ls judge claims by: this Python's build on this host."""
    return fingerprint.current()


WHAT_TO_DO = ("publish from this build, or share one cache per fingerprint "
              "(--namespace fingerprint)")


def claims(found: signature.Vouch) -> tuple[Fingerprint, ...]:
    """The builds the vouching signatures claim (each verified under its signer's key)."""
    return tuple(j.build for j in found.judged
                 if j.status == signature.VALID and j.build is not None)


def build_check(found: signature.Vouch, host: Fingerprint, require_build: bool = False
                ) -> tuple[rule.Judgement, signature.Check | None]:
    """Before the entry is read: may this host load what the vouching signatures say was
    compiled by their build (fingerprint/rule.py: the build digest and machine exact, the
    writer's CPU features a subset of the host's)? Every build claimed among them must pass:
    signers that disagree about the build fail closed. The judgement, and the Check that
    rejects the entry (None: it loads). "Build unknown" (no signature claims a build: made
    before build binding, or stripped of both fields) loads unless `require_build`."""
    judged = [rule.judge(c, host) for c in claims(found)] or [rule.judge(None, host)]
    worst = next((j for j in judged if j.outcome is rule.Outcome.DIFFERENT), None) or next(
        (j for j in judged if j.outcome is rule.Outcome.UNKNOWN), None) or next(
        (j for j in judged if j.outcome is rule.Outcome.COMPATIBLE), judged[0])
    key_id = found.check.key_id
    if worst.outcome is rule.Outcome.DIFFERENT:
        return worst, signature.Check(
            signature.OTHER_BUILD, f"compiled by another build or host: {worst.reason}; "
            f"{WHAT_TO_DO}", key_id)
    if worst.outcome is rule.Outcome.UNKNOWN and require_build:
        return worst, signature.Check(
            signature.BUILD_UNKNOWN, f"{worst.reason}, and the policy requires a known build "
            "(require_build): re-publish it from a jaxcache that signs its build", key_id)
    return worst, None


def built(found: signature.Vouch, check: signature.Check, here: Fingerprint | None
          ) -> BuildView | None:
    """A valid entry's build as verify shows it (None: not valid, or not asked)."""
    if not check.ok or here is None:
        return None
    judged, _ = build_check(found, here)
    return build_view(claims(found), judged)


def claimed_view(sig: bytes, public: PublicKey) -> BuildView:
    """The build one signature file claims, as `ls` shows it (a claim: not yet verified)."""
    doc = sigfile.read(sig)
    try:
        digest = bytes.fromhex(doc.digest)
    except ValueError:
        digest = b""
    claim, edited = sigfile.claimed_build(doc, public, doc.key, digest, doc.size)
    if edited is not None:
        return BuildView("unknown", "bad build claim", None, edited)
    claimed = (claim,) if claim is not None else ()
    return build_view(claimed, rule.judge(claim, host()))
