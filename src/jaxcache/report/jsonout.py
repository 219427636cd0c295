"""The one JSON writer every `--format json` document goes through (and `bench --json`).

Same layout from every command, so scripts and diffs see one style: indented by two, keys in
the order the document's builder put them (the schema's order, never sorted), ASCII only (a
file name or message can never put a terminal escape or a byte the locale cannot encode on
someone's screen), one trailing newline. A long list of flat records (`Rows`: an audit's or
ls's entries) is written one record per line: Python's indenting encoder is pure Python, ~24 us
a record, and a cache holds 100,000 entries; its compact encoder is C, ~3 us.
"""

from __future__ import annotations

import json
import secrets

_COMPACT = json.JSONEncoder(ensure_ascii=True, separators=(", ", ": ")).encode


class Rows(list):  # type: ignore[type-arg]
    """A list written one element per line, each element on its line as compact JSON."""


def document(doc: object) -> str:
    """`doc` as jaxcache writes every JSON document."""
    rows: list[Rows] = []
    token = secrets.token_hex(16)  # a placeholder no document text can hold by chance

    def swap(o: object) -> object:
        if isinstance(o, Rows):
            rows.append(o)
            return f"{token}:{len(rows) - 1}"
        if isinstance(o, dict):
            return {k: swap(v) for k, v in o.items()}
        if isinstance(o, list | tuple):
            return [swap(v) for v in o]
        return o

    text = json.dumps(swap(doc), indent=2, ensure_ascii=True)
    for i, found in enumerate(rows):
        mark = f'"{token}:{i}"'
        at = text.index(mark)
        line_start = text.rfind("\n", 0, at) + 1
        indent = " " * (len(text[line_start:at]) - len(text[line_start:at].lstrip(" ")))
        body = "[]" if not found else (
            "[\n" + ",\n".join(f"{indent}  {_COMPACT(r)}" for r in found) + f"\n{indent}]")
        text = text[:at] + body + text[at + len(mark):]
    return text + "\n"
