"""The origin ledger read as a trusted input (trust/inputs.py), for the audit to judge with.

Apart from trust/origin.py because the trusted-input loader audits the folders above the file,
and origin.py is part of that audit: the loader sits above both.
"""

from __future__ import annotations

from jaxcache.trust import inputs
from jaxcache.trust.origin import Ledger, ledger_path, parse


def load(path: str | None = None, accounts=None) -> Ledger:
    """The ledger; a missing one is empty, an unprotected or unreadable one is a Ledger with
    its problem (nothing is then yours: fail closed)."""
    path = path or ledger_path()
    try:
        found = inputs.read(path, inputs.ORIGIN_LEDGER, missing_ok=True, accounts=accounts)
    except inputs.InputError as exc:
        return Ledger(path, {}, problem=str(exc))
    if found is None:
        return Ledger(path, {})
    return parse(found.data, path, (found.dev, found.ino))
