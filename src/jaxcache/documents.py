"""Reading jaxcache's own JSON documents back: one clear line for anything that is not one."""

from __future__ import annotations

import json

from jaxcache.display import safe
from jaxcache.errors import JaxcacheError


def load_json(path: str, what: str) -> dict:
    """A JSON object from `path`; `what` names it in errors ("record", "bench result")."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise JaxcacheError(f"no such {what}: {safe(path)}") from None
    except (OSError, ValueError) as exc:
        raise JaxcacheError(f"cannot read {what} {safe(path)}: {exc}") from None
    if not isinstance(doc, dict):
        raise JaxcacheError(f"{safe(path)} is not a jaxcache {what}")
    return doc
