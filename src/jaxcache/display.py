"""Render untrusted file names safely: a name may hold newlines, escapes or invalid UTF-8."""

from __future__ import annotations


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
