"""Certificates carrying Fulcio's claims, made with `cryptography` (self-signed, no chain):
what sigstore's policy objects read when they judge an identity, without the loopback
Sigstore (tests/support/sigstore_stack.py mints real ones, chained, for the end-to-end
tests). Claims are encoded as Fulcio encodes its v2 extensions (DER UTF8String), the issuer
also in the legacy extension (raw text), the workflow as the SAN URI."""

from __future__ import annotations

import datetime

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

GH = "https://token.actions.githubusercontent.com"
WF = "org/repo/.github/workflows/jax-cache.yml@refs/heads/main"
OID = "1.3.6.1.4.1.57264.1."
_KEY = ec.generate_private_key(ec.SECP256R1())


def _utf8(text: str) -> bytes:
    data = text.encode()
    n = len(data)
    length = bytes([n]) if n < 0x80 else bytes([0x80 | ((n.bit_length() + 7) // 8)]) + \
        n.to_bytes((n.bit_length() + 7) // 8, "big")
    return b"\x0c" + length + data


def certificate(*, issuer: str = GH, san: str | None = None, repository: str | None = None,
                ref: str | None = "refs/heads/main", caller: str | None = None,
                event: str | None = "push", commit: str | None = "a" * 40,
                run: str | None = None) -> x509.Certificate:
    """A certificate whose claims are these (GitHub's defaults: the trusted workflow WF on
    main, started by a push from itself). `caller` None: the workflow itself."""
    san = san if san is not None else f"https://github.com/{WF}"
    repository = repository if repository is not None else "https://github.com/org/repo"
    caller = caller if caller is not None else san
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "sigstore.test")])
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
               .public_key(_KEY.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=1))
               .not_valid_after(now + datetime.timedelta(minutes=10))
               .add_extension(x509.SubjectAlternativeName(
                   [x509.UniformResourceIdentifier(san)] if "@" not in san or "://" in san
                   else [x509.RFC822Name(san)]), critical=False)
               .add_extension(x509.UnrecognizedExtension(
                   x509.ObjectIdentifier(OID + "1"), issuer.encode()), critical=False))
    for n, value in ((8, issuer), (9, san), (12, repository), (13, commit), (14, ref),
                     (18, caller), (20, event), (21, run)):
        if value is not None:
            builder = builder.add_extension(x509.UnrecognizedExtension(
                x509.ObjectIdentifier(f"{OID}{n}"), _utf8(value)), critical=False)
    return builder.sign(_KEY, hashes.SHA256())


def seen(**claims: str | None):  # -> SeenIdentity
    """The claims of certificate(**claims), as keyless verification reads them."""
    from jaxcache.seal.signing.identity_policy import seen_of

    return seen_of(certificate(**claims))
