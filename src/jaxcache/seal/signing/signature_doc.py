"""A signature file's document (signature_file.py: the format, how it is written) checked and
read once into a SignatureDoc: the rule (signature_rule.py), build claims and ls read its
fields. Pure parsing: nothing here verifies a signature or decides anything.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, replace

from jaxcache import validate as v
from jaxcache.trust.inputs.public_keys import PublicKey, SignerKind, parse_public

FORMAT = "jaxcache.seal/1"
# A key's signature file stays within KEY_DOC_BYTES: readers before keyless sealing refuse a
# larger file (a build claim fits inside). A keyless one carries a Sigstore bundle (a
# certificate, a log entry and its proof, a timestamp: ~9 KB) and may take MAX_BYTES, the
# bound every reader reads a signature file with before parsing any of it (a writer of the
# cache chooses its bytes).
KEY_DOC_BYTES = 4096
MAX_BYTES = 32 << 10

# What a signature file must hold before any of it is used (the same validator as every
# document jaxcache reads back); a size is at most what an entry can be. A key's signature
# has public_key and signature; a keyless one sigstore_bundle instead (parse: one or the
# other, never both).
DOCUMENT = v.obj({"format": v.one_of(FORMAT), "key": v.TEXT, "digest": v.TEXT,
                  "size": v.INTEGER},
                 {"public_key": v.TEXT, "signature": v.TEXT, "sigstore_bundle": v.TEXT,
                  "signed_at": v.TEXT, "time_signature": v.TEXT,
                  "relies_on": v.list_of(v.TEXT), "build": v.obj(),
                  "build_signature": v.TEXT})
_ID = frozenset("0123456789abcdef")


@dataclass(frozen=True, slots=True)
class SignatureDoc:
    """What a signature file states (a claim until signature_rule.py has judged it)."""

    key: str  # the cache key it names
    digest: str  # the entry's digest as written (hex text: the reader decodes it)
    size: int
    # the key it names, without a name (only the reader's policy names keys); None: keyless
    public: PublicKey | None
    signature: bytes  # the raw signature over signature_file.message(...); b"" when keyless
    signed_at: str | None = None
    time_signature: str | None = None  # base64, over signature_file.time_message(...)
    relies_on: tuple[str, ...] | None = None  # a co-signature's key ids
    build: dict[str, object] | None = None  # the build claim as written (signed canonically)
    build_signature: str | None = None  # base64, over signature_file.build_message(...)
    # keyless (seal/signing/keyless.py): the Sigstore bundle (its JSON text) over
    # keyless.artifact(...): the same message, and the build claim when there is one
    bundle: str | None = None

    @property
    def kind(self) -> SignerKind:
        return SignerKind.IDENTITY if self.bundle is not None else SignerKind.KEY

    @classmethod
    def parse(cls, sig: bytes) -> SignatureDoc:
        """ValueError or KeyFileError if `sig` is no signature file (too large, not JSON, a
        field missing or of the wrong type, no key)."""
        if len(sig) > MAX_BYTES:
            raise ValueError("too large")
        doc = v.parse_json(sig)
        DOCUMENT(doc, "")
        assert isinstance(doc, dict)
        relies = doc.get("relies_on")
        if relies is not None and not all(len(i) == 16 and _ID.issuperset(i) for i in relies):
            raise ValueError("relies_on holds something that is not a key id")
        bundle, text, signed = doc.get("sigstore_bundle"), doc.get("public_key"), \
            doc.get("signature")
        if bundle is not None:
            if text is not None or signed is not None or doc.get("build_signature") is not None:
                raise ValueError("a keyless signature names no key and carries no signature "
                                 "of its own")
            return cls(doc["key"], doc["digest"], doc["size"], None, b"", None, None,
                       tuple(relies) if relies is not None else None, doc.get("build"),
                       None, bundle)
        if text is None or signed is None:
            raise ValueError("no public_key and signature (nor a sigstore_bundle)")
        if len(sig) > KEY_DOC_BYTES:
            raise ValueError("too large")
        # a name in a signature is the writer's word: keys are named only by the reader's policy
        public = replace(parse_public(text), name=None)
        raw = base64.b64decode(signed, validate=True)
        return cls(doc["key"], doc["digest"], doc["size"], public, raw, doc.get("signed_at"),
                   doc.get("time_signature"), tuple(relies) if relies is not None else None,
                   doc.get("build"), doc.get("build_signature"))
