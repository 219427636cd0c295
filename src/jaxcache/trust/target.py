"""Turn what the user typed into the path JAX would use, with JAX's own semantics.

JAX does not expand `~` (it creates a directory literally named `~` under the cwd), treats a
relative path as relative to the current directory, and hands URLs to etils/epath.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from jaxcache.errors import JaxcacheError
from jaxcache.text import safe

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(text: str) -> bool:
    """A URL (scheme://...), which JAX hands to etils/epath, not a local path."""
    return _URL.match(text) is not None


@dataclass(frozen=True)
class Target:
    given: str
    path: str | None  # absolute path JAX would use; None for a URL
    url: str | None
    notes: tuple[tuple[str, str], ...]  # (finding code, text): path.tilde, path.relative

    @property
    def tilde(self) -> bool:
        """JAX would take a leading '~' literally: callers that create or enable refuse it."""
        return any(code == "path.tilde" for code, _ in self.notes)


def resolve(given: str, cwd: str | None = None) -> Target:
    if given == "":
        raise JaxcacheError("the cache path is empty")
    if "\0" in given:
        raise JaxcacheError("the cache path contains a NUL byte")
    if _URL.match(given):
        return Target(given, None, given, ())
    notes = []
    if given == "~" or given.startswith("~/") or re.match(r"^~[^/]*(/|$)", given):
        notes.append((
            "path.tilde",
            f"JAX does not expand '~': {safe(given)!r} means a directory literally named "
            f"{safe(given.split('/', 1)[0])!r} under the current directory. Pass an absolute "
            "path (your shell expands ~ only when it is unquoted at the start of a word)."))
    if not given.startswith("/"):
        base = cwd if cwd is not None else os.getcwd()
        notes.append(("path.relative",
                      f"relative path: JAX resolves it against the current directory "
                      f"{safe(base)}, so it differs between jobs started elsewhere"))
        path = base.rstrip("/") + "/" + given
    else:
        path = given
    return Target(given, path, None, tuple(notes))
