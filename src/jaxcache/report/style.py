"""Text helpers every report shares, so that all commands read alike: plurals, verdict colour,
the terminal's width, and input shapes summarized (a 240-leaf pytree is 240 shapes: a person
needs the count, the bytes and a digest to compare, not all of them; JSON keeps them all)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
from typing import TextIO

from jaxcache.display import safe, size

COLOR_MODES = ("auto", "always", "never")
NOT_A_TTY_WIDTH = 100  # columns when stdout is a file or a pipe (CI logs, `| less`)

_IRREGULAR = {"entry": "entries", "directory": "directories", "process": "processes",
              "miss": "misses", "reuse": "reuses", "rank": "ranks", "index": "indices"}
_state = {"color": "auto"}


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 entry', '2 entries', '0 trials': the count and its noun, in agreement."""
    if n == 1:
        return f"{n} {word}"
    return f"{n} {many or _IRREGULAR.get(word) or word + 's'}"


def set_color(mode: str) -> None:
    """--color auto|always|never, for this process (the CLI sets it once)."""
    if mode not in COLOR_MODES:
        raise ValueError(mode)
    _state["color"] = mode


def color_on(stream: TextIO | None = None) -> bool:
    """always/never as asked; auto: a terminal that is not `dumb`, unless NO_COLOR is set."""
    mode = _state["color"]
    if mode != "auto":
        return mode == "always"
    stream = sys.stdout if stream is None else stream
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


_GOOD = {"PRIVATE", "SHARED-BY-POLICY", "SEALED", "SHARE", "saves", "VALID", "OK", "CACHED"}
_BAD = {"UNSAFE", "BLOCKED", "NOT-WORTH-IT", "UNCACHED", "NOT FOUND", "INVALID", "NOT SEALED"}
_CODES = {"good": "32", "bad": "31", "unsure": "33"}


def verdict(word: str, stream: TextIO | None = None) -> str:
    """A verdict word, in bold green (fine), red (act on it) or yellow (undecided) on a
    terminal; the plain word otherwise."""
    if not color_on(stream):
        return word
    kind = "good" if word in _GOOD else "bad" if word in _BAD else "unsure"
    return f"\x1b[1;{_CODES[kind]}m{word}\x1b[0m"


def width(stream: TextIO | None = None) -> int:
    """Columns to fit: the terminal's, or 100 when the output is not a terminal."""
    stream = sys.stdout if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    if not (isatty and isatty()):
        return NOT_A_TTY_WIDTH
    return max(40, shutil.get_terminal_size((NOT_A_TTY_WIDTH, 24)).columns)


def clip(line: str, limit: int) -> str:
    """One line cut to `limit` characters, marked '...' where it was cut."""
    return line if len(line) <= limit else line[:max(0, limit - 3)] + "..."


_ARRAY = re.compile(r"([a-z][a-z0-9_]*)\[([0-9, ]*)\]")
_BITS = re.compile(r"(\d+)")
_BYTES = {"bool": 1, "bfloat16": 2, "complex64": 8, "complex128": 16}


def _itemsize(dtype: str) -> float | None:
    if dtype in _BYTES:
        return _BYTES[dtype]
    bits = _BITS.search(dtype)
    return int(bits.group(1)) / 8 if bits else None


def digest(text: str) -> str:
    """A short digest of a long value: equal texts, equal digests (8 hex digits)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=4).hexdigest()


def shapes(text: str | None, leading: int = 3) -> str:
    """'240 inputs, 38.4 KB: float32[8,4], float32[8,5], float32[8,6], ... (digest 1a2b3c4d)'
    from JAX's list of abstract values; text it cannot parse is shown cut to 80 characters."""
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
    shown = ", ".join(f"{dt}[{dims.replace(' ', '')}]" for dt, dims in arrays[:leading])
    more = ", ..." if len(arrays) > leading else ""
    tail = f" (digest {digest(text)})" if len(arrays) > leading else ""
    amount = size(total) if known else f">= {size(total)}"
    return safe(f"{plural(len(arrays), 'input')}, {amount}: {shown}{more}{tail}")


def wrap(text: str, indent: str = "", hang: str = "  ", limit: int | None = None) -> list[str]:
    """A sentence as lines that fit: the first after `indent` (which may be a bullet), the
    rest under it, after as many spaces plus `hang`.
    Words are never split, so a long path stays whole (and copyable) on a line of its own."""
    import textwrap

    glued = _UNIT.sub("\\1\x00\\2", text)  # "26.15 s" stays whole (safe() escapes NUL)
    lines = textwrap.wrap(glued, width=limit or width(), initial_indent=indent,
                          subsequent_indent=" " * len(indent) + hang, break_long_words=False,
                          break_on_hyphens=False) or [indent]
    return [line.replace("\x00", " ") for line in lines]


_UNIT = re.compile(r"(\d) (s|B|KB|MB|GB)\b")


def origin_counts(counts: dict) -> str:
    """'1 yours, 2 unknown': the non-zero origin counts (trust/origin.py's ORDER), as `ls` and
    `run` say them."""
    from jaxcache.trust.origin import ORDER

    return ", ".join(f"{counts[o]} {o}" for o in ORDER if counts.get(o))
