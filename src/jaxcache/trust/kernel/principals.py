"""Principals and the write grants a directory's mode bits and ACL give them.

Linux checks classes first-match: owner, named ACL users, the group class (owning group and named
groups: access if ANY matching entry grants), then other. Mode 0707 denies group members although
everyone else may write; the functions here follow that order exactly.
"""

from __future__ import annotations

import grp
import pwd
import stat
from enum import StrEnum
from functools import cached_property
from typing import NamedTuple

from jaxcache.trust.kernel import acl as aclmod
from jaxcache.trust.kernel.acl import Acl

WX = aclmod.WRITE | aclmod.EXECUTE


class Trust(StrEnum):
    """Whom a principal is, judged for the user a verdict is for."""

    YOU = "you"
    ROOT = "root"
    POLICY = "policy"  # declared trusted by the user's policy
    UNTRUSTED = "untrusted"

    def __str__(self) -> str:
        return self.value


class Principal(NamedTuple):
    """A user, a group nobody on this machine is known to belong to, everyone, or an owner
    this user namespace does not map ("unmapped": shown as the overflow id, unknown)."""

    kind: str  # "user" | "group" | "everyone" | "unmapped"
    id: int | None
    name: str

    def __str__(self) -> str:
        if self.kind in ("user", "unmapped"):
            return self.name
        if self.kind == "group":
            return f"group {self.name}"
        return "everyone"


EVERYONE = Principal("everyone", None, "everyone")


class Grant(NamedTuple):
    """One principal able to modify one directory, and why."""

    principal: Principal
    reason: str


class Accounts:
    """The user and group database, read once per audit."""

    def __init__(self) -> None:
        self._user_names: dict[int, str] = {}

    @cached_property
    def hidden(self) -> tuple[int | None, int | None]:
        """The (uid, gid) this user namespace shows for every owner it does not map."""
        from jaxcache.userns import hidden_ids

        return hidden_ids()

    def unmapped_uid(self, uid: int) -> bool:
        return uid == self.hidden[0]

    def unmapped_gid(self, gid: int) -> bool:
        return gid == self.hidden[1]

    @cached_property
    def _users(self) -> list[pwd.struct_passwd]:
        return pwd.getpwall()

    @cached_property
    def _groups(self) -> list[grp.struct_group]:
        return grp.getgrall()

    def user_name(self, uid: int) -> str:
        name = self._user_names.get(uid)
        if name is None:
            try:
                name = pwd.getpwuid(uid).pw_name
            except KeyError:
                name = f"uid {uid}"
            self._user_names[uid] = name
        return name

    def group_name(self, gid: int) -> str:
        try:
            return grp.getgrgid(gid).gr_name
        except KeyError:
            return f"gid {gid}"

    def user(self, uid: int) -> Principal:
        if self.unmapped_uid(uid):  # host root, another host user or the local nobody: unknown
            return Principal("unmapped", uid,
                             f"someone outside this user namespace (shown as uid {uid})")
        return Principal("user", uid, self.user_name(uid))

    def uid_of(self, name: str) -> int | None:
        try:
            return pwd.getpwnam(name).pw_uid
        except KeyError:
            return None

    def gid_of(self, name: str) -> int | None:
        try:
            return grp.getgrnam(name).gr_gid
        except KeyError:
            return None

    def members(self, gid: int) -> frozenset[int]:
        """Users in a group: listed supplementary members and users whose primary group it is."""
        uids = {u.pw_uid for u in self._users if u.pw_gid == gid}
        try:
            names = grp.getgrgid(gid).gr_mem
        except KeyError:
            names = []
        for name in names:
            uid = self.uid_of(name)
            if uid is not None:
                uids.add(uid)
        return frozenset(uids)

    def primary_gid(self, uid: int) -> int | None:
        try:
            return pwd.getpwuid(uid).pw_gid
        except KeyError:
            return None

    def groups_of(self, uid: int) -> frozenset[int]:
        """Every group a user belongs to (primary and supplementary)."""
        try:
            entry = pwd.getpwuid(uid)
        except KeyError:
            return frozenset()
        gids = {entry.pw_gid}
        gids.update(g.gr_gid for g in self._groups if entry.pw_name in g.gr_mem)
        return frozenset(gids)


def perm_string(perm: int) -> str:
    return "".join(c if perm & b else "-" for c, b in (("r", 4), ("w", 2), ("x", 1)))


def mode_string(mode: int) -> str:
    return f"{stat.S_IMODE(mode):04o}"


def can(uid: int, gids: frozenset[int], st_uid: int, st_gid: int, mode: int, acl: Acl | None,
        want: int, root_overrides: bool = True) -> bool:
    """Would the kernel grant `want` (rwx bits) to this user? Root is granted everything, but
    for an inode whose owner or group its user namespace does not map (root_overrides=False:
    the kernel then checks root's bits like anyone's)."""
    if uid == 0 and root_overrides:
        return True
    if uid == st_uid:
        return (mode >> 6) & want == want
    if acl is not None and acl.is_extended:
        for entry in acl.named(aclmod.USER):
            if entry.id == uid:
                return acl.effective(entry) & want == want
        matched = False
        for entry in acl.entries:
            if (entry.tag == aclmod.GROUP_OBJ and st_gid in gids) or (
                entry.tag == aclmod.GROUP and entry.id in gids
            ):
                matched = True
                if acl.effective(entry) & want == want:
                    return True
        if matched:
            return False
        other = acl.find(aclmod.OTHER)
        return other is not None and other.perm & want == want
    if st_gid in gids:
        return (mode >> 3) & want == want
    return mode & want == want


def writers(path: str, st_uid: int, st_gid: int, mode: int, acl: Acl | None,
            accounts: Accounts, want: int = WX) -> tuple[Grant, ...]:
    """Everyone able to get `want` on this object: for a directory w+x creates, renames and
    deletes names in it; for a file w rewrites it. The owner counts: it can change the mode."""
    owner = accounts.user(st_uid)
    grants = [Grant(owner, f"owns {path} and can change its mode")]
    what = "write+search" if want == WX else "write"
    where = f"on {path} (mode {mode_string(mode)})"
    if acl is not None and acl.is_extended:
        grants += _acl_grants(path, st_uid, st_gid, acl, accounts, want)
        return tuple(grants)
    if (mode >> 3) & want == want:
        gname = accounts.group_name(st_gid)
        grants += _group_grants(st_gid, {st_uid}, f"group {gname} has {what} {where}", accounts)
    if mode & want == want:
        reason = f"other has {what} {where}"
        if (mode >> 3) & want != want:
            reason += f"; members of group {accounts.group_name(st_gid)} are denied (first match)"
        grants.append(Grant(EVERYONE, reason))
    return tuple(grants)


def _group_grants(gid: int, excluded: set[int], why: str, accounts: Accounts) -> list[Grant]:
    if accounts.unmapped_gid(gid):  # its members are not listed here, whatever /etc/group says
        return [Grant(Principal("unmapped", gid, "members of a group outside this user "
                                f"namespace (shown as gid {gid})"), why)]
    members = accounts.members(gid) - excluded
    if not members and not accounts.members(gid):
        group = Principal("group", gid, accounts.group_name(gid))
        return [Grant(group, f"{why}; no member of it is known on this machine")]
    return [Grant(accounts.user(uid), f"member of group {accounts.group_name(gid)}: {why}")
            for uid in sorted(members)]


def _acl_grants(path: str, st_uid: int, st_gid: int, acl: Acl, accounts: Accounts,
                want: int) -> list[Grant]:
    grants: list[Grant] = []
    mask = acl.mask
    mask_note = "" if mask is None else f", mask {perm_string(mask)}"
    named_users = {e.id for e in acl.named(aclmod.USER)}
    for entry in acl.named(aclmod.USER):
        if entry.id is not None and entry.id != st_uid and acl.effective(entry) & want == want:
            text = aclmod.describe(entry, accounts.user_name(entry.id))
            grants.append(Grant(accounts.user(entry.id),
                                f"ACL entry {text}{mask_note} on {path}"))
    excluded = {st_uid} | {uid for uid in named_users if uid is not None}
    group_entries = [e for e in acl.entries if e.tag in (aclmod.GROUP_OBJ, aclmod.GROUP)]
    for entry in group_entries:
        if acl.effective(entry) & want != want:
            continue
        gid = st_gid if entry.tag == aclmod.GROUP_OBJ else entry.id
        assert gid is not None
        text = aclmod.describe(entry, accounts.group_name(gid))
        why = f"ACL entry {text}{mask_note} on {path}"
        grants += _group_grants(gid, excluded, why, accounts)
    other = acl.find(aclmod.OTHER)
    if other is not None and other.perm & want == want:
        grants.append(Grant(EVERYONE, f"ACL entry other::{perm_string(other.perm)} on {path}; "
                                      "applies to every user no earlier entry matches"))
    return grants


def default_acl_writers(path: str, file_gid: int, acl: Acl,
                        accounts: Accounts) -> tuple[Grant, ...]:
    """Who a default ACL lets modify the files JAX will create in this directory.

    JAX creates entries with mode 0666 (before umask); with a default ACL the new file's mask is
    rw, so any named or group entry with w, and other with w, can rewrite future entries.
    `file_gid` is the group new files will get: the directory's if it is setgid, else the
    writing process's (the judged user's primary group).
    """
    grants: list[Grant] = []
    mask = acl.mask if acl.mask is not None else 7
    for entry in acl.entries:
        perm = entry.perm & mask if entry.tag in (aclmod.USER, aclmod.GROUP, aclmod.GROUP_OBJ) \
            else entry.perm
        if not perm & aclmod.WRITE or entry.tag in (aclmod.USER_OBJ, aclmod.MASK):
            continue
        why = (f"default ACL entry {aclmod.describe(entry, _entry_name(entry, accounts))} on "
               f"{path}: new entries inherit it")
        if entry.tag == aclmod.USER and entry.id is not None:
            grants.append(Grant(accounts.user(entry.id), why))
        elif entry.tag == aclmod.OTHER:
            grants.append(Grant(EVERYONE, why))
        elif entry.tag == aclmod.GROUP and entry.id is not None:
            grants += _group_grants(entry.id, set(), why, accounts)
        elif entry.tag == aclmod.GROUP_OBJ:
            grants += _group_grants(file_gid, set(), why + f" (new files get group "
                                    f"{accounts.group_name(file_gid)})", accounts)
    return tuple(grants)


def _entry_name(entry: aclmod.AclEntry, accounts: Accounts) -> str | None:
    if entry.id is None:
        return None
    if entry.tag == aclmod.USER:
        return accounts.user_name(entry.id)
    return accounts.group_name(entry.id)
