"""Signing keys: generated, and loaded (a file, or an HSM through pkcs11.py); a new key pair is
written by seal/signing/key_pair_files.py (keygen's output, made with folders.py above this layer).

Their public halves, and the public keys a policy trusts (how they are written, named and
told apart), are trust/inputs/public_keys.py's. The private key is PKCS#8 PEM, created 0600 with
O_EXCL|O_NOFOLLOW: never over an existing file and never inside a cache directory, where the
cache's writers could read or replace it.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from jaxcache.text import quoted, safe
from jaxcache.trust.inputs.pkcs11_uri import is_uri
from jaxcache.trust.inputs.public_keys import NAME, PREFIX, KeyFileError, PublicKey

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


@dataclass(frozen=True, slots=True)
class SigningKey:
    private: Any  # cryptography's Ed25519PrivateKey, or a PKCS#11 key (trust/inputs/pkcs11.py)
    public: PublicKey
    path: str | None = None

    def sign(self, message: bytes) -> bytes:
        signature: bytes = self.private.sign(message)  # both kinds return the 64 bytes
        return signature


def generate(name: str | None = None) -> SigningKey:
    from dataclasses import replace

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    if name is not None and not NAME.fullmatch(name):
        raise KeyFileError(f"key name {quoted(name, 70)} is not a key name (letters, digits, "
                           "'.', '_' and '-', at most 64, starting with a letter or digit)")
    private = Ed25519PrivateKey.generate()
    return SigningKey(private, replace(_public_of(private), name=name))


def _public_of(private: Ed25519PrivateKey) -> PublicKey:
    from cryptography.hazmat.primitives import serialization

    raw = private.public_key().public_bytes(serialization.Encoding.Raw,
                                            serialization.PublicFormat.Raw)
    return PublicKey(raw)


def load_signing(path: str) -> SigningKey:
    """Load a private key through the trusted-input loader (trust/inputs/trusted_file.py), refusing
    one that is not yours alone: others able to read it could sign entries you would load. A
    `pkcs11:` URI names a key in a token instead (trust/inputs/pkcs11.py, docs/how-to/hsm.md)."""
    if is_uri(path):  # the token signs; pkcs11.py (its library's loader) only then
        from jaxcache.trust.inputs import pkcs11

        try:
            signer = pkcs11.load(path)
        except pkcs11.TokenError as exc:
            raise KeyFileError(str(exc)) from None
        return SigningKey(signer, PublicKey(signer.public), path)
    from jaxcache.trust.inputs import trusted_file as inputs

    found = inputs.read(path, inputs.SIGNING_KEY)
    assert found is not None
    if found.data.startswith(PREFIX.encode()):
        raise KeyFileError(f"{safe(path)} is a public key; sign with the private key "
                           "`jaxcache keygen` wrote beside it (without .pub)")
    if found.uid != os.geteuid() or stat.S_IMODE(found.mode) & 0o077:
        raise KeyFileError(f"signing key {safe(path)} must be yours and mode 0600 (it is "
                           f"uid {found.uid}, mode {stat.S_IMODE(found.mode):04o})")
    return signing_from(found.data, path)


def signing_from(data: bytes, path: str) -> SigningKey:
    """The Ed25519 private key in `data` (the bytes of `path`), or one line saying why not."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        private = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"{safe(path)} is not an unencrypted PEM private key: "
                           f"{safe(str(exc))}") from None
    except UnsupportedAlgorithm as exc:
        raise KeyFileError(f"{safe(path)} is not a usable private key: "
                           f"{safe(str(exc))}") from None
    if not isinstance(private, Ed25519PrivateKey):
        raise KeyFileError(f"{safe(path)} is not an Ed25519 key")
    return SigningKey(private, _public_of(private), os.path.abspath(path))
