"""A checked document's fields read into typed values, leniently: a model's `from_json` reads
a document documents/read.py (or the builder) already vouched for, so a field of another type
than it should have is read as absent, never trusted and never a crash.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    # A JSON object as a document holds it, where no typed model reads it yet (for type
    # checkers only: these shrink as models take over)
    JsonObject = dict[str, Any]


def mapping(value: object) -> Mapping[str, object]:
    """An object field, or {} where a writer put anything else (or nothing)."""
    return value if isinstance(value, dict) else {}


def mappings(value: object) -> list[Mapping[str, object]]:
    """The objects of a list field, skipping anything else."""
    return [v for v in items(value) if isinstance(v, dict)]


def items(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def number(value: object) -> float | None:
    """A JSON number (not a boolean) as a float."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


def integer(value: object) -> int | None:
    """A JSON integer (or a float with no fraction), not a boolean."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, float) and value.is_integer() else None


def flag(value: object) -> bool | None:
    return value if isinstance(value, bool) else None
