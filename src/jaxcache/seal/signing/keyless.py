"""Keyless sealing (issue 46): entries signed by the CI job's identity through Sigstore, not by
a key someone must keep; verified offline against a trusted root the policy names.

Signing: the job's OIDC token, obtained as its CI documents it (GitHub Actions: a request to
ACTIONS_ID_TOKEN_REQUEST_URL with ACTIONS_ID_TOKEN_REQUEST_TOKEN, which `permissions:
id-token: write` grants; GitLab: the `id_tokens:` variable SIGSTORE_ID_TOKEN with `aud:
sigstore`), buys one short-lived certificate from Fulcio for the whole job (a fresh token and
certificate only once it expires, after ~10 minutes); each entry's signature file then
carries its own Sigstore bundle (the certificate, the Rekor entry with its inclusion proof,
a timestamp) over `artifact(...)`: the very message a key signs (FORMAT, the cache key, the
digest and size of the exact bytes, signature_file.message) and the build claim when there
is one. So a bundle copied to another entry, or kept over other bytes, does not verify.

Verifying: sigstore-python checks the bundle against the trusted root alone (no network: the
certificate chains to Fulcio's root, carries a CT log's SCT, the log's entry and checkpoint
are signed by Rekor's key, and the certificate was valid at the log's or the TSA's time,
never at a time the signer claims), and the certificate's identity must meet the policy's
trusted identities, as sigstore's own policy objects (identity_policy.py) that the verifier
applies; the one rule (signature_rule.py) then asks which identity matched, and whether a
revoked one does.

Everything that touches the `sigstore` package (the jaxcache[sigstore] extra) is imported
inside these functions: the audit and plain runs never import it.
"""

from __future__ import annotations

import json
import os
import threading

from jaxcache.errors import JaxcacheError
from jaxcache.seal.signing import digest as digestmod
from jaxcache.text import safe
from jaxcache.trust.inputs.public_keys import PublicKey, SignerKind
from jaxcache.trust.rules import identities as ids

TYPE_CHECKING = False
if TYPE_CHECKING:
    from contextlib import ExitStack

    from cryptography.x509 import Certificate

    # sigstore's types, for the checker only (the extra may be absent)
    from sigstore.sign import Signer as _SigstoreSigner
    from sigstore.verify import Verifier

    from jaxcache.fingerprint.model import Fingerprint

__all__ = ["BUNDLE_LIMIT", "KeylessError", "KeylessSigner", "artifact", "ci_token", "claimed",
           "verify"]

BUNDLE_LIMIT = 28 << 10  # within the signature file's MAX_BYTES, with the rest of the document
_EXTRA = "the jaxcache[sigstore] extra (pip install 'jaxcache[sigstore]')"


class KeylessError(JaxcacheError):
    """No token, no certificate, no log entry, or a bundle that does not verify: one line."""


class Untrusted(KeylessError):
    """A bundle whose certificate chained to the trusted root with a valid SCT, but whose
    identity none of the policy's trusted identities admits (what it claims: `seen`)."""

    def __init__(self, seen: ids.SeenIdentity) -> None:
        super().__init__(f"identity {seen.text} is not trusted")
        self.seen = seen


def artifact(key: str, digest: bytes, size: int, relies_on: tuple[str, ...] | None,
             build: dict[str, object] | None) -> bytes:
    """What a keyless signature's bundle signs: a key's message, and the build claim."""
    from jaxcache.seal.signing import signature_file as sigfile

    signed = sigfile.message(key, digest, size, relies_on)
    if build is not None:
        signed += b"\n" + sigfile.build_message(key, digest, size, build)
    return signed


def ci_token() -> str:
    """The job's OIDC token for Sigstore (audience `sigstore`), as its CI hands it out."""
    try:
        from id import IdentityError, detect_credential
    except ImportError:
        raise KeylessError(f"--identity ci needs {_EXTRA}") from None
    if os.getenv("GITHUB_ACTIONS") == "true" and not os.getenv("ACTIONS_ID_TOKEN_REQUEST_URL"):
        raise KeylessError("GitHub Actions gives this job no OIDC token: grant it "
                           "`permissions: id-token: write` (docs/how-to/ci.md)")
    gitlab = os.getenv("SIGSTORE_ID_TOKEN")
    if os.getenv("GITLAB_CI") == "true" and gitlab:
        # the job's own token, before what the detector would try first (a runner on a cloud
        # VM would otherwise sign as the VM's service account, not as the pipeline)
        return gitlab
    try:
        token = detect_credential("sigstore")
    except IdentityError as exc:
        raise KeylessError(f"the CI's OIDC token could not be had: {safe(str(exc))}") from None
    if not token:
        raise KeylessError("no CI OIDC token found: on GitHub Actions grant `permissions: "
                           "id-token: write`; on GitLab give the job `id_tokens: "
                           "SIGSTORE_ID_TOKEN: aud: sigstore` (docs/how-to/ci.md)")
    return token


class KeylessSigner:
    """The job's identity as a signer: one Sigstore certificate for every entry it signs
    (renewed, with a fresh token, only when it expires). `trust_config`: a Sigstore client
    trust config (its services and trusted root; None: the public-good instance)."""

    def __init__(self, token: str | None = None, trust_config: str | None = None) -> None:
        self._token = token
        self._config = trust_config
        self._lock = threading.Lock()
        self._stack: ExitStack | None = None
        self._signer: _SigstoreSigner | None = None
        self.seen: ids.SeenIdentity | None = None  # the certificate's claims, once signed

    @property
    def public(self) -> PublicKey:
        """The identity this job signs as (its certificate's, once it has one)."""
        own = self.identity
        if own is None:
            return PublicKey(b"\0" * 32, kind=SignerKind.IDENTITY, subject="(not signed yet)")
        return PublicKey(own.raw, kind=SignerKind.IDENTITY, subject=own.subject)

    @property
    def identity(self) -> ids.TrustedIdentity | None:
        """Exactly the CI job its certificate states: what the publisher trusts itself as;
        None before it signed, or where the certificate does not state a whole job (it then
        trusts only the policy's identities)."""
        if self.seen is None:
            return None
        return ids.exact_of(self.seen)

    def _open(self) -> _SigstoreSigner:
        from contextlib import ExitStack

        try:
            from sigstore.models import ClientTrustConfig
            from sigstore.oidc import IdentityToken
            from sigstore.sign import SigningContext
        except ImportError:
            raise KeylessError(f"keyless signing needs {_EXTRA}") from None
        if self._config is not None:
            config = ClientTrustConfig.from_json(_read_text(self._config, "trust config"))
        else:
            config = ClientTrustConfig.production()
        token = IdentityToken(self._token or ci_token())
        self._token = None  # a renewal asks the CI again
        stack = ExitStack()
        signer = stack.enter_context(SigningContext.from_trust_config(config).signer(token))
        self._stack, self._signer = stack, signer
        return signer

    def identify(self) -> ids.SeenIdentity:
        """Who this job signs as, before it signs anything: its certificate, bought now (the
        one its entries are then signed with), its claims as Fulcio stated them. A command
        that must know the identity first (seal: the ring it judges with; a co-signer: the
        trusted identity it counts as) asks this; KeylessError: no token, no certificate."""
        with self._lock:
            if self.seen is None:
                try:
                    signer = self._signer or self._open()
                    cert = signer._signing_cert()
                except KeylessError:
                    raise
                except Exception as exc:  # the CI's token, Fulcio: the network
                    raise KeylessError(f"no Sigstore certificate for this job: "
                                       f"{type(exc).__name__}: {safe(str(exc))[:300]}"
                                       ) from None
                self.seen = _seen_of(cert)
            return self.seen

    def close(self) -> None:
        with self._lock:
            if self._stack is not None:
                self._stack.close()
            self._stack = self._signer = None

    def _bundle(self, signed: bytes) -> str:
        from sigstore._internal.fulcio.client import ExpiredCertificate
        from sigstore.errors import Error

        with self._lock:
            for attempt in (0, 1):
                signer = self._signer or self._open()
                try:
                    bundle = signer.sign_artifact(signed)
                except ExpiredCertificate:
                    if attempt:
                        raise KeylessError("the Sigstore certificate expired at once") from None
                    self._stack = self._signer = None  # a fresh token and certificate
                    continue
                except Error as exc:
                    raise KeylessError(f"keyless signing failed: {safe(str(exc))[:300]}"
                                       ) from None
                if self.seen is None:
                    self.seen = _seen_of(bundle.signing_certificate)
                text: str = bundle.to_json()
                return text
        raise KeylessError("keyless signing failed")  # not reached

    def document(self, key: str, data: bytes, relies_on: tuple[str, ...] | None = None,
                 build: Fingerprint | None = None) -> bytes:
        """The signature file for `data` under `key` (signature_file.sign's keyless half)."""
        from jaxcache.seal.signing import signature_file as sigfile

        digest = digestmod.of(data)
        ids_ = tuple(sorted(relies_on)) if relies_on is not None else None
        claim = sigfile.build_claim(build, 2048) if build is not None else None
        try:
            bundle = self._bundle(artifact(key, digest, len(data), ids_, claim))
        except KeylessError:
            raise
        except Exception as exc:  # the network, Fulcio, Rekor: the job goes on uncached
            raise KeylessError(f"keyless signing failed: {type(exc).__name__}: "
                               f"{safe(str(exc))[:300]}") from None
        doc: dict[str, object] = {"format": sigfile.FORMAT, "key": key, "digest": digest.hex(),
                                  "size": len(data), "sigstore_bundle": bundle}
        if ids_ is not None:
            doc["relies_on"] = list(ids_)
        if claim is not None:
            doc["build"] = claim
        return (json.dumps(doc, sort_keys=True) + "\n").encode()


def _read_text(path: str, what: str) -> str:
    """A trusted root or trust config: a protected input (whoever can change it chooses which
    certificates, logs and times a reader believes)."""
    from jaxcache.trust.inputs import trusted_file as inputs

    try:
        found = inputs.read(path, inputs.SIGSTORE_ROOT)
    except inputs.InputError as exc:
        raise KeylessError(str(exc)) from None
    assert found is not None
    try:
        return found.data.decode("utf-8")
    except UnicodeDecodeError:
        raise KeylessError(f"the Sigstore {what} {safe(path)} is not UTF-8 text") from None


_VERIFIERS: dict[str | None, Verifier] = {}
_VERIFIERS_LOCK = threading.Lock()


def _verifier(trust_root: str | None) -> Verifier:
    with _VERIFIERS_LOCK:
        found = _VERIFIERS.get(trust_root)
        if found is not None:
            return found
        try:
            from sigstore.errors import Error
            from sigstore.models import ClientTrustConfig, TrustedRoot
            from sigstore.verify import Verifier
            from sigstore_models.trustroot import v1 as trustroot_v1
        except ImportError:
            raise KeylessError(f"judging a keyless signature needs {_EXTRA}") from None
        try:
            if trust_root is None:  # the public-good instance's, through TUF (the network)
                root = ClientTrustConfig.production().trusted_root
            else:
                root = TrustedRoot(trustroot_v1.TrustedRoot.from_json(
                    _read_text(trust_root, "trusted root")))
            made = Verifier(trusted_root=root)
        except KeylessError:
            raise
        except (Error, ValueError) as exc:
            where = safe(trust_root) if trust_root else "the public-good instance (TUF)"
            raise KeylessError(f"the Sigstore trusted root of {where} is unusable: "
                               f"{safe(str(exc))[:200]}") from None
        except Exception as exc:  # TUF's network and metadata errors
            raise KeylessError("the public-good Sigstore trusted root could not be had "
                               f"({type(exc).__name__}); offline, name one with "
                               "sigstore_trust_root in the policy") from None
        _VERIFIERS[trust_root] = made
        return made


class _Reached:
    """The trusted identities' policy (identity_policy.any_of), as sigstore's verifier applies
    it, noting that it was reached: by then the certificate chained to Fulcio's root with a
    valid SCT, so its refusal means an identity the policy does not trust (what it claims is
    worth saying), not a bundle that does not verify."""

    def __init__(self, trusted: tuple[ids.TrustedIdentity, ...]) -> None:
        from jaxcache.seal.signing import identity_policy

        self.policy = identity_policy.any_of(trusted)
        self.refused: Certificate | None = None

    def verify(self, cert: Certificate) -> None:
        from sigstore.errors import VerificationError

        try:
            self.policy.verify(cert)
        except VerificationError:
            self.refused = cert
            raise


def prepare(trust_root: str | None) -> None:
    """The verifier made and verify()'s imports done now, on the caller's thread, for a caller
    about to verify on threads of its own while the process imports (prefetch)."""
    _verifier(trust_root)
    from sigstore.errors import Error  # noqa: F401
    from sigstore.models import Bundle  # noqa: F401

    from jaxcache.seal.signing import identity_policy  # noqa: F401


def verify(bundle: str, signed: bytes, trust_root: str | None,
           trusted: tuple[ids.TrustedIdentity, ...]) -> ids.SeenIdentity:
    """The identity whose certificate signed exactly `signed`, verified offline against the
    trusted root and admitted by one of the `trusted` identities (sigstore's policies: the
    verifier refuses any other); Untrusted for a certificate that chained but whose identity
    none admits, KeylessError saying why for anything else (a writer chose these bytes)."""
    if len(bundle) > BUNDLE_LIMIT:
        raise KeylessError(f"its Sigstore bundle is larger than {BUNDLE_LIMIT} bytes")
    verifier = _verifier(trust_root)
    from sigstore.errors import Error
    from sigstore.models import Bundle

    policy = _Reached(trusted)
    try:
        parsed = Bundle.from_json(bundle)
        verifier.verify_artifact(signed, parsed, policy)
        return _seen_of(parsed.signing_certificate)
    except Error as exc:
        if policy.refused is not None:
            raise Untrusted(_seen_of(policy.refused)) from None
        raise KeylessError(safe(str(exc))[:300]) from None
    except Exception as exc:  # a malformed bundle: pydantic, asn1, cryptography errors
        raise KeylessError(f"unreadable Sigstore bundle ({type(exc).__name__})") from None


def claimed(sig: bytes) -> ids.SeenIdentity | None:
    """The identity a keyless signature file's certificate names, unverified (`ls` shows it
    as a claim, as it shows the key a signature file names; verify checks it): None for a
    key's signature, where it names none that can be read, or without the jaxcache[sigstore]
    extra."""
    from jaxcache.seal.signing import signature_file as sigfile
    from jaxcache.trust.inputs.public_keys import KeyFileError

    try:
        bundle = sigfile.read(sig).bundle
    except (ValueError, KeyFileError):
        return None
    if bundle is None or len(bundle) > BUNDLE_LIMIT:
        return None
    try:
        from sigstore.models import Bundle
    except ImportError:
        return None
    try:
        return _seen_of(Bundle.from_json(bundle).signing_certificate)
    except Exception:  # a malformed bundle: pydantic, asn1, cryptography errors
        return None


def _seen_of(cert: Certificate) -> ids.SeenIdentity:
    from jaxcache.seal.signing.identity_policy import seen_of

    return seen_of(cert)
