"""Signing keys held in a token (an HSM, SoftHSM2), named by RFC 7512 `pkcs11:` URIs.

A key file is a secret on disk: whoever reads it once can sign forever. A key in a token
signs but never leaves it, so a publisher can be given the use of the key without a copy:

    pkcs11:token=ci;object=jaxcache?module-path=/usr/lib/softhsm/libsofthsm2.so
        &pin-source=file:/etc/jaxcache/ci.pin

What the URI makes jaxcache trust is judged as any trusted input (trust/inputs/trusted_file.py): the
PIN file must be yours alone (whoever reads it can use the key), the library is code loaded into
this process (yours or root's, writable by no one else, nor its folders). The PIN is never taken
from the URI itself (`pin-value`): a command line shows in /proc and shell history. The binding
(python-pkcs11, the `pkcs11` extra) is imported only when a URI is used.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import stat
import threading
from dataclasses import dataclass
from typing import Any

from jaxcache.text import quoted, safe
from jaxcache.trust.inputs.pkcs11_uri import SCHEME, TokenError, Uri, is_uri, parse

__all__ = ["SCHEME", "TokenError", "TokenPublic", "TokenSigner", "Uri", "is_uri", "load", "parse",
           "public_of"]

# CKA_EC_PARAMS of Ed448 (OID 1.3.101.113, or a PrintableString as SoftHSM2 keeps it), named
# when refused; any other curve fails the self-test signature
_ED448_PARAMS = (bytes.fromhex("06032b6571"), b"\x13\x0aedwards448")
_SELF_TEST = b"jaxcache.pkcs11/1 self-test\n"

# C_Initialize(NULL) lets the library assume one thread at a time: every call into it holds
# this lock (JAX writes entries from several threads). A fork gives the child a fresh one.
_LOCK = threading.RLock()
_LIBRARIES: dict[str, Any] = {}  # judged path -> the loaded library, once per process
_SESSIONS: dict[tuple[str, int], tuple[Any, bytes]] = {}  # logged in, with the PIN's digest
_STALE: set[str] = set()  # libraries the parent initialized: the child initializes again


def _after_fork() -> None:
    global _LOCK
    _LOCK = threading.RLock()  # another thread may have held it at the fork
    _SESSIONS.clear()  # the parent's sessions: PKCS#11 lets no child use them
    _STALE.update(_LIBRARIES)


os.register_at_fork(after_in_child=_after_fork)


def load(text: str) -> TokenSigner:
    """The signer of the key a URI names, holding its public key's 32 bytes (`public`); the
    private half stays in the token, which signs. keys.load_signing makes it a SigningKey."""
    uri = parse(text)
    if uri.type == "public":
        raise TokenError("pkcs11 URI: type=public names the public key; sign with "
                         "type=private (or leave type out)")
    if uri.pin_file is None:
        raise TokenError("pkcs11 URI: no PIN: add pin-source=file:/path/to/pin (a file only "
                         "you can read, mode 0600) after '?'")
    return _pair(uri, uri.pin_file)


@dataclass(frozen=True, slots=True)
class TokenPublic:
    """`keygen --public-of`'s answer: the public key, and whether it is the named private
    key's own (checked only when logged in: the private key is hidden otherwise)."""

    raw: bytes  # the 32 bytes of the Ed25519 public key
    unchecked: str | None  # why it was not checked against the private key; None: it was


def public_of(text: str) -> TokenPublic:
    """The public key of the pair a URI names. With the URI's PIN, it is the one that
    verifies a signature of the private key the URI names (the self-test load() makes),
    else refused: a public object of another pair under the same label or id would have
    readers trust a key whose holder is not this key's (an attacker's own pair among them).
    Without a PIN only the public object is read (the token hides its private objects), and
    the answer says it was not checked."""
    uri = parse(text)
    if uri.pin_file is not None:
        return TokenPublic(_pair(uri, uri.pin_file).public, None)
    p11 = _binding()
    lib = _library(uri, p11)
    with _LOCK:
        try:
            session = _token(lib, uri, p11).open()
            try:
                raw = _public_raw(session, uri, p11)
            finally:
                session.close()
        except p11.PKCS11Error as exc:
            raise TokenError(f"token {quoted(uri.token)}: {_why(exc)}") from None
    return TokenPublic(raw, f"the public key {uri.key_name} on token {quoted(uri.token)} was "
                            "read without logging in, so it was not checked against the "
                            "private key: a public key object of another pair under this "
                            "name would be printed all the same. Add pin-source=file:PIN to "
                            "the URI to check that it verifies the private key's signature")


def _pair(uri: Uri, pin_file: str) -> TokenSigner:
    """The private key the URI names and its public key, logged in with the PIN file's PIN;
    refused unless the public key verifies a signature the private key makes now."""
    pin = _pin(pin_file)
    p11 = _binding()
    lib = _library(uri, p11)
    with _LOCK:
        try:
            session = _logged_in(lib, _token(lib, uri, p11), uri, pin, p11)
            private = _one(session, uri, p11.ObjectClass.PRIVATE_KEY, "private key", p11)
            _ed25519(private, uri, p11)
            raw = _public_raw(session, uri, p11)
        except p11.PKCS11Error as exc:
            raise TokenError(f"token {quoted(uri.token)}: {_why(exc)}") from None
    signer = TokenSigner(private, raw, f"key {uri.key_name} on token {quoted(uri.token)}")
    _self_test(signer, uri)
    return signer


class TokenSigner:
    """The private half, as SigningKey holds it: `sign` asks the token. Never copied or
    pickled (what would be copied is a session handle, good in this process only)."""

    def __init__(self, key: Any, public: bytes, where: str) -> None:
        self._key, self._where, self._pid = key, where, os.getpid()
        self.public = public  # the raw Ed25519 public key, read from the token

    def sign(self, message: bytes) -> bytes:
        p11 = _binding()
        if os.getpid() != self._pid:
            raise TokenError(f"the token session of {self._where} belongs to process "
                             f"{self._pid}; PKCS#11 lets no forked child use it (start "
                             "children with spawn: each opens its own)")
        with _LOCK:
            try:
                return bytes(self._key.sign(message, mechanism=p11.Mechanism.EDDSA))
            except p11.PKCS11Error as exc:
                raise TokenError(f"signing with {self._where} failed: {_why(exc)}") from None

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("a key in a token cannot be copied or pickled")

    def __repr__(self) -> str:
        return f"<TokenSigner {self._where}>"


def _binding() -> Any:
    try:
        import pkcs11
    except ImportError:
        raise TokenError("a pkcs11: signing key needs python-pkcs11: pip install "
                         "'jaxcache[pkcs11]'") from None
    return pkcs11


def _pin(path: str) -> str:
    """The PIN file, judged as a signing key is: yours, 0600 or stricter, in folders only you
    or root can change. One trailing newline is not part of the PIN."""
    from jaxcache.trust.inputs import trusted_file as inputs

    try:
        found = inputs.read(path, inputs.PIN_FILE)
    except inputs.InputError as exc:
        raise TokenError(str(exc)) from None
    assert found is not None
    if found.uid != os.geteuid() or stat.S_IMODE(found.mode) & 0o077:
        raise TokenError(f"PIN file {safe(path)} must be yours and mode 0600 (it is uid "
                         f"{found.uid}, mode {stat.S_IMODE(found.mode):04o}): whoever can "
                         "read it can sign with the token's key")
    data = found.data[:-1] if found.data.endswith(b"\n") else found.data
    data = data[:-1] if data.endswith(b"\r") else data
    if not data:
        raise TokenError(f"PIN file {safe(path)} is empty")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise TokenError(f"PIN file {safe(path)} is not UTF-8 text") from None


def _library(uri: Uri, p11: Any) -> Any:
    """The library, judged before it is loaded: it runs as this process."""
    from jaxcache.trust.inputs import trusted_file as inputs

    try:
        fd, st = inputs.opened(uri.module, inputs.LIBRARY, follow=True)
    except inputs.InputError as exc:
        raise TokenError(str(exc)) from None
    try:
        path = os.readlink(f"/proc/self/fd/{fd}")  # the judged file, links followed
        with _LOCK:
            lib = _LIBRARIES.get(path)
            try:
                if lib is None:
                    lib = p11.lib(path)
                    _LIBRARIES[path] = lib
                elif path in _STALE:
                    lib.reinitialize()
                _STALE.discard(path)
            except p11.PKCS11Error as exc:
                why = str(exc).rsplit(": ", 1)[-1] if str(exc) else _why(exc)
                raise TokenError(f"cannot load PKCS#11 library {safe(uri.module)}: "
                                 f"{safe(why)}") from None
            now = os.stat(path)
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                raise TokenError(f"PKCS#11 library {safe(uri.module)} changed while it "
                                 "was being loaded")
    finally:
        os.close(fd)
    return lib


def _token(lib: Any, uri: Uri, p11: Any) -> Any:
    try:
        return lib.get_token(token_label=uri.token)
    except p11.NoSuchToken:
        labels = sorted({t.label for t in lib.get_tokens() if t.label})
        there = ", ".join(quoted(x) for x in labels[:5]) or "none"
        raise TokenError(f"no token labelled {quoted(uri.token)} in {safe(uri.module)} "
                         f"(tokens there: {there})") from None
    except p11.MultipleTokensReturned:
        raise TokenError(f"more than one token is labelled {quoted(uri.token)} in "
                         f"{safe(uri.module)}: relabel one") from None


def _logged_in(lib: Any, token: Any, uri: Uri, pin: str, p11: Any) -> Any:
    """One logged-in session per token and process: the login is the token's, not the
    session's, so a second login would be refused (CKR_USER_ALREADY_LOGGED_IN)."""
    where = (lib.so, token.slot.slot_id)
    digest = hashlib.sha256(pin.encode()).digest()
    held = _SESSIONS.get(where)
    if held is not None:
        if not hmac.compare_digest(held[1], digest):
            raise TokenError(f"token {quoted(uri.token)} is already open in this process "
                             f"with another PIN than {safe(uri.pin_file or '')}'s")
        return held[0]
    try:
        session = token.open(user_pin=pin)
    except p11.PinIncorrect:
        raise TokenError(f"the PIN in {safe(uri.pin_file or '')} is wrong for token "
                         f"{quoted(uri.token)} (CKR_PIN_INCORRECT)") from None
    except p11.UserAlreadyLoggedIn:  # logged in by someone else in this process
        session = token.open()
    _SESSIONS[where] = (session, digest)
    return session


def _one(session: Any, uri: Uri, cls: Any, what: str, p11: Any) -> Any:
    attrs: dict[Any, Any] = {p11.Attribute.CLASS: cls}
    if uri.object is not None:
        attrs[p11.Attribute.LABEL] = uri.object
    if uri.id is not None:
        attrs[p11.Attribute.ID] = uri.id
    found = list(session.get_objects(attrs))
    if not found:
        raise TokenError(f"no {what} {uri.key_name} on token {quoted(uri.token)}")
    if len(found) > 1:
        raise TokenError(f"{len(found)} {what}s match {uri.key_name} on token "
                         f"{quoted(uri.token)}: add id= (or object=) to choose one")
    return found[0]


def _ed25519(key: Any, uri: Uri, p11: Any) -> None:
    """Refuse another algorithm by name (the private or the public object: both say)."""
    kind = key[p11.Attribute.KEY_TYPE]
    if kind != p11.KeyType.EC_EDWARDS:
        name = getattr(kind, "name", str(kind))
        raise TokenError(f"key {uri.key_name} on token {quoted(uri.token)} has key type "
                         f"{name}, not Ed25519 (jaxcache signs with Ed25519 only)")
    try:
        params = bytes(key[p11.Attribute.EC_PARAMS])
    except p11.PKCS11Error:
        return  # the self-test signature decides
    if params in _ED448_PARAMS:
        raise TokenError(f"key {uri.key_name} on token {quoted(uri.token)} is an Ed448 key, "
                         "not Ed25519 (jaxcache signs with Ed25519 only)")


def _public_raw(session: Any, uri: Uri, p11: Any) -> bytes:
    """The 32 bytes of the public key object beside the private one (same label and id).
    CKA_EC_POINT is a DER OCTET STRING (04 20 + 32 bytes) in SoftHSM2; some tokens keep the
    raw 32 bytes."""
    public = _one(session, uri, p11.ObjectClass.PUBLIC_KEY, "public key", p11)
    _ed25519(public, uri, p11)
    point = bytes(public[p11.Attribute.EC_POINT])
    if len(point) == 34 and point[:2] == b"\x04\x20":
        point = point[2:]
    if len(point) != 32:
        raise TokenError(f"the public key {uri.key_name} on token {quoted(uri.token)} is "
                         f"not an Ed25519 point ({len(point)} bytes, want 32)")
    return point


def _self_test(signer: TokenSigner, uri: Uri) -> None:
    """One signature checked before any is published: a public key object that is not the
    private key's (another pair's label) would make readers reject every entry signed."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    message = _SELF_TEST + os.urandom(16)
    signature = signer.sign(message)
    try:
        Ed25519PublicKey.from_public_bytes(signer.public).verify(signature, message)
    except InvalidSignature:
        raise TokenError(f"the public key {uri.key_name} on token {quoted(uri.token)} does "
                         "not verify the private key's signature: not one pair") from None


def _why(exc: BaseException) -> str:
    """A PKCS#11 error in words: its CKR_ name, and python-pkcs11's detail where it has one."""
    name = type(exc).__name__
    code = "CKR_" + re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()
    detail = str(exc).strip()
    if name == "PKCS11Error":
        return safe(detail) or "unknown PKCS#11 error"
    return f"{code} ({safe(detail)})" if detail else code


__all__ = ["TokenError", "TokenPublic", "TokenSigner", "Uri", "is_uri", "load", "parse",
           "public_of"]
