"""Render untrusted file names safely: a name may hold newlines, escapes or invalid UTF-8."""

from __future__ import annotations

import os


def safe(text: str) -> str:
    """Escape control characters and undecodable bytes so one name stays one visible line."""
    if text.isprintable():  # the common case; surrogates and controls are not printable
        return text
    raw = os.fsencode(text)
    out: list[str] = []
    for ch in raw.decode("utf-8", "backslashreplace"):
        code = ord(ch)
        if ch == "\\" or code < 0x20 or code == 0x7F or 0x80 <= code < 0xA0:
            out.append(ch if ch == "\\" else f"\\x{code:02x}")
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
