"""`jaxcache seal` and `jaxcache verify`: sign or check what a directory or bucket prefix holds,
or publish, check and collect a store of generations.

The commands' work, apart from lifecycle/sealing.py (which hands JAX a sealed backend): each
reads the keys to trust, refuses a place whose writers it cannot vouch for, and returns the
scan (seal/sweep/dir_sweep.py for a directory, seal/sweep/bucket_sweep.py for a prefix).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from jaxcache import fingerprint
from jaxcache.errors import JaxcacheError, UntrustedCacheError
from jaxcache.seal.objects.object_store import StoreError
from jaxcache.text import safe, some
from jaxcache.trust.findings import Effect, Verdict
from jaxcache.trust.rules.target import is_url

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import ExitStack

    from jaxcache.seal.generations.collecting import Collected
    from jaxcache.seal.generations.publishing import Published
    from jaxcache.seal.generations.reading import Inspected
    from jaxcache.seal.objects.object_store import ObjectStore
    from jaxcache.seal.sweep.dir_sweep import Own, ScanResult, Signer
    from jaxcache.trust.judgement.audit import AuditReport
    from jaxcache.trust.rules.keyring import KeyRing
    from jaxcache.trust.rules.policy_rules import Policy


def trusted_keys_for(directory: str, given: tuple[str, ...], policy: Policy, *,
                     required: bool = True) -> KeyRing:
    """The key ring for this directory: --trusted-key values plus the policy's trusted_keys,
    with its revoked_keys and signatures_needed (trust/rules/keyring.py)."""
    from jaxcache.trust.inputs import public_keys as trustkeys
    from jaxcache.trust.rules import keyring

    keys = [trustkeys.load_public(k) for k in given]
    ring = keyring.for_rule(policy.rule_for(directory), keys)
    if not ring and required:
        raise JaxcacheError("no trusted keys: give --trusted-key ed25519:... (or a .pub file), "
                            "or list trusted_keys for this directory in your policy")
    return ring


@dataclass(frozen=True, slots=True)
class SigningChoice:
    """How seal signs: with a key (a file or a pkcs11: URI), or keyless as the CI job's
    identity (`identity`: "ci"; `sigstore_config`: the Sigstore client trust config, None:
    the public-good instance)."""

    key_path: str | None = None
    identity: str | None = None
    sigstore_config: str | None = None

    @property
    def flags(self) -> str:
        """The command-line words that choose it, for a command shown to the user."""
        import shlex

        if self.key_path is not None:
            return f"--signing-key {shlex.quote(safe(self.key_path))}"
        config = f" --sigstore-config {shlex.quote(safe(self.sigstore_config))}" \
            if self.sigstore_config else ""
        return f"--identity {self.identity}{config}"

    def load(self) -> Signer:
        """The signer; keyless, its certificate bought now (so the identity is known before
        any entry is judged or signed): KeylessError, one line, when the CI gives no token."""
        if self.key_path is not None:
            from jaxcache.trust.inputs import signing_keys as keymod

            return keymod.load_signing(self.key_path)
        from jaxcache.seal.signing.keyless import KeylessSigner

        signer = KeylessSigner(trust_config=self.sigstore_config)
        try:
            signer.identify()
        except JaxcacheError:
            signer.close()
            raise
        return signer


def verify_dir(directory: str, given: tuple[str, ...], policy: Policy) -> ScanResult:
    from jaxcache.seal.sweep import dir_sweep as scan

    if is_url(directory):
        from jaxcache.seal.objects import store_for_url as objects
        from jaxcache.seal.sweep import bucket_sweep as bucket_scan
        from jaxcache.trust.rules import target

        url = target.parse_bucket(directory)
        return bucket_scan.verify(objects.open_store(url),
                                  trusted_keys_for(url.text, given, policy))
    directory = _existing_dir(directory)
    result = scan.verify(directory, trusted_keys_for(directory, given, policy))
    return replace(result, refused=reader_refusal(directory, given, policy))


def verify_quarantined(directory: str, qdir: str, given: tuple[str, ...], policy: Policy
                       ) -> ScanResult:
    """`verify --quarantine QDIR`: every entry a sealed reader rejects moved aside
    (quarantine.py), then what is left verified; the result says what was moved, so the
    answer covers both."""
    from jaxcache.seal.sweep import quarantine

    moved = quarantine.quarantine(directory, qdir, verify_dir(directory, given, policy))
    return replace(verify_dir(directory, given, policy), quarantined=moved)


def reader_refusal(directory: str, given: tuple[str, ...], policy: Policy
                   ) -> tuple[str, str, str | None] | None:
    """Whether a sealed reader (run --sealed, enable(sealed=True)) would refuse the directory,
    judged by the very audit they run: valid signatures are not enough when, say, a trusted
    key's holder is no declared signer. (verdict, why, what to do), or None."""
    from jaxcache.trust.inputs import public_keys as trustkeys
    from jaxcache.trust.judgement.audit import audit
    from jaxcache.trust.kernel.principals import Accounts

    accounts = Accounts()
    report = audit(directory, policy=policy, sealed=True,
                   sealed_keys=tuple(trustkeys.load_public(k) for k in given),
                   scan_processes=False, accounts=accounts)
    if report.verdict.ok:
        return None
    failing = [f for f in report.findings if f.effect.fails]
    first = next((f for f in failing if f.remedy), failing[0] if failing else None)
    return (report.verdict.value, first.message if first else "no finding said why",
            first.remedy if first else None)


def cosign(directory: str, signing: SigningChoice, given: tuple[str, ...], policy: Policy,
           own_dir: str | None = None, succeeds: str | None = None,
           jobs_of: Callable[[str], tuple[tuple[str, ...], ...]] | None = None) -> ScanResult:
    """`seal --add-signature`: co-sign, with the key or identity `signing`, what the other trusted
    keys already vouch for (a directory or a bucket prefix), or with `own_dir` (`--from`)
    what matches the co-signer's own build. No audit of the shared place's writers is
    needed: a co-signer adds its word only to what trusted keys, or its own build, say; its
    own build must be private (PRIVATE or SHARED-BY-POLICY): it is the evidence. `jobs_of`:
    the commands of the jobs that used a directory, newest first (the run records say; the
    caller reads them), to name the job to rerun when `own_dir` cannot match."""
    import contextlib

    from jaxcache.seal.sweep import dir_sweep as scan

    old = _key_id(succeeds) if succeeds is not None else None
    with contextlib.ExitStack() as stack:
        signer = signing.load()
        _closing(stack, signer)
        if is_url(directory):
            from jaxcache.seal.objects import store_for_url as objects
            from jaxcache.seal.sweep import bucket_sweep as bucket_scan
            from jaxcache.trust.rules import target

            url = target.parse_bucket(directory)
            ring = trusted_keys_for(url.text, given, policy)
            own = _own_build(own_dir, policy, stack, None) if own_dir is not None else None
            result = bucket_scan.cosign(objects.open_store(url),
                                        signer, ring, own, old)
        else:
            directory = _existing_dir(directory)
            ring = trusted_keys_for(directory, given, policy)
            own = _own_build(own_dir, policy, stack, directory) if own_dir is not None \
                else None
            result = scan.cosign(directory, signer, ring, own, old)
        if own_dir is not None and scan.missing_from_own(result):
            jobs = jobs_of(own_dir) if jobs_of is not None else ()
            result = replace(result, from_dir=_unlike(own_dir, directory, signing,
                                                      jobs[0] if jobs else None))
        return result


UNLIKE_SAMPLE = 8  # entries of --from DIR looked into for why its keys differ


def _unlike(own_dir: str, shared: str, signing: SigningChoice, job: tuple[str, ...] | None
            ) -> tuple[str, str] | None:
    """Entries had no namesake in the co-signer's own build (--from DIR): if DIR's entries were
    made with XLA's sub-caches on (a plain `jaxcache run` or enable(): JAX's default), their
    keys are ones a sealed cache never holds on JAX <= 0.10 (seal/signing/hittable.py's
    test, version-gated): (why, the commands that make a comparable build and co-sign from
    it: the newest `job` that used DIR, as the run records say, else a placeholder). None
    when DIR's entries do not show that (another job, another build)."""
    import os
    import shlex

    from jaxcache.seal.publishing.tier_files import Rejected, open_dir, read_whole
    from jaxcache.seal.signing import hittable
    from jaxcache.trust.kernel.entries import classify

    try:
        fd = open_dir(own_dir)
    except OSError:
        return None
    try:
        found = [n for n in sorted(os.listdir(fd)) if classify(n)[0] == "cache"]
        why = None
        for name in found[:UNLIKE_SAMPLE]:
            try:
                data = read_whole(fd, name, unread=True)
            except Rejected:
                continue
            why = hittable.why_never_hit(data) if data is not None else None
            if why is not None:
                break
    finally:
        os.close(fd)
    if why is None:
        return None
    fresh = own_dir.rstrip("/") + "-sealed"
    q = [signing.flags, *(shlex.quote(safe(p)) for p in (fresh, shared))]
    command = " ".join(shlex.quote(safe(w)) for w in job) if job else "<your job>"
    return (f"the entries of {safe(own_dir)} were {why}; so its keys are not the sealed "
            "cache's, and no entry could be compared with your own build",
            f"make a comparable build, a sealed run of the same job into a new directory "
            f"(XLA's sub-caches off, as sealed readers run): jaxcache run --sealed "
            f"{q[0]} --cache-dir {q[1]} -- {command}; then co-sign from it: "
            f"jaxcache seal {q[2]} {q[0]} --add-signature --from {q[1]}")


def _key_id(text: str) -> str:
    """--succeeds: a key id, a key text or a .pub file."""
    from jaxcache.trust.inputs import public_keys as trustkeys

    if len(text) == 16 and set(text) <= set("0123456789abcdef"):
        return text
    return trustkeys.load_public(text).id


def _own_build(own_dir: str, policy: Policy, stack: ExitStack, shared: str | None) -> Own:
    """The co-signer's own cache (`--from DIR`): the evidence of a second, independent
    approval, so it must be PRIVATE (writable by the co-signer alone: a policy's trusted
    writers, the publisher among them, would make it the first signer's word again) and
    stand apart from the shared directory."""
    import os

    from jaxcache import api
    from jaxcache.seal.publishing.tier_files import Rejected, apart, open_dir, read_whole

    own_dir = _existing_dir(own_dir)
    if shared is not None:
        try:
            apart(own_dir, shared)
        except JaxcacheError as exc:
            raise JaxcacheError(f"--from: {exc} (your own build, not the one you co-sign)") \
                from None
    report = api.audit(own_dir, policy=policy, scan_processes=False)
    if report.verdict is not Verdict.PRIVATE:
        raise UntrustedCacheError(report, "to co-sign from")
    fd = open_dir(report.resolved or own_dir)
    stack.callback(os.close, fd)

    def own(name: str) -> bytes | None:
        try:
            return read_whole(fd, name, unread=True)
        except Rejected:
            return None
    return own


def seal_bucket(url: str, signing: SigningChoice, given: tuple[str, ...], trust_writers: bool,
                policy: Policy, allow_unhittable: bool = False,
                warn: Callable[[str], None] | None = None) -> ScanResult:
    """Sign what is under a bucket prefix. jaxcache cannot see who wrote those objects (the
    bucket's IAM), so sealing them is refused unless the caller vouches for every writer."""
    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.seal.sweep import bucket_sweep as bucket_scan
    from jaxcache.trust.rules import target

    where = target.parse_bucket(url)
    if not trust_writers:
        raise JaxcacheError(
            f"refusing to seal {where.text}: jaxcache cannot check who can write that bucket "
            "(its IAM), and sealing vouches for whatever any writer put there; check by hand "
            "that only your publisher can write it, then pass --trust-bucket-writers")
    signer = signing.load()
    try:
        ring = trusted_keys_for(where.text, given, policy, required=False)
        _warn_untrusted_self(signer, ring, warn)
        return bucket_scan.seal(objects.open_store(where), signer, ring,
                                allow_unhittable=allow_unhittable, build=fingerprint.current())
    finally:
        _close(signer)


def seal_dir(directory: str, signing: SigningChoice, given: tuple[str, ...], policy: Policy,
             allow_unhittable: bool = False, *, require_origin: bool = False,
             warn: Callable[[str], None] | None = None) -> ScanResult:
    """Sign what is in a directory the caller trusts, claiming this Python's build compiled
    it (fingerprint.current(): run seal where the entries were made). Its audit must be PRIVATE or
    SHARED-BY-POLICY, because sealing vouches for whatever any writer put there. Entries a
    sealed reader never hits are left unsigned and fail it unless `allow_unhittable`.
    Entries of unknown origin are refused under CI or with `require_origin` (unless signed
    already); otherwise `warn(text)` hears of them before they are vouched for."""
    directory = _existing_dir(directory)
    signer = signing.load()
    try:
        return _seal_dir(directory, signer, given, policy, allow_unhittable,
                         require_origin=require_origin, warn=warn)
    finally:
        _close(signer)


def _seal_dir(directory: str, signer: Signer, given: tuple[str, ...], policy: Policy,
              allow_unhittable: bool, *, require_origin: bool,
              warn: Callable[[str], None] | None) -> ScanResult:
    from jaxcache.seal.sweep import dir_sweep as scan

    resolved, trusted = _vouchable(directory, signer, given, policy,
                                   require_origin=require_origin, warn=warn)
    return scan.seal(resolved, signer, trusted, allow_unhittable=allow_unhittable,
                     build=fingerprint.current())


def _vouchable(directory: str, signer: Signer, given: tuple[str, ...], policy: Policy, *,
               require_origin: bool, warn: Callable[[str], None] | None
               ) -> tuple[str, KeyRing]:
    """The directory (resolved) and the keys to trust, once its audit allows signing what it
    holds (seal and a generation's publish alike): PRIVATE or SHARED-BY-POLICY, entries of
    unknown origin named (refused under CI or `require_origin` unless signed already), none
    another build wrote unsigned. UntrustedCacheError or JaxcacheError otherwise."""
    from jaxcache import api
    from jaxcache.seal.stores.backend_reports import trusting

    report = api.audit(directory, policy=policy, scan_processes=False,
                       require_origin=require_origin)
    trusted = trusted_keys_for(directory, given, policy, required=False)
    _warn_untrusted_self(signer, trusted, warn)
    if report.verdict not in (Verdict.PRIVATE, Verdict.SHARED_BY_POLICY) and \
            not _only_signed_unknown(report, trusting(trusted, signer)):
        raise UntrustedCacheError(report, "to seal")
    for f in report.findings:
        if warn is not None and f.code in ("origin.unknown", "origin.changed") and \
                f.effect is Effect.WARNING:
            warn(f"{f.message}; sealing vouches for them (--require-origin refuses)")
    _refuse_other_builds(report, trusting(trusted, signer))
    return report.resolved or directory, trusted


def publish_generation(directory: str, store_text: str, signing: SigningChoice,
                       given: tuple[str, ...], policy: Policy, *, pointer: str,
                       allow_unhittable: bool = False, require_origin: bool = False,
                       warn: Callable[[str], None] | None = None,
                       progress: Callable[[int, int], None] | None = None) -> Published:
    """`seal DIR --generation STORE`: publish DIR's entries as a new generation in STORE (a
    directory, gs:// or s3://), signed, and move `pointer` to it. DIR's audit must allow
    sealing it (as `seal DIR`); the store's writers need no such audit: a reader trusts the
    signed manifest and each object's digest, never the store."""
    from jaxcache.seal.generations import manifest as m
    from jaxcache.seal.generations import reading
    from jaxcache.seal.generations.publishing import publish

    if not m.is_pointer(pointer):
        raise JaxcacheError(f"--pointer {m.not_a_pointer(pointer)}")
    directory = _existing_dir(directory)
    if not is_url(store_text):
        from jaxcache.seal.publishing.tier_files import apart

        store_dir = _existing_dir(store_text)
        try:
            apart(store_dir, directory)
        except JaxcacheError:
            raise JaxcacheError(f"the generation store {safe(store_text)} and the cache "
                                f"{safe(directory)} overlap: give a directory apart from it"
                                ) from None
    here = fingerprint.current()
    if here.build is None:
        raise JaxcacheError("this Python has no jaxlib: a generation names the build that "
                            "compiled each entry, so publish from the Python that made them")
    store = reading.store_at(store_text)
    signer: Signer | None = None
    try:
        signer = signing.load()
        resolved, ring = _vouchable(directory, signer, given, policy,
                                    require_origin=require_origin, warn=warn)
        return publish(resolved, store, signer, publisher=_publisher(signer), pointer=pointer,
                       build=here.id, allow_unhittable=allow_unhittable, progress=progress,
                       refused=_not_vouched(resolved, ring, signer))
    except StoreError as exc:
        raise JaxcacheError(f"{safe(store.url)}: {safe(exc.message)} (the pointer was not "
                            "moved: readers still see the generation they saw)") from None
    finally:
        if signer is not None:
            _close(signer)
        _close(store)


def _not_vouched(directory: str, ring: KeyRing, signer: Signer) -> dict[str, str]:
    """The entries of `directory` a generation of this build must not name, with why: those
    whose signatures fail (changed after signing, an unknown or revoked key: `seal` leaves them
    too), and those valid signatures say another build compiled (the manifest claims this
    build for each entry it names). Unsigned entries are the audit's to judge."""
    from jaxcache.seal.stores.backend_reports import trusting
    from jaxcache.seal.sweep import dir_sweep as scan

    out = {}
    for e in scan.verify(directory, trusting(ring, signer)).entries:
        if e.status not in ("valid", "unsigned"):
            out[e.name] = f"{e.status}: {e.reason} (a generation vouches for no such entry)"
        elif e.build is not None and e.build.state == "other-build":
            out[e.name] = (f"its signature says {e.build.words} compiled it: publish it "
                           "from that build")
    return out


def verify_generation(store_text: str, given: tuple[str, ...], policy: Policy, *,
                      pointer: str, name: str | None = None) -> Inspected:
    """`verify STORE --generation`: the generation `pointer` names (or `name`), its
    manifest's signature verified once as a reader would, then every object by its digest;
    the store's other generations and pointers listed. Refused (exit 1) when no generation
    can be read; JaxcacheError when the store cannot be."""
    from jaxcache.seal.generations import manifest as m
    from jaxcache.seal.generations import reading

    if not m.is_pointer(pointer):
        raise JaxcacheError(f"--pointer {m.not_a_pointer(pointer)}")
    if name is not None and not m.is_name(name):
        raise JaxcacheError(f"--name {safe(name)!r} is no generation's name (as verify lists "
                            "them: 20261207T222125.158Z-69e2a916)")
    store = reading.store_at(store_text)
    try:
        ring = trusted_keys_for(store.url, given, policy)
        chosen = name if name is not None else reading.pointed(store, pointer)
        found = reading.load(store, chosen, ring, None if name is not None else pointer)
        gens, pointers = reading.listed(store)
        return reading.Inspected(store.url, None if name is not None else pointer, found,
                                 reading.check_objects(store, found.manifest), gens, pointers)
    except StoreError as exc:
        raise JaxcacheError(f"{safe(store.url)}: {safe(exc.message)}") from None
    finally:
        _close(store)


def collect_generations(store_text: str, *, keep: int | None, max_age_s: float | None,
                        dry_run: bool) -> Collected:
    """`gc STORE --generations`: collecting.collect on the store at `store_text`; JaxcacheError
    (one line) when the store cannot be read or another gc holds it."""
    from jaxcache.seal.generations import collecting, reading

    store = reading.store_at(store_text)
    try:
        return collecting.collect(store, keep=keep, max_age_s=max_age_s, dry_run=dry_run)
    except StoreError as exc:
        raise JaxcacheError(f"{safe(store.url)}: {safe(exc.message)}") from None
    finally:
        _close(store)


def _publisher(signer: Signer) -> str:
    """Who the manifest says published it: the CI job's identity (keyless), else the key."""
    seen = getattr(signer, "seen", None)
    if seen is not None:
        return str(seen.text)
    public = signer.public
    return f"key {public.name} ({public.id})" if public.name else f"key {public.id}"


def _warn_untrusted_self(signer: Signer, ring: KeyRing,
                         warn: Callable[[str], None] | None) -> None:
    """A keyless signer whose own identity the policy does not trust: said once, before
    anything is signed (every reader would reject it)."""
    seen = getattr(signer, "seen", None)  # keyless: its certificate's claims
    if seen is None:
        return
    from jaxcache.seal.signing.identity_policy import rejection

    said = rejection(ring, seen)
    if said is not None and warn is not None:
        warn(safe(said))


def _close(held: Signer | ObjectStore) -> None:
    close = getattr(held, "close", None)  # a keyless signer's Sigstore session, a store's fds
    if close is not None:
        close()


def _closing(stack: ExitStack, signer: Signer) -> None:
    stack.callback(_close, signer)


def _refuse_other_builds(report: AuditReport, keys: KeyRing) -> None:
    """Sealing claims this Python's build compiled each entry it signs: an unsigned entry
    your ledger says another build (or another CPU) wrote, as after an upgrade or an in-place
    rebuild, would be signed as this build's and load on readers of this build (the crash
    the build binding exists to prevent). Refused, naming them; ones already signed keep the
    build their signatures claim."""
    from jaxcache.seal.sweep import dir_sweep as scan

    if report.origins is None or not report.origins.other_build():
        return
    other = {e.name for e in report.origins.other_build()}
    assert report.resolved is not None  # origins are judged only of a local directory
    valid = {e.name for e in scan.verify(report.resolved, keys).entries if e.status == "valid"}
    unsigned = sorted(other - valid)
    if unsigned:
        shown = some(unsigned)
        raise JaxcacheError(
            f"refusing to seal: your origin ledger says another build of jaxlib (or another "
            f"CPU) wrote {len(unsigned)} unsigned entries ({shown}), and sealing would claim "
            "this build compiled them; seal from the build that wrote them, or delete them "
            "(`jaxcache ls` flags them other-build) and seal again")


def _only_signed_unknown(report: AuditReport, keys: KeyRing) -> bool:
    """Refused only for origin (under CI: entries no watched job wrote), while each such entry
    already carries a valid signature of these keys (a sealed publisher wrote it): sealing
    vouches for none of them again, so the refusal does not apply."""
    from jaxcache.seal.sweep import dir_sweep as scan

    blocking = [f for f in report.findings if f.effect.fails]
    if not blocking or any(not f.code.startswith("origin.") for f in blocking):
        return False
    if report.untrusted or report.origins is None:
        return False
    doubtful = {e.name for e in report.origins.entries if e.origin != "yours"}
    assert report.resolved is not None  # origins are judged only of a local directory
    valid = {e.name for e in scan.verify(report.resolved, keys).entries if e.status == "valid"}
    return doubtful <= valid


def _existing_dir(directory: str) -> str:
    import os
    import stat

    from jaxcache.trust.kernel.walk import not_a_directory

    try:
        mode = os.stat(directory).st_mode
    except FileNotFoundError:
        raise JaxcacheError(f"no such directory: {safe(directory)}") from None
    except OSError as exc:
        raise JaxcacheError(f"cannot reach {safe(directory)}: {exc.strerror}") from None
    if not stat.S_ISDIR(mode):
        raise JaxcacheError(not_a_directory(directory, mode))
    return directory
