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
from functools import partial

from jaxcache.fingerprint.boot import boot_id
from jaxcache.text import safe
from jaxcache.trust.inputs import trusted_file as inputs
from jaxcache.trust.kernel.principals import Accounts
from jaxcache.trust.provenance import birth, ledger_file
from jaxcache.trust.provenance.ledger_file import Ledger
from jaxcache.trust.provenance.ledger_place import ledger_path
from jaxcache.trust.rules import ci

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping


def load(path: str | None = None, accounts: Accounts | None = None,
         env: Mapping[str, str] | None = None) -> Ledger:
    """The ledger; a missing one is empty, an unprotected or unreadable one is a Ledger with
    its problem (nothing is then yours: fail closed). Under CI (trust/rules/ci.py, read from `env`,
    default os.environ) only the lines written in this boot are kept (boot_id()). The ledger
    knows how to read the ledgers of writers a policy trusts (load_trusted()), which the
    audit asks for where the policy names them (trusted_ledgers)."""
    path = path or ledger_path()
    only_boot = boot_id() if ci.detect(env) else None
    others = partial(load_trusted, accounts=accounts, env=env)
    try:
        found = inputs.streamed(path, inputs.ORIGIN_LEDGER, missing_ok=True, accounts=accounts)
        if found is None:
            return Ledger(path, {}, others=others)
        return _parsed(found, path, only_boot, others=others)
    except inputs.InputError as exc:
        return Ledger(path, {}, problem=str(exc), others=others)


def load_trusted(path: str, writers: frozenset[int], accounts: Accounts | None = None,
                 env: Mapping[str, str] | None = None) -> Ledger:
    """A trusted writer's ledger (the policy's trusted_ledgers), read as a trusted input that
    its owner may own and write besides you and root, when that owner is one of `writers` (the
    users the policy trusts for the cache): anyone else able to write it or a folder above,
    a missing or unbound one, is a Ledger with its problem, which vouches for nothing (fail
    closed). Bound to its file and, under CI, to this boot, as yours is."""
    accounts = accounts or Accounts()
    only_boot = boot_id() if ci.detect(env) else None
    try:
        found = inputs.streamed(path, _TRUSTED_LEDGER, accounts=accounts, also=writers)
        assert found is not None  # not missing_ok: a missing one is an InputError
        return _parsed(found, path, only_boot, owner=accounts.user_name(found[1].st_uid))
    except inputs.InputError as exc:
        return Ledger(path, {}, problem=str(exc), owner="?")


# another writer's ledger: what whoever can change it decides
_TRUSTED_LEDGER = inputs.Kind("trusted writer's ledger", inputs.ORIGIN_LEDGER.limit,
                              "decides which entries count as that writer's jobs' own")


def _parsed(found: tuple[int, os.stat_result], path: str, only_boot: str | None,
            owner: str = "", others: Callable[[str, frozenset[int]], Ledger] | None = None
            ) -> Ledger:
    """The ledger open as `found` (its descriptor and status), bound to that very file; the
    descriptor is closed."""
    fd, st = found
    try:
        identity = (st.st_dev, st.st_ino, birth.of_fd(fd))
        return ledger_file.parse_chunks(
            inputs.chunks(fd, f"{inputs.ORIGIN_LEDGER.name} {safe(path)}",
                          inputs.ORIGIN_LEDGER), path, identity, only_boot, owner, others)
    finally:
        os.close(fd)
