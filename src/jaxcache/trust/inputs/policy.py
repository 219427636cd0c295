"""The trust policy: which extra writers and filesystems a user accepts, per cache path.

Like git's safe.directory, the policy is read only from a place the audited tree cannot
influence: `--policy FILE` or the user's config dir, never from inside the cache directory,
and only from a file that no one but its owner (us or root) can modify.

    # ~/.config/jaxcache/policy.toml
    trusted_users = ["ci-publisher"]          # for every cache path
    [[cache]]
    path = "/srv/jax-cache"                   # absolute, taken as written: followed through
                                              # a link only you or root could change
    trusted_users = ["alice"]
    trusted_signers = ["publisher"]           # key holders for sealed readers only: plain
                                              # readers still count them as writers
    trusted_groups = ["ml-team"]              # every member of the group
    accepted_filesystems = ["nfs4"]           # network filesystems you vouch for
    accepted_storage = ["/mnt/cache-volume"]  # mount points whose backing store (and its
                                              # host-side owners, in a container) you vouch for
    restored_from = "actions/cache, written only by the default branch"  # entries jaxcache did
                                              # not see written: their source, trusted by name
    trusted_ledgers = ["/home/alice/.local/state/jaxcache/origin.ledger"]  # the origin
                                              # ledgers of trusted writers: what their watched
                                              # jobs wrote counts as known (docs/reference/audit.md)
    [[cache]]
    path = "gs://jaxbar/cache"                # a bucket prefix: only the key settings apply,
    trusted_keys = [{ holder = "ci-publisher", key = "ed25519:..." }]  # holder names a
                                              # principal of the storage service (no local user)

    # the key lifecycle (docs/reference/sealed-cache.md): a key may carry a name and a validity
    # window (RFC 3339, judged by the reader's clock), keys can be revoked (by key text or id)
    # for every path, and a path may need the keys of several distinct holders per entry
    trusted_keys = [{ holder = "ci", key = "ci-2026-12:ed25519:...",
                      not_before = 2026-12-01T00:00:00Z, not_after = 2027-06-01T00:00:00Z }]
    revoked_keys = ["ci-2026-06:ed25519:...", "1a2b3c4d5e6f7a8b"]
    signatures_needed = 2
    require_build = true                      # sealed readers miss entries whose signatures
                                              # name no build ("build unknown") instead of
                                              # loading them (docs/reference/sealed-cache.md)
"""

from __future__ import annotations

import os

from jaxcache.errors import PolicyError
from jaxcache.trust.rules.policy_rules import EMPTY, Policy, Rule, inside
from jaxcache.userdirs import policy_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.trust.kernel.principals import Accounts

# the model lives in policy_rules.py (below the audit and the loader); callers find it here
# too. The file's parser is policy_toml.py's.
__all__ = ["EMPTY", "Policy", "PolicyError", "Rule", "inside", "load"]


def load(path: str | None, accounts: Accounts) -> Policy:
    """Load --policy PATH, or the user's config file if it exists, or the empty policy.

    Read through the one loader for trusted inputs (trust/inputs/trusted_file.py): a regular file
    owned by you or root that no one else can modify or replace, all the way up.
    """
    explicit = path is not None
    if path is None:
        try:
            path = policy_file()
        except ValueError as exc:
            raise PolicyError(str(exc)) from None
    if not explicit:
        try:
            os.lstat(path)
        except FileNotFoundError:  # the usual case, on `jaxcache run`'s path: no loader import
            return EMPTY
    from jaxcache.trust.inputs import trusted_file as inputs
    from jaxcache.trust.inputs.policy_toml import parse

    try:
        found = inputs.read(path, inputs.POLICY, missing_ok=not explicit, accounts=accounts)
    except inputs.InputError as exc:
        raise PolicyError(str(exc)) from None
    if found is None:
        return EMPTY
    return parse(found.data, os.path.abspath(path), accounts)
