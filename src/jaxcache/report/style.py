"""What every report shows alike: verdict words in colour, and input shapes summarized (a
240-leaf pytree is 240 shapes: a person needs the count, the bytes and a digest to compare, not
all of them; JSON keeps them all). Text helpers below the reports are in jaxcache/text.py."""

from __future__ import annotations

import hashlib
import re
from typing import Protocol, TextIO

from jaxcache.text import Tone, clip, color_on, plural, safe, size, some

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


class Toned(Protocol):
    """A verdict enum's member: its word and its tone."""

    @property
    def value(self) -> str: ...

    @property
    def tone(self) -> Tone: ...


def said(member: Toned, stream: TextIO | None = None) -> str:
    """A verdict enum's word (Verdict, Choice, a bench's Outcome) in its tone's colour."""
    return verdict(member.value, member.tone, stream)


def verdict(word: str, tone: Tone, stream: TextIO | None = None) -> str:
    """A verdict word, in bold green (fine), red (act on it) or yellow (undecided) on a
    terminal, as its tone says; the plain word otherwise."""
    if not color_on(stream):
        return word
    return f"\x1b[1;{tone.value}m{word}\x1b[0m"


_ARRAY = re.compile(r"([a-z][a-z0-9_]*(?:<[a-z0-9_]+>)?)\[([0-9, ]*)\]")  # key<fry>[]: a PRNG key
_BITS = re.compile(r"(\d+)")
_BYTES = {"bool": 1, "bfloat16": 2, "complex64": 8, "complex128": 16,
          "key<fry>": 8, "key<rbg>": 16, "key<unsafe_rbg>": 16}  # uint32[2] or [4] each


def _itemsize(dtype: str) -> float | None:
    if dtype in _BYTES:
        return _BYTES[dtype]
    bits = _BITS.search(dtype)
    return int(bits.group(1)) / 8 if bits else None


def digest(text: str) -> str:
    """A short digest of a long value: equal texts, equal digests (8 hex digits)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=4).hexdigest()


def shapes(text: str | None, leading: int = 3) -> str:
    """'240 inputs totalling 38.4 KB: float32[8,4], float32[8,5], float32[8,6] and 237 more
    (digest 1a2b3c4d)' from JAX's list of abstract values: whole shapes, never one cut mid-way (a
    report wraps the line, never clips it); text it cannot parse is shown cut to 80
    characters."""
    if not text:
        return "-"
    arrays = _ARRAY.findall(text)
    if not arrays:
        return clip(safe(text), 80)
    total, known = 0.0, True
    for dtype, dims in arrays:
        item = _itemsize(dtype)
        if item is None:
            known = False
            continue
        count = 1
        for d in filter(None, (x.strip() for x in dims.split(","))):
            count *= int(d)
        total += count * item
    shown = some([f"{dt}[{dims.replace(' ', '')}]" for dt, dims in arrays], leading)
    tail = f" (digest {digest(text)})" if len(arrays) > leading else ""
    amount = size(total) if known else f">= {size(total)}" if total else "unknown size"
    # the inputs' bytes (not the entry's: a run's row shows that), so said as theirs
    joined = "of" if len(arrays) == 1 else "totalling"
    return f"{plural(len(arrays), 'input')} {joined} {amount}: {shown}{tail}"



def origin_counts(counts: Mapping[str, object], vouched_by: Mapping[str, int] | None = None
                  ) -> str:
    """'1 yours, 2 vouched (by teamb's origin ledger), 2 unknown': the non-zero origin counts
    (trust/provenance/origin.py's ORDER), as `ls` and `run` say them; `vouched_by`: how many
    entries each trusted writer's ledger vouches for (the policy's trusted_ledgers), by name
    (as the record holds it: escaped here, where it is shown)."""
    from jaxcache.trust.provenance.origin import ORDER, VOUCHED

    def said(o: str) -> str:
        if o != VOUCHED or not vouched_by:
            return f"{counts[o]} {o}"
        if len(vouched_by) == 1:
            return f"{counts[o]} vouched (by {safe(next(iter(vouched_by)))}'s origin ledger)"
        return f"{counts[o]} vouched (" + ", ".join(
            f"{n} by {safe(who)}'s" for who, n in vouched_by.items()) + " origin ledgers)"

    return ", ".join(said(o) for o in ORDER if counts.get(o))
