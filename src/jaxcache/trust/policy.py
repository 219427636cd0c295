"""The trust policy: which extra writers and filesystems a user accepts, per cache path.

Like git's safe.directory, the policy is read only from a place the audited tree cannot
influence: `--policy FILE` or the user's config dir, never from inside the cache directory,
and only from a file that no one but its owner (us or root) can modify.

    # ~/.config/jaxcache/policy.toml
    trusted_users = ["ci-publisher"]          # for every cache path
    [[cache]]
    path = "/srv/jax-cache"                   # absolute, as the audit resolves it
    trusted_users = ["alice"]
    trusted_groups = ["ml-team"]              # every member of the group
    accepted_filesystems = ["nfs4"]           # network filesystems you vouch for
    accepted_storage = ["/mnt/cache-volume"]  # mount points whose backing store you vouch for
    restored_from = "actions/cache, written only by the default branch"  # entries jaxcache did
                                              # not see written: their source, trusted by name
    [[cache]]
    path = "gs://jaxbar/cache"                # a bucket prefix: only trusted_keys apply, and a
    trusted_keys = [{ holder = "ci-publisher", key = "ed25519:..." }]  # holder names a
                                              # principal of the storage service (no local user)
"""

from __future__ import annotations

import os

from jaxcache.display import safe
from jaxcache.errors import PolicyError
from jaxcache.trust.principals import Accounts
from jaxcache.trust.rules import EMPTY, Policy, Rule, inside, is_url, url_text
from jaxcache.userdirs import policy_file

# the model lives in rules.py (below the audit and the loader); callers find it here too
__all__ = ["EMPTY", "Policy", "PolicyError", "Rule", "inside", "load"]

_RULE_KEYS = {"trusted_users", "trusted_groups", "accepted_filesystems", "accepted_storage"}


def load(path: str | None, accounts: Accounts) -> Policy:
    """Load --policy PATH, or the user's config file if it exists, or the empty policy.

    Read through the one loader for trusted inputs (trust/inputs.py): a regular file owned by
    you or root that no one else can modify or replace, all the way up.
    """
    explicit = path is not None
    path = path if explicit else policy_file()
    if not explicit:
        try:
            os.lstat(path)
        except FileNotFoundError:  # the usual case, on `jaxcache run`'s path: no loader import
            return EMPTY
    from jaxcache.trust import inputs

    try:
        found = inputs.read(path, inputs.POLICY, missing_ok=not explicit, accounts=accounts)
    except inputs.InputError as exc:
        raise PolicyError(str(exc)) from None
    if found is None:
        return EMPTY
    return parse(found.data, os.path.abspath(path), accounts)


def parse(data: bytes, source: str, accounts: Accounts) -> Policy:
    """The policy in `data`, read from `source`; PolicyError (one line) if it is none."""
    from jaxcache import validate as v

    try:
        doc = v.parse_toml(data)
    except v.Unreadable as exc:
        raise PolicyError(f"policy file {safe(source)} is {exc}") from None
    return _build(source, doc, accounts)


def _is_name(value: object) -> bool:
    """A string the system calls can take: user, group and path names hold no NUL."""
    return isinstance(value, str) and "\0" not in value


def _rule(data: dict, where: str, accounts: Accounts, url: bool = False) -> Rule:
    unknown = set(data) - _RULE_KEYS - {"trusted_keys", "restored_from"} - (
        {"path"} if where != "top level" else {"cache"})
    if unknown:
        raise PolicyError(f"policy: unknown key(s) {safe(', '.join(sorted(unknown)))} at "
                          f"{where}")
    if url and set(data) & _RULE_KEYS:
        raise PolicyError(f"policy: {where} is a bucket: only trusted_keys applies there (its "
                          "writers are decided by the storage service's access control)")
    lists = {}
    for key in _RULE_KEYS:
        value = data.get(key, [])
        if not isinstance(value, list) or not all(_is_name(v) for v in value):
            raise PolicyError(f"policy: {key} at {where} must be a list of strings "
                              "(without NUL bytes)")
        lists[key] = value
    uids, gids = set(), set()
    for name in lists["trusted_users"]:
        uid = accounts.uid_of(name)
        if uid is None:
            raise PolicyError(f"policy: trusted user {safe(name)!r} at {where} does not exist")
        uids.add(uid)
    for name in lists["trusted_groups"]:
        gid = accounts.gid_of(name)
        if gid is None:
            raise PolicyError(f"policy: trusted group {safe(name)!r} at {where} does not exist")
        gids.add(gid)
    if lists["accepted_storage"] and where == "top level":
        raise PolicyError("policy: accepted_storage vouches for what one cache path is stored on: "
                          "put it in that path's [[cache]] table, not at the top level")
    for point in lists["accepted_storage"]:
        if not os.path.isabs(point):
            raise PolicyError(f"policy: accepted_storage {safe(point)!r} at {where} must be an "
                              "absolute mount point")
    restored = data.get("restored_from")
    if restored is not None and where == "top level":
        raise PolicyError("policy: restored_from names the source of one cache path's entries: "
                          "put it in that path's [[cache]] table, not at the top level")
    if restored is not None and (not _is_name(restored) or not restored.strip()):
        raise PolicyError(f"policy: restored_from at {where} must be a non-empty string naming "
                          "the source you trust (e.g. \"actions/cache, written only by the "
                          "default branch\")")
    if restored is not None and url:
        raise PolicyError(f"policy: {where} is a bucket: restored_from applies to a local "
                          "directory (a bucket's entries are judged by their signatures)")
    names = tuple(lists["trusted_users"]) + tuple(f"group {g}" for g in lists["trusted_groups"])
    return Rule(frozenset(uids), frozenset(gids), frozenset(lists["accepted_filesystems"]), names,
                _trusted_keys(data.get("trusted_keys", []), where, accounts, url),
                frozenset(os.path.normpath(p) for p in lists["accepted_storage"]),
                (restored.strip(),) if restored is not None else ())


def _trusted_keys(items: object, where: str, accounts: Accounts, url: bool = False) -> tuple:
    """trusted_keys = [{ holder = "ci-publisher", key = "ed25519:..." }]: a sealed cache. For
    a bucket the holder names a principal of the storage service, not a local user."""
    from jaxcache.seal.keys import KeyFileError, parse_public

    if not isinstance(items, list) or not all(
            isinstance(i, dict) and set(i) == {"holder", "key"} and
            all(_is_name(v) for v in i.values()) for i in items):
        raise PolicyError(f"policy: trusted_keys at {where} must be a list of "
                          "{ holder = \"USER\", key = \"ed25519:...\" } tables")
    out = []
    for item in items:
        if not url and accounts.uid_of(item["holder"]) is None:
            raise PolicyError(f"policy: key holder {safe(item['holder'])!r} at {where} does "
                              "not exist")
        try:
            out.append(parse_public(item["key"], item["holder"]))
        except KeyFileError as exc:
            raise PolicyError(f"policy: trusted_keys at {where}: {exc}") from None
    return tuple(out)


def _build(source: str, data: dict, accounts: Accounts) -> Policy:
    default = _rule(data, "top level", accounts)
    per_path = []
    caches = data.get("cache", [])
    if not isinstance(caches, list):
        raise PolicyError("policy: [[cache]] must be an array of tables")
    for i, item in enumerate(caches):
        if not isinstance(item, dict) or not _is_name(item.get("path")):
            raise PolicyError(f"policy: [[cache]] number {i + 1} needs a string 'path'")
        where = f"[[cache]] {safe(item['path'])}"
        if is_url(item["path"]):
            text = url_text(item["path"])
            if text is None:
                raise PolicyError(f"policy: [[cache]] path {safe(item['path'])!r} is not a "
                                  "gs://bucket/prefix URL")
            per_path.append((text, _rule(item, where, accounts, url=True)))
            continue
        if not os.path.isabs(item["path"]):
            raise PolicyError(f"policy: [[cache]] path {safe(item['path'])!r} must be absolute "
                              "(or a gs://bucket/prefix URL)")
        per_path.append((os.path.normpath(item["path"]), _rule(item, where, accounts)))
    return Policy(source, default, tuple(per_path))
