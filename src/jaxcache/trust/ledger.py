"""The origin ledger read as a trusted input (trust/inputs.py), for the audit to judge with.

Apart from trust/origin.py because the trusted-input loader audits the folders above the file,
and origin.py is part of that audit: the loader sits above both. Read a chunk at a time
through the one descriptor judged (a ledger holds up to 64 MB: only each line's bytes are kept),
and bound to that very file by its device, inode and birth time (trust/birth.py).
"""

from __future__ import annotations

import os
import stat

from jaxcache.text import safe
from jaxcache.trust import birth, inputs
from jaxcache.trust import origin as originmod
from jaxcache.trust.origin import Ledger, ledger_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.trust.entries import Inventory
    from jaxcache.trust.principals import Accounts

_APPEND = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def load(path: str | None = None, accounts: Accounts | None = None) -> Ledger:
    """The ledger; a missing one is empty, an unprotected or unreadable one is a Ledger with
    its problem (nothing is then yours: fail closed)."""
    path = path or ledger_path()
    try:
        found = inputs.streamed(path, inputs.ORIGIN_LEDGER, missing_ok=True, accounts=accounts)
        if found is None:
            return Ledger(path, {})
        fd, st = found
        try:
            identity = (st.st_dev, st.st_ino, birth.of_fd(fd))
            return originmod.parse_chunks(
                inputs.chunks(fd, f"{inputs.ORIGIN_LEDGER.name} {safe(path)}",
                              inputs.ORIGIN_LEDGER), path, identity)
        finally:
            os.close(fd)
    except inputs.InputError as exc:
        return Ledger(path, {}, problem=str(exc))


def judge(inventory: Inventory, dir_fd: int, ledger: Ledger,
          directory: str = "") -> originmod.Origins:
    """origin.judge(), then the ledger learns the new identity of each entry it found yours by
    its bytes (a copy of your own cache, say), so the next audit knows it without reading it."""
    origins = originmod.judge(inventory, dir_fd, ledger, directory)
    if origins.relearned:
        relearn(ledger, origins.relearned)
    return origins


def relearn(ledger: Ledger, lines: tuple[originmod.Written, ...]) -> bool:
    """Append `lines` to the very ledger file `ledger` was read from (same device, inode and
    birth time, still yours alone with one link), never through a link; False when that file
    is not there any more or cannot be written (the entries are then hashed again next time)."""
    if ledger.identity is None or ledger.problem:
        return False
    parent, name = os.path.split(os.path.abspath(ledger.path))
    from jaxcache.errors import JaxcacheError
    from jaxcache.trust.walk import walk_open

    try:
        w, dfd = walk_open(parent)
    except (OSError, JaxcacheError):
        return False
    try:
        if w.missing or w.blocked:
            return False
        fd = os.open(name, _APPEND, dir_fd=dfd)
    except OSError:
        return False
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino, birth.of_fd(fd)) != ledger.identity or \
                not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or \
                st.st_nlink != 1 or st.st_mode & 0o022:
            return False
        data = b"".join(originmod.line(w) for w in lines)
        if st.st_size + len(data) > originmod.MAX_BYTES:
            return False
        return os.write(fd, data) == len(data)  # one write: O_APPEND keeps lines whole
    except OSError:
        return False
    finally:
        os.close(fd)
