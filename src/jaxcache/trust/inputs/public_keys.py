"""Public keys: the ones a policy trusts, and the public half of a signing key.

A public key is written `ed25519:<base64 of the 32 raw bytes>` (one line, easy to paste into
a policy file), or `NAME:ed25519:<base64>` where it carries a name (`jaxcache keygen --name
ci-2026-12`, as Nix names its keys): the name is a label for people, chosen by whoever wrote
the text, so a key is known by its bytes and reports show both. Its id is the first 16 hex
digits of its SHA-256, short enough for reports. Here, below seal/, because which keys may
vouch for an entry is part of the audit's verdict (trust/rules/keyring.py); signing is
trust/inputs/signing_keys.py's.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass
from enum import Enum

from jaxcache.errors import JaxcacheError
from jaxcache.text import quoted, safe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from jaxcache.trust.rules.identities import TrustedIdentity

PREFIX = "ed25519:"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # ci-2026-12, cache.example.org-1


class KeyFileError(JaxcacheError):
    """A key file or public key that cannot be used."""


class SignerKind(Enum):
    """The two kinds of signer a sealed reader trusts: a key (Ed25519: a file or an HSM) and
    an identity (a CI job's, signing keyless through Sigstore: trust/rules/identities.py)."""

    KEY = "key"
    IDENTITY = "identity"

    @property
    def word(self) -> str:
        """How reasons name one: `key 1a2b...`, `identity org/repo/...@refs/heads/main`."""
        return self.value


@dataclass(frozen=True, slots=True)
class PublicKey:
    raw: bytes  # 32 bytes
    holder: str | None = None  # who holds the private key, as the policy declares it
    name: str | None = None  # a label (ci-2026-12): reports show it beside the id
    # when the policy trusts it (POSIX seconds; None: no bound), judged by the reader's clock
    not_before: float | None = None
    not_after: float | None = None
    # the softer reading of not_after (policy trust_signing_time = true): a signature whose
    # signed claim of its own time falls before not_after still counts; a thief can forge it
    signing_time: bool = False
    kind: SignerKind = SignerKind.KEY
    # an identity's workflow (or repository and ref), as reasons name it; None for a key
    subject: str | None = None

    @property
    def text(self) -> str:
        """What signatures carry and every reader parses: no name."""
        return PREFIX + base64.b64encode(self.raw).decode()

    @property
    def named_text(self) -> str:
        """NAME:ed25519:... where the key has a name (the .pub file, keygen's output)."""
        return f"{self.name}:{self.text}" if self.name else self.text

    @property
    def id(self) -> str:
        return hashlib.sha256(self.raw).hexdigest()[:16]

    @property
    def label(self) -> str:
        """How reports name it: `ci-2026-12 (1a2b...)`, or the id alone; an identity by its
        workflow (`jax-cache (org/repo/.github/workflows/jax-cache.yml@refs/heads/main)`)."""
        shown = self.subject if self.subject is not None else self.id
        return f"{self.name} ({shown})" if self.name else shown


    def verifier(self) -> Ed25519PublicKey:
        """cryptography's key, to verify a signature with (imported only when asked for)."""
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        return Ed25519PublicKey.from_public_bytes(self.raw)


def identity_signer(identity: TrustedIdentity) -> PublicKey:
    """A trusted identity as the one rule counts signers: its stand-in bytes (one identity,
    one signer however many jobs' certificates sign), its holder, name and workflow."""
    return PublicKey(identity.raw, identity.holder, identity.name, kind=SignerKind.IDENTITY,
                     subject=identity.subject)


def parse_public(text: str, holder: str | None = None, *, source: str | None = None,
                 name: str | None = None) -> PublicKey:
    """`ed25519:B64` or `NAME:ed25519:B64`; `source`: the file the text came from, named when
    it is not a key; `name`: the policy's name for it, which must agree with the text's."""
    text = text.strip()
    head, sep, rest = text.partition(":")
    if sep and head != PREFIX[:-1] and rest.startswith(PREFIX):
        if not NAME.fullmatch(head):
            raise KeyFileError(f"key name {quoted(head, 70)} is not a key name (letters, digits, "
                               "'.', '_' and '-', at most 64, starting with a letter or digit)")
        if name is not None and name != head:
            raise KeyFileError(f"the key is named {quoted(head)} in its text and {quoted(name)} "
                               "beside it: give one name")
        name, text = head, rest
    if not text.startswith(PREFIX):
        where = f"{safe(source)} is not" if source is not None else "not"
        if not text:
            empty = f"{safe(source)} is empty" if source is not None else "the key is empty"
            raise KeyFileError(f"{empty}: not a jaxcache public key (want {PREFIX}<base64>)")
        raise KeyFileError(f"{where} a jaxcache public key (want {PREFIX}<base64>): "
                           f"{safe(text[:60])}")
    try:
        raw = base64.b64decode(text[len(PREFIX):], validate=True)
    except ValueError:
        raise KeyFileError(f"public key is not valid base64: {safe(text[:60])}") from None
    if len(raw) != 32:
        raise KeyFileError(f"an Ed25519 public key has 32 bytes, this one {len(raw)}")
    if name is not None and not NAME.fullmatch(name):
        raise KeyFileError(f"key name {quoted(name, 70)} is not a key name (letters, digits, "
                           "'.', '_' and '-', at most 64, starting with a letter or digit)")
    return PublicKey(raw, holder, name)


def load_public(text_or_path: str) -> PublicKey:
    """A public key given inline (ed25519:...) or as a .pub file, read through the
    trusted-input loader: whoever can change the file chooses which entries you load."""
    from jaxcache.trust.inputs import trusted_file as inputs

    if text_or_path.startswith(PREFIX) or _named_inline(text_or_path):
        return parse_public(text_or_path)
    found = inputs.read(text_or_path, inputs.PUBLIC_KEY)
    assert found is not None
    try:
        text = found.data.decode("ascii")
    except UnicodeDecodeError:
        raise KeyFileError(f"public key {safe(text_or_path)} is not ASCII text") from None
    return parse_public(text, source=text_or_path)


def _named_inline(text: str) -> bool:
    """NAME:ed25519:... given inline (a file path would hold a '/' or not hold the prefix)."""
    head, _, rest = text.partition(":")
    return bool(NAME.fullmatch(head)) and rest.startswith(PREFIX)
