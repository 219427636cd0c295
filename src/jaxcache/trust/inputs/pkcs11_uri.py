"""RFC 7512 `pkcs11:` URIs: which key, in which token, through which library, with the PIN
read from where (trust/inputs/pkcs11.py opens the token).

    pkcs11:token=ci;object=jaxcache?module-path=/usr/lib/softhsm/libsofthsm2.so
        &pin-source=file:/etc/jaxcache/ci.pin

Only what jaxcache acts on is accepted: an attribute it would ignore could pick another token
or library than the one the URI means. The PIN itself (`pin-value`) is refused: a command
line shows in /proc and shell history.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

from jaxcache.errors import JaxcacheError
from jaxcache.text import quoted, safe

SCHEME = "pkcs11:"
PATH_ATTRIBUTES = ("token", "object", "id", "type")
QUERY_ATTRIBUTES = ("module-path", "pin-source")
# RFC 7512 attributes jaxcache does not act on: refused, since ignoring one could pick
# another token or library than the one the URI means
_NOT_SUPPORTED = ("manufacturer", "model", "serial", "library-manufacturer",
                  "library-description", "library-version", "slot-manufacturer",
                  "slot-description", "slot-id", "module-name")
_TYPES = ("private", "public", "cert", "secret-key", "data")
# RFC 7512's characters allowed as they are in a path or query value; others are %XX
_PCHAR = re.compile(r"(?:[A-Za-z0-9\-._~:\[\]@!$'()*+,=&]|%[0-9A-Fa-f]{2})*")
_QCHAR = re.compile(r"(?:[A-Za-z0-9\-._~:\[\]@!$'()*+,=/?|]|%[0-9A-Fa-f]{2})*")

class TokenError(JaxcacheError):
    """A token, key, PIN file or library that cannot be used (keys.load_signing makes it a
    KeyFileError: this module sits below signing_keys.py, which builds the SigningKey)."""



@dataclass(frozen=True, slots=True)
class Uri:
    """A parsed `pkcs11:` URI: which key, in which token, through which library."""

    text: str  # as given (never holds a PIN: pin-value is refused)
    token: str  # the token's label
    module: str  # module-path: the PKCS#11 library, absolute
    object: str | None = None  # CKA_LABEL
    id: bytes | None = None  # CKA_ID
    type: str | None = None
    pin_file: str | None = None  # pin-source, absolute

    @property
    def key_name(self) -> str:
        """How messages name the key: `'ci'`, `id 01` or both."""
        parts = [quoted(self.object)] if self.object is not None else []
        if self.id is not None:
            parts.append(f"id {self.id.hex() or '(empty)'}")
        return ", ".join(parts)


def is_uri(text: object) -> bool:
    """A `pkcs11:` URI rather than a key file's path (the scheme is case-insensitive)."""
    return isinstance(text, str) and text[:len(SCHEME)].lower() == SCHEME


def parse(text: str) -> Uri:
    """The URI's attributes, or one line saying what to change."""
    if not is_uri(text):
        raise TokenError(f"not a pkcs11: URI: {safe(text[:60])}")
    body = text[len(SCHEME):]
    path, _, query = body.partition("?")
    pairs = [(n, v, "path") for n, v in _split(path, ";")] + \
            [(n, v, "query") for n, v in _split(query, "&")]
    if any(n == "pin-value" for n, _, _ in pairs):
        raise TokenError("pkcs11 URI: pin-value is refused (a PIN on a command line shows in "
                         "/proc and shell history): put the PIN in a file only you can read "
                         "(mode 0600) and give pin-source=file:/path/to/pin")
    if "#" in body:
        raise TokenError("pkcs11 URI: '#' must be written %23 (a URI fragment names nothing "
                         "in a token)")
    seen: dict[str, bytes] = {}
    for name, value, part in pairs:
        _check_name(name, part)
        if name in seen:
            raise TokenError(f"pkcs11 URI: {name}= is given twice: give it once")
        if not (_PCHAR if part == "path" else _QCHAR).fullmatch(value):
            raise TokenError(f"pkcs11 URI: the value of {name}= holds a character RFC 7512 "
                             f"wants percent-encoded (%XX): {safe(value[:60])}")
        seen[name] = unquote_to_bytes(value)
    return _uri(text, seen)


def _split(part: str, sep: str) -> list[tuple[str, str]]:
    pairs = []
    for item in part.split(sep) if part else ():
        if not item:
            continue  # `a=1;;b=2`, a trailing `;`: nothing said
        name, eq, value = item.partition("=")
        if not eq:
            raise TokenError(f"pkcs11 URI: {quoted(item, 60)} is not name=value")
        pairs.append((name.lower(), value))
    return pairs


def _check_name(name: str, part: str) -> None:
    here, there = (PATH_ATTRIBUTES, QUERY_ATTRIBUTES) if part == "path" else \
        (QUERY_ATTRIBUTES, PATH_ATTRIBUTES)
    if name in here:
        return
    if name in there:
        where = "after '?'" if part == "path" else "before '?' (the path, ';'-separated)"
        raise TokenError(f"pkcs11 URI: {name}= belongs {where}")
    if name == "module-name":
        raise TokenError("pkcs11 URI: module-name is not supported: give module-path=/"
                         "absolute/path/lib.so (a library found by name is not judged)")
    if name in _NOT_SUPPORTED:
        raise TokenError(f"pkcs11 URI: jaxcache does not select by {name}=; name the token "
                         "by token=LABEL and the key by object=LABEL or id=")
    raise TokenError(f"pkcs11 URI: unknown attribute {safe(name[:40])}= (jaxcache reads "
                     f"{', '.join(PATH_ATTRIBUTES)}; then ?{'&'.join(QUERY_ATTRIBUTES)})")


def _text(seen: dict[str, bytes], name: str) -> str | None:
    raw = seen.get(name)
    if raw is None:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TokenError(f"pkcs11 URI: {name}= is not UTF-8 once decoded") from None


def _uri(text: str, seen: dict[str, bytes]) -> Uri:
    token, kind = _text(seen, "token"), _text(seen, "type")
    if not token:
        raise TokenError("pkcs11 URI: no token: add token=LABEL (softhsm2-util --show-slots "
                         "or pkcs11-tool -L lists the labels)")
    if "object" not in seen and "id" not in seen:
        raise TokenError("pkcs11 URI: which key? add object=LABEL (its CKA_LABEL) or id=%01 "
                         "(its CKA_ID)")
    if kind is not None and kind not in _TYPES:
        raise TokenError(f"pkcs11 URI: type={safe(kind[:30])} is not an object type "
                         f"({', '.join(_TYPES)})")
    if kind not in (None, "private", "public"):
        raise TokenError(f"pkcs11 URI: type={kind} names no key pair: give type=private, or "
                         "leave type out")
    module = os.fsdecode(seen["module-path"]) if "module-path" in seen else None
    if not module:
        raise TokenError("pkcs11 URI: no library: add ?module-path=/path/to/pkcs11-lib.so "
                         "(SoftHSM2's: /usr/lib/softhsm/libsofthsm2.so)")
    if not module.startswith("/") or "\0" in module:
        raise TokenError(f"pkcs11 URI: module-path must be an absolute path, not "
                         f"{quoted(module, 80)}")
    pin = _pin_source(os.fsdecode(seen["pin-source"])) if "pin-source" in seen else None
    return Uri(text, token, module, _text(seen, "object"), seen.get("id"), kind, pin)


def _pin_source(value: str) -> str:
    """`file:/abs`, `file:///abs` or `/abs`: jaxcache reads a PIN from a file, nothing else."""
    path = value[len("file:"):] if value.startswith("file:") else value
    if path.startswith("//"):  # file://AUTHORITY/path: only the empty authority is this host
        path = path[2:] if path.startswith("///") else ""
    if not path.startswith("/") or "\0" in path:
        raise TokenError(f"pkcs11 URI: pin-source must be file:/ABSOLUTE/PATH (a file only "
                         f"you can read), not {quoted(value, 80)}")
    return path


# --- the token ----------------------------------------------------------------------------
