"""The loopback Sigstore the keyless tests sign against (tests/support/sigstore_stack.py):
sigstore-python signs there with a trust config and verifies offline from the trusted root
alone, and the verifier tells identities apart. No jaxcache code here: if this fails, the
stand-ins are broken, not the sealed cache."""

from __future__ import annotations

import socket

import pytest
from support.sigstore_stack import GITHUB

WORKFLOW = "https://github.com/org/repo/.github/workflows/jax-cache.yml@refs/heads/main"


def _sign(stack, token: str, data: bytes):
    from sigstore.models import ClientTrustConfig
    from sigstore.oidc import IdentityToken
    from sigstore.sign import SigningContext

    config = ClientTrustConfig.from_json(stack.trust_config.read_text())
    with SigningContext.from_trust_config(config).signer(IdentityToken(token)) as signer:
        return [signer.sign_artifact(d) for d in data]


def test_signs_on_loopback_and_verifies_offline(sigstore_stack, monkeypatch):
    from cryptography.hazmat.primitives import hashes
    from sigstore.errors import Error
    from sigstore.models import Bundle, TrustedRoot
    from sigstore.verify import Verifier, policy

    arts = [b"entry one", b"entry two"]
    bundles = [b.to_json() for b in _sign(sigstore_stack, sigstore_stack.mint("github"), arts)]
    pr = _sign(sigstore_stack, sigstore_stack.mint("github", ref="refs/pull/1/merge"),
               arts[:1])[0].to_json()

    def no_network(*a, **k):
        raise AssertionError(f"network access while verifying: {a}")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    verifier = Verifier(trusted_root=TrustedRoot.from_file(str(sigstore_stack.trusted_root)))
    trusted = policy.Identity(identity=WORKFLOW, issuer=GITHUB)
    parsed = [Bundle.from_json(b) for b in bundles]
    for art, bundle in zip(arts, parsed, strict=True):
        verifier.verify_artifact(art, bundle, trusted)
    # one certificate for the whole signer, not one per artifact
    assert len({b.signing_certificate.fingerprint(hashes.SHA256()) for b in parsed}) == 1
    with pytest.raises(Error, match="digest mismatch"):
        verifier.verify_artifact(arts[1], parsed[0], trusted)
    with pytest.raises(Error, match="refs/pull/1/merge"):
        verifier.verify_artifact(arts[0], Bundle.from_json(pr), trusted)
