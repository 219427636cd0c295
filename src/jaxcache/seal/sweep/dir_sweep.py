"""`jaxcache verify DIR` and `jaxcache seal DIR`: every entry of a directory, one status each.

Both read entries exactly as the sealed backend does (directory fd, O_NOFOLLOW, one read),
so what verify calls valid is what a sealed reader would load.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, replace

from jaxcache.fingerprint.model import Fingerprint
from jaxcache.seal.publishing import locks
from jaxcache.seal.publishing import tier_names as names
from jaxcache.seal.publishing.locks import LockProblem
from jaxcache.seal.publishing.publish import link_new, put_cosignature
from jaxcache.seal.publishing.tier_files import (
    Rejected,
    cosignatures,
    open_dir,
    read_whole,
)
from jaxcache.seal.signing import build_claims as buildmod
from jaxcache.seal.signing import hittable, keyless
from jaxcache.seal.signing import signature_file as sigfile
from jaxcache.seal.signing import signature_rule as signature
from jaxcache.seal.signing.keyless import KeylessSigner
from jaxcache.seal.stores.backend_reports import trusting
from jaxcache.text import safe
from jaxcache.trust.inputs.public_keys import PublicKey, SignerKind, identity_signer
from jaxcache.trust.inputs.signing_keys import SigningKey
from jaxcache.trust.kernel.entries import Inventory, classify
from jaxcache.trust.kernel.principals import Accounts
from jaxcache.trust.rules import keyring
from jaxcache.trust.rules.identities import SeenIdentity, TrustedIdentity
from jaxcache.trust.rules.keyring import KeyRing

Signer = SigningKey | KeylessSigner  # a key (file or HSM), or the CI job's identity (keyless)


@dataclass(frozen=True, slots=True)
class EntryStatus:
    name: str
    status: str  # valid | unsigned | bad-signature | unknown-key | revoked-key | expired-key
    #              | not-yet-valid-key | too-few-signatures | not-a-file | signed-now
    #              | never-hit (seal: not signed, a sealed reader would never load it)
    #              | co-signed, not-co-signed (seal --add-signature: this key's signature
    #                added now, or it could not be)
    reason: str
    size: int
    never_hit: str | None = None  # why a sealed reader never hits it (seal/signing/hittable.py)
    signers: tuple[str, ...] = ()  # valid: the ids of the keys that vouched for it
    lineage: tuple[tuple[str, tuple[str, ...]], ...] = ()  # valid: each signer's chain
    build: buildmod.BuildView | None = None  # valid: the build its signatures claim, judged here
    # keyless signatures: the identities their verified certificates name (issuer, workflow,
    # repository, ref, run), whether the entry was accepted or rejected
    identities: tuple[SeenIdentity, ...] = ()


@dataclass(frozen=True, slots=True)
class Quarantined:
    """What `verify --quarantine` moved (quarantine.py), part of verify's answer."""

    directory: str  # this run's own folder in QDIR
    moved: tuple[tuple[str, str], ...]  # (entry name, why it was rejected)
    failed: tuple[tuple[str, str], ...]  # (entry name, why it could not be moved)


@dataclass(frozen=True, slots=True)
class ScanResult:
    directory: str
    entries: tuple[EntryStatus, ...]
    leftovers: tuple[str, ...]  # temporary files of interrupted writers, orphan signatures
    refuse_unhittable: bool = False  # seal without --allow-unhittable: such entries fail it
    others: tuple[str, ...] = ()  # names that are no entry, sidecar, lock or leftover (dirs too)
    keys: tuple[keyring.KeyState, ...] = ()  # the trusted keys judged with, each's state
    needed: int = 1  # distinct key holders each entry needs (policy signatures_needed)
    signer: str | None = None  # seal: the signing key's label
    # verify: a sealed reader's audit of the directory refuses it (the same judgement as
    # `run --sealed` and `audit --sealed`): (verdict, why, what to do); None: it loads
    refused: tuple[str, str, str | None] | None = None
    bad_locks: tuple[LockProblem, ...] = ()  # verify: lock files planted there (locks.py)
    # seal --add-signature --from DIR, where entries were not in DIR: why DIR's build cannot
    # match (its entries made with XLA's sub-caches on) and the command that makes one that
    # can (why, what to do); None: nothing to say
    from_dir: tuple[str, str] | None = None
    # verify --quarantine: what was moved aside before this scan of what is left
    quarantined: Quarantined | None = None

    def count(self, status: str) -> int:
        return sum(1 for e in self.entries if e.status == status)

    @property
    def unhittable(self) -> int:
        """Entries a sealed reader never hits (made with XLA's sub-caches on)."""
        return sum(1 for e in self.entries if e.never_hit)

    @property
    def all_valid(self) -> bool:
        return all(e.status in (signature.VALID, "signed-now", "co-signed")
                   for e in self.entries)

    @property
    def ok(self) -> bool:
        """The exit status's answer: every entry verifies, and (for seal, unless allowed)
        none is one that a sealed reader would never hit."""
        return self.all_valid and not (self.refuse_unhittable and self.unhittable) \
            and self.refused is None

    @property
    def strict_ok(self) -> bool:
        """`verify --strict`, a CI gate after a restore: every entry verifies, none is one a
        sealed reader never hits, and nothing else was left there (orphan signatures and
        -atime files, interrupted writes, a lock file that is no lock of its owner's):
        whatever came in with the cache was signed by a trusted key."""
        return self.all_valid and not self.unhittable and not self.leftovers and \
            not self.others and not self.bad_locks and self.refused is None


def _others(fd: int) -> tuple[str, ...]:
    """What `verify --strict` fails on besides entries: every name that is not an entry, a
    sidecar or JAX's -atime file of one present, a lock (judged by locks.survey) or a
    leftover; every directory (XLA's sub-caches included: nothing signs them)."""
    entries, leftovers = _names(fd)
    known = set(entries) | set(leftovers)
    out = []
    for n in sorted(os.listdir(fd)):
        kind = classify(n)[0]
        if n in known or kind == "lockfile":
            continue
        if kind in ("signature", "used", "atime"):
            try:
                if stat.S_ISREG(os.stat(n, dir_fd=fd, follow_symlinks=False).st_mode):
                    continue
            except OSError:
                pass
        out.append(n)
    return tuple(out)


def _names(fd: int) -> tuple[list[str], list[str]]:
    names_ = sorted(os.listdir(fd))
    entries = [n for n in names_ if classify(n)[0] == "cache"]
    present = set(names_)
    leftovers = [n for n in names_ if names.is_temporary(n)]
    for suffix in (names.SIGNATURE, names.USED):  # sidecars whose entry is gone
        leftovers += [n for n in names_ if (e := names.entry_of_sidecar(n, suffix)) is not None
                      and classify(e)[0] == "cache" and e not in present]
    leftovers += [n for n in names_ if (c := names.entry_of_cosignature(n)) is not None
                  and classify(c[0])[0] == "cache" and c[0] not in present]
    leftovers += [n for n in names_ if classify(n)[0] == "atime"  # JAX's, its entry gone
                  and names.entry(n[:-len(names.ATIME)]) not in present]
    return entries, sorted(leftovers)


def _status(fd: int, name: str, trusted: KeyRing, *, read_unsigned: bool = False,
            here: Fingerprint | None = None) -> tuple[EntryStatus, bytes | None]:
    """The entry's status, and the bytes it was judged on (what `seal` signs: no second read).

    The signature is judged first: an entry is read only as far as a trusted key vouched for
    its size, so a planted multi-GB file costs a stat, not the reader's memory. Unsigned
    entries are read whole only with `read_unsigned` (seal, in a directory you trust, signs
    them); a bad or foreign signature's entry is never read."""
    key = names.key_of(name)
    try:
        sig = read_whole(fd, names.sidecar(name, names.SIGNATURE, names.name_max(fd)),
                    limit=sigfile.MAX_BYTES + 1)
        found = signature.vouch(key, sig, trusted, cosignatures(fd, name, names.name_max(fd)))
        vouched, size = found.check, found.size
        whole = size is None and read_unsigned and vouched.status == signature.UNSIGNED
        if size is not None:
            limit: int | None = size + 1  # what a trusted key vouched for, and one byte more
        else:
            limit = None if whole else 1  # 1: only to tell a link or special file
        data = read_whole(fd, name, limit=limit, unread=True)
        if data is None:
            return EntryStatus(name, "not-a-file", "vanished while scanning", 0), None
    except Rejected as exc:
        return EntryStatus(name, exc.status, exc.reason, 0), None
    if size is None and not whole:  # judged unread: its size from the file, not its bytes
        try:
            on_disk = os.stat(name, dir_fd=fd, follow_symlinks=False).st_size
        except FileNotFoundError:
            return EntryStatus(name, "not-a-file", "vanished while scanning", 0), None
        return EntryStatus(name, vouched.status, vouched.reason, on_disk,
                           identities=vouched.identities), None
    check = signature.check(key, data, sig, trusted) if whole else \
        signature.confirm(key, data, found, trusted)
    return EntryStatus(name, check.status, check.reason, len(data),
                       hittable.why_never_hit(data), check.signers, check.lineage,
                       buildmod.built(found, check, here), check.identities), data


def verify(directory: str, trusted: KeyRing | list[PublicKey],
           here: Fingerprint | None = None) -> ScanResult:
    """Every entry's status; valid ones also with the build they claim, judged against
    `here` (default: this host's fingerprint)."""
    fd = open_dir(directory)
    here = here or buildmod.host()
    try:
        entries, leftovers = _names(fd)
        ring = keyring.of(trusted)
        return ScanResult(directory, tuple(_status(fd, n, ring, here=here)[0]
                                           for n in entries),
                          tuple(leftovers), others=_others(fd), keys=ring.states(),
                          needed=ring.needed, bad_locks=locks.survey(fd))
    finally:
        os.close(fd)


def seal(directory: str, signer: Signer, trusted: KeyRing | list[PublicKey], *,
         allow_unhittable: bool = False, build: Fingerprint | None = None) -> ScanResult:
    """Sign every unsigned entry, claiming `build` compiled it (the `seal` command's own
    fingerprint: sealing vouches that this build made what the directory holds). A bad or
    foreign signature is reported, never replaced: replacing it would delete a file, and
    sealing launders whatever is there now. An entry a sealed reader would never hit is left
    unsigned (status never-hit) and fails the seal, unless `allow_unhittable`: then it is
    signed and still reported."""
    fd = open_dir(directory)
    try:
        entries, leftovers = _names(fd)
        ring = trusting(keyring.of(trusted), signer)  # keyless: signer.identify() first
        out = []
        for name in entries:
            st, data = _status(fd, name, ring, read_unsigned=True)
            if st.status == signature.UNSIGNED and data is not None:
                if st.never_hit and not allow_unhittable:
                    st = EntryStatus(name, "never-hit", f"not signed: {st.never_hit}",
                                     len(data), st.never_hit)
                else:
                    sig = sigfile.sign(names.key_of(name), data, signer, build=build)
                    if link_new(fd, names.sidecar(name, names.SIGNATURE, names.name_max(fd)),
                                 sig):
                        st = EntryStatus(name, "signed-now",
                                         f"signed by {label_of(ring, signer)}", len(data),
                                         st.never_hit)
            out.append(st)
        return ScanResult(directory, tuple(out), tuple(leftovers),
                          refuse_unhittable=not allow_unhittable, keys=ring.states(),
                          needed=ring.needed, signer=label_of(ring, signer))
    finally:
        os.close(fd)



def cosign(directory: str, signer: Signer, trusted: KeyRing | list[PublicKey],
           own: Own | None = None, succeeds: str | None = None) -> ScanResult:
    """`seal --add-signature`: add `signer`'s signature beside every entry that the other
    trusted, usable keys already vouch for (as many as the policy needs: a rotation), or,
    with `own` (`--from DIR`), every entry whose bytes are those of the co-signer's own build
    (a second, independent word). Each co-signature file is created only if absent. What has
    neither is reported and left: a co-signer never vouches for what a writer of the
    directory, or a single key holder, put there alone."""
    full = keyring.of(trusted)
    ring = cosigning_ring(full, signer)
    fd = open_dir(directory)
    try:
        entries, leftovers = _names(fd)

        def add(name: str, sig: bytes, stale: Callable[[bytes | None], bool]) -> str | None:
            where = names.cosignature(name, counted_as(ring, signer).id, names.name_max(fd))
            if where is None:
                return "no room for a co-signature name (a module name over 169 characters)"
            try:
                return None if put_cosignature(fd, where, sig, stale) else \
                    "a valid co-signature file appeared meanwhile"
            except OSError as exc:  # e.g. a directory planted there, another's file (sticky)
                return f"cannot write {safe(where)}: {exc.strerror or exc}"

        def shared(name: str, limit: int) -> bytes | None:
            try:
                return read_whole(fd, name, limit=limit, unread=True)
            except Rejected:
                return None
        return ScanResult(directory, tuple(
            cosign_entry(name, signer, ring, lambda n, r: _status(fd, n, r), add, own, shared,
                         succeeds)
            for name in entries), tuple(leftovers), keys=full.states(), needed=full.needed,
            signer=label_of(ring, signer))
    finally:
        os.close(fd)


def label_of(ring: KeyRing, signer: Signer) -> str:
    """The signing key as the policy names it (a private key file carries no name); a
    keyless signer as `identity <workflow>`, by the policy's name where it trusts it."""
    if isinstance(signer, KeylessSigner):
        if signer.seen is None:
            return "identity (not signed yet)"
        from jaxcache.seal.signing.identity_policy import trusted_label

        return trusted_label(ring, signer.seen)
    return (ring.get(signer.public.raw) or signer.public).label


def counted_as(ring: KeyRing, signer: Signer) -> PublicKey:
    """The signer as the rule counts it: the trusted key (with its name and holder), or for
    a keyless one the trusted identity its certificate matches (a co-signature is named by
    that identity's id, which readers fetch: signature_rule._gather)."""
    if isinstance(signer, KeylessSigner):
        from jaxcache.seal.signing.identity_policy import judge

        trusted = judge(signer.identify(), ring.identities).identity
        if trusted is None:
            raise keyring.KeyRingError(
                f"this job's identity {safe(signer.identify().text)} is not among the trusted "
                "identities: readers would not count its signatures; trust it first "
                "(policy [[trusted_identities]]), then co-sign")
        return identity_signer(trusted)
    return ring.get(signer.public.raw) or signer.public


def cosigning_ring(ring: KeyRing, signer: Signer) -> KeyRing:
    """The ring a co-signer judges with: `signer` must be trusted and usable there (readers
    would not count its signature otherwise: trust the new key first)."""
    if isinstance(signer, KeylessSigner):
        from jaxcache.seal.signing.identity_policy import Standing, judge

        seen = signer.identify()
        revoked = judge(seen, (), ring.revoked_identities)
        if revoked.standing is Standing.REVOKED and revoked.identity is not None:
            raise keyring.KeyRingError(f"cannot co-sign: this job's identity {safe(seen.text)} "
                                       f"is revoked by the policy "
                                       f"({safe(revoked.identity.label)})")
        counted_as(ring, signer)  # refused unless trusted
        return ring
    own = ring.get(signer.public.raw)
    if own is None:
        raise keyring.KeyRingError(
            f"the signing key {signer.public.label} is not among the trusted keys: readers "
            "would not count its signatures; trust it first (policy trusted_keys, or "
            "--trusted-key its .pub), then co-sign")
    state = ring.unusable(own)
    if state is not None:
        raise keyring.KeyRingError(f"cannot co-sign: {state[1]}")
    return ring


Judge = Callable[[str, KeyRing], tuple[EntryStatus, "bytes | None"]]
Add = Callable[[str, bytes, Callable[["bytes | None"], bool]], "str | None"]
Own = Callable[[str], "bytes | None"]  # the co-signer's own build of an entry, if it has one
Shared = Callable[[str, int], "bytes | None"]  # the entry's bytes, at most that many


def cosign_entry(name: str, signer: Signer, ring: KeyRing, judge: Judge, add: Add,
                 own: Own | None = None, shared: Shared | None = None,
                 succeeds: str | None = None) -> EntryStatus:
    """One entry of a co-signing, for a directory or a bucket: already signed by `signer`
    (left alone); else, with `own`, co-signed when its bytes are the co-signer's own build
    (relying on nobody); else co-signed when the other keys vouch for it as the policy needs,
    relying on them and on what they relied on (revoking any revokes this co-signature;
    with `succeeds`, the id of the key this one takes over from, on that key's chain alone,
    so that it still counts beside the others once that key is retired); else reported. `add(name,
    sig, stale)` creates the co-signature, replacing a file under its name that `stale` finds
    no valid signature of `signer`, and says why not."""
    me = counted_as(ring, signer)
    mine, others = _split(ring, me)
    st, _ = judge(name, mine)
    if st.status == signature.VALID:
        return EntryStatus(name, signature.VALID, f"already {st.reason}", st.size, st.never_hit)
    key = names.key_of(name)
    if own is not None:
        data, relies, st = _own_build(name, own, shared, st)
        if data is None:
            return st
        why_signed = "the same bytes as your own build"
    else:
        # can the others alone meet the threshold (distinct holders: one holder's keys are one)?
        enough = len({keyring.holder_of(k) for k in others.keys.values()} | {
            i.holder_word for i in others.identities}) >= ring.needed
        st, data = judge(name, replace(others, needed=ring.needed if enough else 1))
        if st.status == signature.VALID and not enough:
            st = EntryStatus(name, signature.TOO_FEW, f"{st.reason}, but the policy needs "
                             f"{ring.needed} key holders and would count this one's word "
                             "twice",
                             st.size, st.never_hit)
        if st.status != signature.VALID or data is None:
            hint = "; co-sign from your own build (--from DIR)" if \
                st.status == signature.TOO_FEW else ""
            return EntryStatus(name, st.status, st.reason + hint, st.size, st.never_hit)
        chains = dict(st.lineage)
        if succeeds is not None:
            if succeeds not in chains:
                return EntryStatus(name, NOT_COSIGNED, f"{st.reason}; not signed by key "
                                   f"{succeeds}, which this key succeeds: not co-signed",
                                   st.size, st.never_hit)
            relies = (succeeds, *chains[succeeds])
        else:
            relies = tuple(i for k, chain in chains.items() for i in (k, *chain))
        relies, why_signed = tuple(sorted(set(relies))), st.reason

    def stale(existing: bytes | None) -> bool:
        return existing is None or not signature.check(key, data, existing, mine).ok
    why = add(name, sigfile.sign(key, data, signer, relies_on=relies), stale)
    if why is None:
        return EntryStatus(name, "co-signed", f"{why_signed}; co-signed by "
                           f"{label_of(ring, signer)}", len(data), st.never_hit)
    return EntryStatus(name, NOT_COSIGNED, f"{why_signed}; not co-signed: {why}", len(data),
                       st.never_hit)


def _split(ring: KeyRing, me: PublicKey) -> tuple[KeyRing, KeyRing]:
    """The ring of the co-signer alone (is it there already?), and of everyone else (do they
    vouch?): a key or a trusted identity, the same revocations and clock."""
    if me.kind is SignerKind.IDENTITY:
        mine = [i for i in ring.identities if i.raw == me.raw]
        return (replace(ring, keys={}, identities=tuple(mine), needed=1),
                replace(ring, identities=tuple(i for i in ring.identities if i.raw != me.raw),
                        needed=1))
    return (replace(ring.restricted({me.raw: me}, 1), identities=()),
            ring.restricted({r: k for r, k in ring.keys.items() if r != me.raw}, 1))


def _own_build(name: str, own: Own, shared: Shared | None, st: EntryStatus
               ) -> tuple[bytes | None, tuple[str, ...], EntryStatus]:
    """The bytes to co-sign from the co-signer's own build: only when the shared entry holds
    exactly them (read at most one byte past their length)."""
    mine = own(name)
    if mine is None:
        return None, (), EntryStatus(name, NOT_COSIGNED, NOT_IN_OWN, st.size)
    there = shared(name, len(mine) + 1) if shared is not None else None
    if there != mine:
        return None, (), EntryStatus(name, NOT_COSIGNED, "differs from your own build "
                                     "(--from): not co-signed", st.size)
    return mine, (), st


NOT_COSIGNED = "not-co-signed"  # seal --add-signature could not add this key's signature
NOT_IN_OWN = "not in your own build (--from): not co-signed"  # no entry of that name in DIR


def missing_from_own(result: ScanResult) -> int:
    """How many entries a co-signing from DIR found no entry of that name for there."""
    return sum(1 for e in result.entries if e.status == NOT_COSIGNED and e.reason == NOT_IN_OWN)


def signed_by(inv: Inventory, fd: int, resolved: str, accounts: Accounts,
              builds: dict[str, buildmod.BuildView] | None = None,
              policy_path: str | None = None) -> dict[str, str]:
    """Each signature file's claimed signer (read bounded, never following a link), by the
    name your policy (`policy_path`, else the default one) gives that key where it trusts it,
    or, for a keyless signature, the CI identity its certificate names (by the policy's name
    for it where it trusts it): a claim, which `verify` checks.
    `builds`, if given, gets each signature file's claimed build judged for this host (its
    build signature checked under the key it names; whether that key counts is verify's)."""
    from jaxcache.errors import JaxcacheError as _Error
    from jaxcache.trust.inputs import policy as policymod

    idents: tuple[TrustedIdentity, ...] = ()
    try:
        rule = policymod.load(policy_path, accounts).rule_for(resolved)
        known = {k.raw: k for k in rule.trusted_keys}
        idents = tuple(rule.trusted_identities)
    except _Error:
        known = {}  # names are labels: a policy that does not load only leaves them out
    out = {}
    for e in inv.entries:
        if e.kind != "signature" or e.type != "file":
            continue
        try:
            data = read_whole(fd, e.name, limit=sigfile.MAX_BYTES + 1)
        except Rejected:
            continue
        public = sigfile.claimed_signer(data) if data is not None else None
        seen = keyless.claimed(data) if data is not None and public is None else None
        if seen is not None and data is not None:  # keyless: who its certificate names
            from jaxcache.seal.signing.identity_policy import judge

            trusted = judge(seen, idents).identity
            out[e.name] = f"identity {trusted.label if trusted else seen.text}"
            if builds is not None:  # the bundle signs the claim: only its shape is read here
                builds[e.name] = buildmod.claimed_view(data, PublicKey(
                    b"\0" * 32, kind=SignerKind.IDENTITY, subject=seen.subject))
        if public is not None:
            out[e.name] = (known.get(public.raw) or public).label
            if builds is not None and data is not None:
                builds[e.name] = buildmod.claimed_view(data, public)
    return out
