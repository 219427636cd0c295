"""The one JSON writer every `--format json` document goes through (and `bench --json`).

Same layout from every command, so scripts and diffs see one style: indented by two, keys in
the order the document's builder put them (the schema's order, never sorted), ASCII only (a
file name or message can never put a terminal escape or a byte the locale cannot encode on
someone's screen), one trailing newline.
"""

from __future__ import annotations

import json


def document(doc: object) -> str:
    """`doc` as jaxcache writes every JSON document."""
    return json.dumps(doc, indent=2, ensure_ascii=True) + "\n"
