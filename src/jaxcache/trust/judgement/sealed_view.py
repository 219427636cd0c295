"""How signatures change the audit of a sealed cache.

When every reader of a directory loads only entries signed by trusted keys, a writer of the
directory can delete entries or plant ones that are rejected (a denial of service: jobs
recompile), but can no longer choose the code a process runs. So writer, filesystem and entry
findings stop being UNSAFE and become warnings, and the verdict is SEALED, provided that each
key's holder is a declared writer (you, root, or trusted in the policy): signing is writing.
"""

from __future__ import annotations

from enum import StrEnum

from jaxcache.trust.findings import (
    NOTE,
    SEAL_KEYS,
    UNSAFE,
    UNVERIFIABLE,
    WARNING,
    Finding,
    Writer,
)
from jaxcache.trust.kernel.principals import Trust

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from jaxcache.trust.kernel.principals import Principal
    from jaxcache.trust.rules.keyring import KeyRing

# findings about who can write, or about a filesystem whose writers cannot be known
COVERED = ("writer.", "dir.", "entry.", "entries.unreadable", "fs.network", "kernel.disagrees",
           "users.process", "handle.", "storage.", "path.url")
NOTE_SUFFIX = (" — that holds for a plain reader; a sealed reader loads only signed entries, so "
               "such a writer can delete entries or plant ones that are rejected (jobs "
               "recompile) but cannot choose the code your process runs")
REMEDY = ("keep every reader sealed (jaxcache run --sealed, jaxcache.enable(sealed=True)); to "
          "spare the recompiles such writers can cause, restrict who can write, checking first "
          "who relies on that access")


def account(findings: list[Finding], writers: list[Writer], ring: KeyRing | None,
            holder_trust: Mapping[str, Trust]) -> tuple[list[Finding], bool]:
    """The findings as a sealed reader sees them, and whether sealing applies at all.

    ring: trust/rules/keyring.py KeyRing (the trusted keys, what is revoked, how many are needed);
    holder_trust: each policy-declared holder's Trust (you, root, policy or
    untrusted), keys passed in code have no holder.
    """
    if not ring:
        return findings, False
    keys = tuple(ring.keys.values())
    out = []
    for f in findings:
        if f.effect.fails and f.code.startswith(COVERED):
            out.append(Finding(f.code, WARNING, f.message + NOTE_SUFFIX, f.path, REMEDY))
        else:
            out.append(f)
    for key in keys:
        if key.holder is not None and holder_trust.get(key.holder) is Trust.UNTRUSTED:
            out.append(Finding(
                "seal.holder-undeclared", UNSAFE,
                f"trusted key {key.id} is held by {key.holder}, who is not a declared writer of "
                "this cache (trusted_signers or trusted_users): whoever holds a trusted key can "
                "make every reader run their code",
                None, f"declare {key.holder} in trusted_signers for this cache (a key holder "
                f"for sealed readers only; trusted_users would also let plain readers load "
                f"what {key.holder} writes unsigned), or remove the key"))
    out += key_state(ring)
    needed = f"; each entry needs {ring.needed} distinct key holders" if ring.needed > 1 else ""
    signers = [f"{k.label} ({k.holder or 'given by the caller'}, {ring.state(k)})"
               for k in keys]
    # keyless signers (trust/rules/identities.py): named by their workflow and issuer
    signers += [f"identity {i.label} (" + ", ".join(i.pins) + ")" for i in ring.identities]
    root = (f"; keyless signatures are verified offline against {ring.trust_root}"
            if ring.trust_root else "; keyless signatures are verified against the "
            "public-good Sigstore root (fetched: set sigstore_trust_root to verify offline)"
            ) if ring.identities else ""
    counted = f"{len(keys)} trusted key(s)" + (
        f" and {len(ring.identities)} trusted identit{'y' if len(ring.identities) == 1 else 'ies'}"
        if ring.identities else "")
    out.append(Finding(
        SEAL_KEYS, NOTE,
        f"sealed: readers load only entries signed by {counted}: " + ", ".join(signers)
        + needed + root + "; `jaxcache verify DIR` checks every entry", None))
    return out, True


class SealedRole(StrEnum):
    """What a writer a plain reader does not trust can do to a sealed reader (the sealed rule):
    a declared signer (trusted_signers) is trusted for what its key signs, and its unsigned
    writes are rejected like anyone's; a writer without a trusted key can only cost
    recompiles. The holder of a trusted key nobody declared has no role: whatever it signs
    loads (seal.holder-undeclared), so it stays untrusted."""

    SIGNER = "signer"
    RECOMPILES = "recompiles"

    def __str__(self) -> str:
        return self.value

    @property
    def tag(self) -> str:
        """The writer's tag in the audit's list, in place of [untrusted]."""
        return {SealedRole.SIGNER: "declared signer: what its trusted key signs loads",
                SealedRole.RECOMPILES: "can cause recompiles"}[self]

    @property
    def effect(self) -> str:
        """What its powers over the directory amount to for a sealed reader."""
        return ("-> under the seal: can delete entries or plant ones a sealed reader rejects "
                "(jobs recompile), not choose the code JAX runs")


def roles(writers: list[Writer], signers: frozenset[int], undeclared: frozenset[int]
          ) -> dict[Principal, SealedRole]:
    """The sealed role of each writer a plain reader does not trust (account() said sealing
    applies): `signers` are the policy's trusted_signers, `undeclared` the users who hold a
    trusted key without being declared (no role: they can choose the code)."""
    out: dict[Principal, SealedRole] = {}
    for w in writers:
        p = w.principal
        if w.trust is not Trust.UNTRUSTED or p in out:
            continue
        if p.kind == "user" and p.id in undeclared:
            continue
        out[p] = SealedRole.SIGNER if p.kind == "user" and p.id in signers else \
            SealedRole.RECOMPILES
    return out


ROTATE = ("make a new key (jaxcache keygen --name ...), trust it beside this one, co-sign the "
          "entries (jaxcache seal DIR --signing-key NEW --add-signature), switch the publisher, "
          "then remove this key (docs/how-to/sealed-cache.md, \"Rotating a key\")")


def key_state(ring: KeyRing) -> list[Finding]:
    """What the policy's key lifecycle means now: keys expired, not yet valid or expiring
    within 30 days, keys revoked, and whether any key is left that may count (none: every
    entry is rejected, so the verdict cannot be SEALED)."""
    from jaxcache.trust.rules.keyring import holder_of, when

    out = []
    holders: set[str] = set()  # of the keys that may count now: one holder's keys count once
    for k in ring.keys.values():
        state = ring.state(k)
        if state in ("trusted", "expiring") or (state == "expired" and k.signing_time):
            holders.add(holder_of(k))
        if state == "expiring":
            assert k.not_after is not None  # ring.state() says so only of a key with one
            days = max(0.0, (k.not_after - ring.clock()) / 86400)
            out.append(Finding("seal.key-expiring", WARNING,
                               f"trusted key {k.label} expires in {days:.0f} day(s), at "
                               f"{when(k.not_after)}: from then on readers reject what only it "
                               "signed", None, ROTATE))
        elif state == "expired":
            assert k.not_after is not None  # ring.state() says so only of a key with one
            soft = (" (trust_signing_time: signatures claiming an earlier time still count, as "
                    "good as the key's holder)") if k.signing_time else \
                ": readers reject what only it signed (recompiled)"
            out.append(Finding("seal.key-expired", WARNING,
                               f"trusted key {k.label} expired at {when(k.not_after)}{soft}",
                               None, "publish with a current key (what only the expired one "
                               "signed is rebuilt as readers miss it), remove it from "
                               "trusted_keys" + (
                                   " once no co-signature in use relies on it (under "
                                   "signatures_needed > 1 its holder is how those count)"
                                   if ring.needed > 1 else "") +
                               ", and next time rotate before not_after "
                               "(docs/how-to/sealed-cache.md, \"Rotating a key\")"))
        elif state == "not-yet-valid":
            assert k.not_before is not None  # ring.state() says so only of a key with one
            out.append(Finding("seal.key-not-yet-valid", WARNING,
                               f"trusted key {k.label} is trusted only from "
                               f"{when(k.not_before)}: until then readers reject what only it "
                               "signed", None, None))
    holders |= {i.holder_word for i in ring.identities}  # valid as their certificates say
    for i in ring.identities:
        if i.loose:
            out.append(Finding(
                "seal.identity-loose", WARNING,
                f"trusted identity {i.label} (issuer {i.issuer}) admits "
                + " and ".join(i.loose) + ": every such job's signatures load", None,
                "pin the job that publishes: ref = \"refs/heads/main\" and event = \"push\" "
                "(one [[trusted_identities]] table per ref and event that may publish)"))
    if ring.revoked_identities:
        out.append(Finding("seal.identity-revoked", NOTE,
                           f"{len(ring.revoked_identities)} identit(ies) revoked by the policy ("
                           + ", ".join(f"{i.label} (issuer {i.issuer})"
                                       for i in ring.revoked_identities)
                           + "): readers reject every keyless signature whose certificate "
                           "states them", None))
    revoked = len(ring.revoked) + len(ring.revoked_ids)
    if revoked:
        from jaxcache.trust.rules.keyring import key_id

        ids = sorted({*ring.revoked_ids, *(key_id(r) for r in ring.revoked)})
        out.append(Finding("seal.key-revoked", NOTE,
                           f"{revoked} key(s) revoked by the policy ({', '.join(ids)}): readers "
                           "reject every signature by them, whatever the signature claims",
                           None))
    if len(holders) < ring.needed:
        out.append(Finding(
            "seal.no-usable-key", UNVERIFIABLE,
            f"no entry can verify: the trusted keys that may count now have {len(holders)} "
            f"distinct holder(s) and each entry needs {ring.needed}; a sealed reader would "
            "reject every entry", None,
            "trust a current key (jaxcache keygen --name ...; policy trusted_keys), or fix its "
            "not_before / not_after"))
    return out

