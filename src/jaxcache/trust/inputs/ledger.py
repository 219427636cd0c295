"""The origin ledger read as a trusted input (trust/inputs/trusted_file.py), for the audit to judge
with.

Apart from trust/provenance/ledger_file.py (the format) and trust/provenance/origin.py because the
trusted-input loader audits the folders above the file, and origin.py is part of that audit: the
loader sits above both. Read a chunk at a time through the one descriptor judged (a ledger holds up
to 64 MB: only each line's bytes are kept), and bound to that very file by its device, inode and
birth time (trust/provenance/birth.py).
"""

from __future__ import annotations

import os

from jaxcache.fingerprint.boot import boot_id
from jaxcache.text import safe
from jaxcache.trust.inputs import trusted_file as inputs
from jaxcache.trust.provenance import birth, ledger_file
from jaxcache.trust.provenance.ledger_file import Ledger, ledger_path
from jaxcache.trust.rules import ci

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from jaxcache.trust.kernel.principals import Accounts


def load(path: str | None = None, accounts: Accounts | None = None,
         env: Mapping[str, str] | None = None) -> Ledger:
    """The ledger; a missing one is empty, an unprotected or unreadable one is a Ledger with
    its problem (nothing is then yours: fail closed). Under CI (trust/rules/ci.py, read from `env`,
    default os.environ) only the lines written in this boot are kept (boot_id())."""
    path = path or ledger_path()
    only_boot = boot_id() if ci.detect(env) else None
    try:
        found = inputs.streamed(path, inputs.ORIGIN_LEDGER, missing_ok=True, accounts=accounts)
        if found is None:
            return Ledger(path, {})
        fd, st = found
        try:
            identity = (st.st_dev, st.st_ino, birth.of_fd(fd))
            return ledger_file.parse_chunks(
                inputs.chunks(fd, f"{inputs.ORIGIN_LEDGER.name} {safe(path)}",
                              inputs.ORIGIN_LEDGER), path, identity, only_boot)
        finally:
            os.close(fd)
    except inputs.InputError as exc:
        return Ledger(path, {}, problem=str(exc))
