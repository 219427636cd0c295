"""Text for people, shared by every layer: escaping (a file name may hold newlines, escapes or
invalid UTF-8), sizes, ages, plurals, the terminal's width, wrapping and clipping, colour on or off.

At the bottom of the house (nothing of jaxcache imported) and on `jaxcache run`'s start-up path:
it imports only os and sys at the top.
"""

from __future__ import annotations

import os
import re
import sys
from enum import Enum  # imported by re already

TYPE_CHECKING = False  # typing costs the job's start-up; names for the type checker only
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import TextIO

COLOR_MODES = ("auto", "always", "never")
NOT_A_TTY_WIDTH = 100  # columns when stdout is a file or a pipe (CI logs, `| less`)

_IRREGULAR = {"entry": "entries", "directory": "directories", "process": "processes",
              "miss": "misses", "reuse": "reuses", "rank": "ranks", "index": "indices"}


class _Settings:
    """This process's settings for text (the CLI sets them once)."""

    __slots__ = ("color",)

    def __init__(self) -> None:
        self.color = "auto"  # one of COLOR_MODES


_SETTINGS = _Settings()


def safe(text: str) -> str:
    """Escape so one name stays one visible, unambiguous line.

    Control characters and bytes that are not UTF-8 become \\xNN, other characters a
    terminal does not print as themselves (bidirectional overrides, zero-width and separator
    characters) \\uNNNN, and a literal backslash becomes \\\\, so two different names never
    print the same and none reorders or hides what follows it.
    """
    if text.isprintable() and "\\" not in text:  # the common case; surrogates are not printable
        return text
    out: list[str] = []
    for ch in text:
        code = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif 0xDC80 <= code <= 0xDCFF:  # an undecodable byte
            out.append(f"\\x{code - 0xDC00:02x}")
        elif 0xD800 <= code <= 0xDFFF:  # a lone surrogate from JSON text: not a character
            out.append(f"\\u{code:04x}")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif 0x80 <= code < 0xA0:  # C1 controls: \u, so none prints as an undecodable byte
            out.append(f"\\u{code:04x}")
        elif not ch.isprintable():  # format and separator characters: bidirectional
            # overrides that reorder what the reader sees (U+202E), zero-width ones, U+2028
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(ch)
    return "".join(out)


QUOTED = 80  # characters of a name quoted in a sentence (a 100 KB label is no error message)


def quoted(text: str, limit: int = QUOTED) -> str:
    """A name inside a sentence, as 'name': clipped to `limit` characters, escaped once by
    safe() and a quote in it shown as \\'. Not repr(safe(...)), which doubles the backslash
    safe() already wrote and repeats a writer's whole text."""
    return "'" + safe(clip(text, limit)).replace("'", "\\'") + "'"


def file_type(mode: int) -> str:
    """What a file of this st_mode is, in words ("a directory", "a FIFO (named pipe)", ...):
    the one spelling of every refusal that names a file of the wrong type."""
    import stat

    for test, word in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"),
                       (stat.S_ISREG, "a regular file")):
        if test(mode):
            return word
    return "a file of no known type"


def size(n: float) -> str:
    """Bytes for people: 0 B, 39.6 KB, 1.2 GB (powers of 1000, as ls -h --si)."""
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"


def age(seconds: float) -> str:
    for unit, span in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= span:
            return f"{seconds / span:.0f}{unit}"
    return f"{seconds:.0f}s"


# sizes and ages as people write them (gc, run and enable() take them, the project file too)
# patterns, compiled by re (and cached there) when first used: not at every command's start
_SIZE = r"(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b?)"
_AGE = r"(\d+(?:\.\d+)?)\s*([smhdw]?)"
_LARGEST = float(2 ** 62)  # bytes: far past any disk, still an int everywhere
_LONGEST_S = 1000 * 365 * 86_400.0
_AGE_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def parse_size(text: str) -> int:
    """Bytes from `10G` or `10GB` (10^10, as jaxcache prints sizes), `2GiB` (2 * 2^30),
    `500M`, `4096`: ValueError with what is accepted otherwise."""
    m = re.fullmatch(_SIZE, text.strip(), re.IGNORECASE)
    if m is None:
        raise ValueError(f"not a size: {text!r} (say 10G, 500M, 2GiB or a number of bytes)")
    power = " kmgtp".index(m.group(2).lower() or " ")
    binary = m.group(3).lower().startswith("i")
    if binary and not power:
        raise ValueError(f"not a size: {text!r} (say 10G, 500M, 2GiB or a number of bytes)")
    value = float(m.group(1)) * (1024 if binary else 1000) ** power
    if not value < _LARGEST:
        raise ValueError(f"too large a size: {text!r}")
    return int(value)


def parse_age(text: str) -> float:
    """Seconds from `30d`, `12h`, `90m`, `2w`, `3600` or `3600s`: ValueError otherwise."""
    m = re.fullmatch(_AGE, text.strip(), re.IGNORECASE)
    if m is None:
        raise ValueError(f"not an age: {text!r} (say 30d, 12h, 90m, 2w or seconds)")
    value = float(m.group(1)) * _AGE_S[m.group(2).lower() or "s"]
    if not value < _LONGEST_S:
        raise ValueError(f"too long an age: {text!r} (at most 1000 years)")
    return value



def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 entry', '2 entries', '0 trials': the count and its noun, in agreement."""
    if n == 1:
        return f"{n} {word}"
    head, _, last = word.rpartition(" ")  # 'cache directory': its last word agrees
    return f"{n} {many or (head + ' ' if head else '') + _IRREGULAR.get(last, last + 's')}"


def some(names: Sequence[str], shown: int = 3) -> str:
    """'a, b, c and 9 more': the first few names of a list (escaped), and how many more; the
    one form every grouped finding and refusal lists its names in."""
    first = ", ".join(safe(n) for n in names[:shown])
    return first + (f" and {len(names) - shown} more" if len(names) > shown else "")


def set_color(mode: str) -> None:
    """--color auto|always|never, for this process (the CLI sets it once)."""
    if mode not in COLOR_MODES:
        raise ValueError(mode)
    _SETTINGS.color = mode


class Tone(Enum):
    """What a verdict word asks of its reader, and its colour on a terminal: fine (green), act
    on it (red), undecided (yellow). Each verdict enum says its own (`.tone`)."""

    GOOD = "32"
    BAD = "31"
    UNSURE = "33"


def color_on(stream: TextIO | None = None) -> bool:
    """always/never as asked; auto: a terminal that is not `dumb`, unless NO_COLOR is set."""
    mode = _SETTINGS.color
    if mode != "auto":
        return mode == "always"
    stream = sys.stdout if stream is None else stream
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def width(stream: TextIO | None = None) -> int:
    """Columns to fit: the terminal's, or 100 when the output is not a terminal."""
    stream = sys.stdout if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    if not (isatty and isatty()):
        return NOT_A_TTY_WIDTH
    import shutil

    return max(40, shutil.get_terminal_size((NOT_A_TTY_WIDTH, 24)).columns)


def clip(line: str, limit: int) -> str:
    """One line cut to `limit` characters, marked '...' where it was cut."""
    return line if len(line) <= limit else line[:max(0, limit - 3)] + "..."


def wrap(text: str, indent: str = "", hang: str = "  ", limit: int | None = None) -> list[str]:
    """A sentence as lines that fit: the first after `indent` (which may be a bullet), the
    rest under it, after as many spaces plus `hang`.
    Words are never split, so a long path stays whole (and copyable) on a line of its own."""
    import re
    import textwrap

    glued = re.sub(_UNIT, "\\1\x00\\2", text)  # "26.15 s" stays whole (safe() escapes NUL)
    lines = textwrap.wrap(glued, width=limit or width(), initial_indent=indent,
                          subsequent_indent=" " * len(indent) + hang, break_long_words=False,
                          break_on_hyphens=False) or [indent]
    return [line.replace("\x00", " ") for line in lines]


_UNIT = r"(\d) (s|B|KB|MB|GB)\b"
