"""A signature file's document (signature_file.py: the format, how it is written) checked and
read once into a SignatureDoc: the rule (signature_rule.py), build claims and ls read its
fields. Pure parsing: nothing here verifies a signature or decides anything.
"""

from __future__ import annotations

import base64
from dataclasses import replace

from jaxcache import validate as v
from jaxcache.trust.inputs.public_keys import PublicKey, parse_public
from jaxcache.values import frozen

FORMAT = "jaxcache.seal/1"
MAX_BYTES = 4096  # readers of every version refuse a larger file: a build claim fits inside

# What a signature file must hold before any of it is used (the same validator as every
# document jaxcache reads back); a size is at most what an entry can be.
DOCUMENT = v.obj({"format": v.one_of(FORMAT), "key": v.TEXT, "digest": v.TEXT,
                  "size": v.INTEGER, "public_key": v.TEXT, "signature": v.TEXT},
                 {"signed_at": v.TEXT, "time_signature": v.TEXT,
                  "relies_on": v.list_of(v.TEXT), "build": v.obj(),
                  "build_signature": v.TEXT})
_ID = frozenset("0123456789abcdef")


@frozen
class SignatureDoc:
    """What a signature file states (a claim until signature_rule.py has judged it)."""

    key: str  # the cache key it names
    digest: str  # the entry's digest as written (hex text: the reader decodes it)
    size: int
    public: PublicKey  # the key it names, without a name (only the reader's policy names keys)
    signature: bytes  # the raw signature over signature_file.message(...)
    signed_at: str | None = None
    time_signature: str | None = None  # base64, over signature_file.time_message(...)
    relies_on: tuple[str, ...] | None = None  # a co-signature's key ids
    build: dict[str, object] | None = None  # the build claim as written (signed canonically)
    build_signature: str | None = None  # base64, over signature_file.build_message(...)

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
        # a name in a signature is the writer's word: keys are named only by the reader's policy
        public = replace(parse_public(doc["public_key"]), name=None)
        raw = base64.b64decode(doc["signature"], validate=True)
        return cls(doc["key"], doc["digest"], doc["size"], public, raw, doc.get("signed_at"),
                   doc.get("time_signature"), tuple(relies) if relies is not None else None,
                   doc.get("build"), doc.get("build_signature"))
