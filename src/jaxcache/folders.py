"""Folders that hold something trusted (signing keys, the origin ledger), made and checked.

Each missing folder is made 0700 inside the descriptor of the one above it, reached from `/`
as outputs.open_parent reaches an output's folder (no link but yours or root's is followed),
and each one is checked to be yours or root's and writable by nobody else: whoever could
write there could swap what is kept in it.
"""

from __future__ import annotations

import os
import stat

from jaxcache.documents.claim import PATH_FLAGS, open_parent
from jaxcache.errors import JaxcacheError
from jaxcache.text import safe


def _ours(dfd: int, folder: str, what: str) -> None:
    """A folder that holds something trusted must be yours or root's, and writable by nobody
    else (sticky excepted: there nobody can replace your files): else its owner could swap it."""
    st = os.fstat(dfd)
    shared = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX
    if shared and st.st_mode & stat.S_IWOTH:
        raise JaxcacheError(f"refusing to keep a {what} in {safe(folder)}: anyone can "
                            f"write there and swap the {what} for theirs")
    if st.st_uid not in (0, os.geteuid()) or shared:
        raise JaxcacheError(f"refusing to keep a {what} in {safe(folder)} (owner uid "
                            f"{st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o}): someone else "
                            f"could replace the {what} there")


def private_folders(parent: str, what: str) -> tuple[list[str], int]:
    """Make each missing folder of `parent` (absolute) 0700, outermost first, each inside the
    descriptor of the one above it (reached as open_parent does: no link but yours or root's
    is followed), each one reached checked as yours alone; the ones made, and an O_PATH
    descriptor of `parent` (the caller closes it)."""
    missing = []
    cur = parent
    while not os.path.lexists(cur):
        missing.append(os.path.basename(cur))
        up = os.path.dirname(cur)
        if up == cur:
            break
        cur = up
    try:
        dfd = open_parent(cur, what)
    except JaxcacheError as exc:
        raise JaxcacheError(f"cannot keep a {what} in {safe(parent)}: {exc}") from None
    made = []
    try:
        _ours(dfd, cur, what)
        for name in reversed(missing):
            folder = os.path.join(cur, name)
            try:
                os.mkdir(name, 0o700, dir_fd=dfd)
                made.append(folder)
            except FileExistsError:
                pass  # made meanwhile by someone else: not ours to report
            except OSError as exc:
                raise JaxcacheError(f"cannot create {safe(folder)}: {exc.strerror}") from None
            try:
                nxt = os.open(name, PATH_FLAGS | os.O_DIRECTORY, dir_fd=dfd)
            except OSError as exc:
                raise JaxcacheError(f"cannot open {safe(folder)}: {exc.strerror}") from None
            os.close(dfd)
            dfd, cur = nxt, folder
            _ours(dfd, cur, what)  # also one someone else made meanwhile
    except BaseException:
        os.close(dfd)
        raise
    return made, dfd
