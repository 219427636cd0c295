"""Signing keys: generated, saved, loaded (a file, or an HSM through pkcs11.py).

Their public halves, and the public keys a policy trusts (how they are written, named and
told apart), are trust/keys.py's. The private key is PKCS#8 PEM, created 0600 with
O_EXCL|O_NOFOLLOW: never over an existing file and never inside a cache directory, where the
cache's writers could read or replace it.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from jaxcache.errors import JaxcacheError
from jaxcache.text import quoted, safe
from jaxcache.trust.keys import NAME, PREFIX, KeyFileError, PublicKey
from jaxcache.values import frozen


@frozen
class SigningKey:
    private: Any  # cryptography's Ed25519PrivateKey, or a PKCS#11 key (seal/pkcs11.py)
    public: PublicKey
    path: str | None = None

    def sign(self, message: bytes) -> bytes:
        return self.private.sign(message)


def generate(name: str | None = None) -> SigningKey:
    from dataclasses import replace

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    if name is not None and not NAME.fullmatch(name):
        raise KeyFileError(f"key name {quoted(name, 70)} is not a key name (letters, digits, "
                           "'.', '_' and '-', at most 64, starting with a letter or digit)")
    private = Ed25519PrivateKey.generate()
    return SigningKey(private, replace(_public_of(private), name=name))


def _public_of(private) -> PublicKey:
    from cryptography.hazmat.primitives import serialization

    raw = private.public_key().public_bytes(serialization.Encoding.Raw,
                                            serialization.PublicFormat.Raw)
    return PublicKey(raw)


def looks_like_cache_dir(directory: str) -> bool:
    """A directory holding JAX cache entries, or the one JAX is configured to use."""
    from jaxcache.trust.entries import classify

    real = os.path.realpath(directory)
    configured = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    if configured and (real + "/").startswith(os.path.realpath(configured).rstrip("/") + "/"):
        return True
    try:
        names = os.listdir(real)
    except OSError:
        return False
    return any(classify(n)[0] in ("cache", "atime", "lockfile") for n in names)


def save(key: SigningKey, path: str, created: list[str] | None = None) -> str:
    """Write the private key 0600 at a new path; the public key goes beside it as PATH.pub.
    Missing parent folders are made 0700 (documented: `jaxcache keygen keys/ci.key`); each
    one made is appended to `created`, so the caller can say so."""
    if not path or path.endswith("/"):
        raise KeyFileError(f"give a file name for the key, not {quoted(path)}")
    path = os.path.abspath(path)
    parent = os.path.dirname(path)
    if looks_like_cache_dir(parent):
        raise KeyFileError(f"refusing to keep a signing key in {safe(parent)}: it is (or is "
                           "inside) a compilation cache, whose writers could read or replace it")
    made, dfd = _make_parents(parent)
    if created is not None:
        created.extend(made)
    try:
        _write_pair(key, path, dfd)
    finally:
        os.close(dfd)
    return path


def _write_pair(key: SigningKey, path: str, dfd: int) -> None:
    """The private key (0600) and PATH.pub (0644), each created new in the folder `dfd`."""
    from cryptography.hazmat.primitives import serialization

    pem = key.private.private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
    for target, data, mode in ((path, pem, 0o600),
                               (path + ".pub", (key.public.named_text + "\n").encode(), 0o644)):
        name = os.path.basename(target)
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW |
                         os.O_CLOEXEC, mode, dir_fd=dfd)
        except FileExistsError:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            what = "a directory" if stat.S_ISDIR(st.st_mode) else \
                "a symbolic link" if stat.S_ISLNK(st.st_mode) else "a file"
            raise KeyFileError(f"{safe(target)} already exists ({what}); jaxcache never "
                               "overwrites a key, give a new file name") from None
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)  # whatever the umask
            f.write(data)
            f.flush()
            os.fsync(f.fileno())


def _make_parents(parent: str) -> tuple[list[str], int]:
    """Each missing folder of `parent` made 0700 (folders.private_folders): a key's folder must
    be yours or root's and writable by nobody else, else its owner could swap the key or .pub."""
    from jaxcache import folders

    try:
        return folders.private_folders(parent, "signing key")
    except JaxcacheError as exc:
        raise KeyFileError(str(exc)) from None


def load_signing(path: str) -> SigningKey:
    """Load a private key through the trusted-input loader (trust/inputs.py), refusing one
    that is not yours alone: others able to read it could sign entries you would load.
    A `pkcs11:` URI names a key in a token instead (seal/pkcs11.py, docs/hsm.md)."""
    from jaxcache.seal import pkcs11

    if pkcs11.is_uri(path):  # the token signs; pkcs11.py sits below this module
        try:
            signer = pkcs11.load(path)
        except pkcs11.TokenError as exc:
            raise KeyFileError(str(exc)) from None
        return SigningKey(signer, PublicKey(signer.public), path)
    from jaxcache.trust import inputs

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
