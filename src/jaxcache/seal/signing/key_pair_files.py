"""A new signing key pair written to disk: keygen's output (the key, generated and loaded, is
trust/inputs/signing_keys.py's). The private key is PKCS#8 PEM, created 0600 with
O_EXCL|O_NOFOLLOW: never over an existing file and never inside a cache directory, where the
cache's writers could read or replace it; missing folders are made 0700 (folders.py).
"""

from __future__ import annotations

import os
import stat

from jaxcache import folders
from jaxcache.errors import JaxcacheError
from jaxcache.text import quoted, safe
from jaxcache.trust.inputs.public_keys import KeyFileError
from jaxcache.trust.inputs.signing_keys import SigningKey
from jaxcache.trust.kernel.entries import classify


def looks_like_cache_dir(directory: str) -> bool:
    """A directory holding JAX cache entries, or the one JAX is configured to use."""
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
    try:
        return folders.private_folders(parent, "signing key")
    except JaxcacheError as exc:
        raise KeyFileError(str(exc)) from None
