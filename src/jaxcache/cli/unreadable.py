"""When jaxcache cannot read its own code: an install another account owns and this one cannot
read (a checkout cloned with umask 077, a folder of it made 0700), used from a second account.

Python says so as "No module named 'jaxcache.trust.rules'" (a folder it cannot search is a
module that is not there) or "Permission denied" on one file: neither is a bug of jaxcache to
report, and neither says what to do. `message` says which path, whose it is, and the way out
(docs/reference/setup.md, "A second account"); main() uses it for any error that ends a command.
"""

from __future__ import annotations

import os

HOW = "install jaxcache for yourself (docs/reference/setup.md, \"A second account\")"


def message(exc: BaseException) -> str | None:
    """The line to say when `exc` comes from a part of this install the user cannot read, else
    None (any other error keeps its own line)."""
    import jaxcache

    root = os.path.dirname(os.path.abspath(jaxcache.__file__))
    where: str | None = None
    if isinstance(exc, PermissionError) and isinstance(exc.filename, str) \
            and os.path.abspath(exc.filename).startswith(root + os.sep):
        where = exc.filename
    elif isinstance(exc, ImportError) and (exc.name or "").startswith("jaxcache."):
        where = _blocked(root, (exc.name or "").split(".")[1:])
    if where is None:
        return None
    from jaxcache.text import safe

    try:
        st = os.stat(where)
    except OSError:
        whose = ""
    else:
        import pwd

        try:
            owner = pwd.getpwuid(st.st_uid).pw_name
        except KeyError:
            owner = f"uid {st.st_uid}"
        whose = f" (owner {safe(owner)}, mode {st.st_mode & 0o7777:04o})"
    return (f"part of this install of jaxcache is not readable by you: {safe(where)}{whose}; "
            f"{HOW}, or ask its owner to make it readable (chmod -R go+rX)")


def _blocked(root: str, parts: list[str]) -> str | None:
    """The first folder or file on the way to module `parts` (under the package's `root`) that
    this user cannot read, or None."""
    path = root
    for part in parts:
        path = os.path.join(path, part)
        if os.path.isdir(path):
            if not os.access(path, os.R_OK | os.X_OK):
                return path
        elif os.path.exists(path + ".py") and not os.access(path + ".py", os.R_OK):
            return path + ".py"
    return None
