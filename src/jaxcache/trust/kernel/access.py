"""Who can change what a walked path holds: replace the directory or an ancestor, create it
first, write its entries, or inherit write on the entries JAX creates (default ACL, umask).

The audit turns these into Writers once it knows whom you trust; storage.py asks the same
questions of what stores the cache (overlay layers, bind sources, loop images).
"""

from __future__ import annotations

import os
import stat
from enum import StrEnum
from typing import NamedTuple

from jaxcache.trust.kernel import acl as aclmod
from jaxcache.trust.kernel import principals as pr
from jaxcache.trust.kernel.walk import Node, Walk


def dir_grants(n: Node, accounts: pr.Accounts) -> tuple[pr.Grant, ...]:
    return pr.writers(n.path, n.uid, n.gid, n.mode, n.acl, accounts)


def new_file_gid(d: Node, uid: int, accounts: pr.Accounts) -> int:
    """The group of files created in `d`: its own if setgid, else the writer's primary group."""
    if d.mode & stat.S_ISGID:
        return d.gid
    primary = accounts.primary_gid(uid)
    return d.gid if primary is None else primary


class Action(StrEnum):
    """How a writer can change what JAX loads (the audit's `writers[].action`): a closed set."""

    WRITE_ENTRIES = "write-entries"  # create, replace or delete entries in the directory
    CREATE_ENTRIES = "create-entries"  # create new ones only (a sticky directory not theirs)
    REPLACE = "replace"  # rename or replace the directory, or a directory or link above it
    CREATE_DIR = "create-dir"  # create the missing directory before JAX does
    REWRITE_ENTRY = "rewrite-entry"  # change one entry's bytes (its owner, mode, ACL, link)
    INHERIT = "inherit"  # write what JAX creates from now on (a default ACL, the umask)
    HOLD_HANDLE = "hold-handle"  # a process holding a write descriptor or mapping of an entry
    WRITE_DEVICE = "write-device"  # write the block device the filesystem lives on
    WRITE_STORAGE = "write-storage"  # rewrite the image a loop device is set up from


class Access(NamedTuple):
    """One way one principal can change what a walked path holds (a Writer before trust)."""

    grant: pr.Grant
    action: Action
    target: str
    consequence: str


def access(w: Walk, accounts: pr.Accounts, uid: int, *, umask: bool = True) -> list[Access]:
    """Who can change what JAX would read under a walked path: replace the directory or an
    ancestor, create it first, write its entries, or inherit write on new ones.

    Used for the cache directory itself and for what stores it (trust/judgement/storage.py: overlay
    layers, bind sources). `umask`: count the job's umask (only for the directory JAX writes).
    """
    out: list[Access] = []
    seen: set[tuple[pr.Principal, str, str, str]] = set()

    closed = closed_above(w, w.anchor_node)

    def add(grant: pr.Grant, action: Action, target: str, consequence: str) -> None:
        key = (grant.principal, action, target, grant.reason)
        if key not in seen:
            seen.add(key)
            out.append(Access(grant, action, target,
                              consequence + shut_out_note(closed, grant, accounts)))

    out += replace_access(w, accounts)
    seen.update((a.grant.principal, a.action, a.target, a.grant.reason) for a in out)
    anchor = w.anchor_node
    if w.missing:
        target = anchor.path.rstrip("/") + "/" + w.missing[0]
        for grant in dir_grants(anchor, accounts):
            add(grant, Action.CREATE_DIR, target,
                f"-> can create {target} before JAX does, and own the cache directory")
        later = f"-> will be able to write {target} once it is created"
    elif w.blocked:
        return out
    else:
        target = anchor.path
        sticky = bool(anchor.mode & stat.S_ISVTX)
        for grant in dir_grants(anchor, accounts):
            if sticky and grant.principal.id != anchor.uid:
                add(grant, Action.CREATE_ENTRIES, target,
                    "-> can create new entries (sticky bit: not replace yours); JAX keys are "
                    "predictable, so they can plant entries for programs you have not run yet")
            else:
                add(grant, Action.WRITE_ENTRIES, target,
                    "-> can create, replace or delete cache entries, i.e. choose the code JAX "
                    "runs")
        later = "-> can rewrite the entries JAX creates here from now on"
    # what JAX creates from now on: a default ACL decides it, else the job's umask
    if anchor.default_acl is not None:
        inherited = pr.default_acl_writers(anchor.path, new_file_gid(anchor, uid, accounts),
                                           anchor.default_acl, accounts)
    else:
        inherited = tuple(umask_grants(w, uid, accounts)) if umask else ()
    for grant in inherited:
        add(grant, Action.INHERIT, target, later)
    return out


def replace_access(w: Walk, accounts: pr.Accounts) -> list[Access]:
    """Who can rename or replace a directory (or symlink) of the walk inside its parent."""
    out: list[Access] = []
    seen: set[tuple[pr.Principal, str, str]] = set()
    for n in w.nodes[1:]:
        parent = w.nodes[n.parent] if n.parent is not None else None
        if parent is None:
            continue
        what = "the symlink " if n.kind == "symlink" else ""
        consequence = (f"-> can rename or replace {what}{n.path} and put their own in its place")
        closed = closed_above(w, n)
        for grant in replacers(parent, n, accounts):
            key = (grant.principal, n.path, grant.reason)
            if key not in seen:
                seen.add(key)
                out.append(Access(grant, Action.REPLACE, n.path,
                                  consequence + shut_out_note(closed, grant, accounts)))
    return out


def closed_above(w: Walk, node: Node) -> Node | None:
    """The nearest directory above `node` that only its owner (and root) can search: no
    group or other search bit, no extended ACL. Others cannot reach `node` by name through
    it, but that is not counted (see shut_out_note)."""
    p = w.parent_of(node)
    while p is not None:
        if p.kind == "dir" and not p.mode & 0o011 and (p.acl is None or not p.acl.is_extended):
            return p
        p = w.parent_of(p)
    return None


def shut_out(closed: Node | None, p: pr.Principal) -> bool:
    """`closed` keeps `p` from reaching what lies below it by name: anyone but its owner and
    root (an unmapped owner is not known, so never said to be kept out)."""
    return closed is not None and p.kind != "unmapped" and \
        not (p.kind == "user" and p.id in (0, closed.uid))


def shut_out_note(closed: Node | None, grant: pr.Grant, accounts: pr.Accounts) -> str:
    """What is true of a writer a closed directory above keeps from reaching the target by
    name, and why it still counts: permissions are checked when a path is opened, so a
    process that opened the directory before, another mount of it, or a chmod of the closed
    directory by its owner lets them in (sshd's StrictModes judges a 0777 ~/.ssh inside a
    0700 home the same way). "" for whom it does not keep out (shut_out)."""
    if closed is None or not shut_out(closed, grant.principal):
        return ""
    owner = accounts.user_name(closed.uid) + (" and root" if closed.uid != 0 else "")
    return (f" (not by name today: only {owner} can search {closed.path} (mode "
            f"{closed.mode & 0o7777:04o}); counted all the same, as sshd's StrictModes does: a "
            "process that opened it before, another mount of it, or a chmod of "
            f"{closed.path} lets them in)")


def _umask() -> int | None:
    """This process's umask, read without changing it (os.umask would, racily)."""
    try:  # os.read, not open() with an encoding: that imports its codec on run's path
        fd = os.open("/proc/self/status", os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = os.read(fd, 1 << 16)
        finally:
            os.close(fd)
        for line in data.decode("ascii").splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        return None
    return None


def umask_grants(w: Walk, uid: int, accounts: pr.Accounts) -> list[pr.Grant]:
    """JAX creates entries (and missing directories) with 0666/0777 minus the umask of the job.

    Only judged for the user running the audit: the job inherits this process's umask (true
    for `jaxcache run` and `jaxcache.enable`). A default ACL overrides the umask (handled there).
    """
    mask = _umask()
    anchor = w.anchor_node
    if mask is None or uid != os.geteuid() or anchor.default_acl is not None:
        return []
    grants = []
    where = "here" if not w.missing else "under " + anchor.path
    gid = new_file_gid(anchor, uid, accounts)
    if not mask & 0o020:
        why = (f"your umask {mask:04o} gives what JAX creates {where} group write for group "
               f"{accounts.group_name(gid)}")
        for member in sorted(accounts.members(gid) - {uid}):
            if w.missing or pr.can(member, accounts.groups_of(member), anchor.uid, anchor.gid,
                                   anchor.mode, anchor.acl, aclmod.EXECUTE):
                grants.append(pr.Grant(accounts.user(member), why))
    if not mask & 0o002:
        other = anchor.acl.find(aclmod.OTHER) if anchor.acl is not None else None
        searchable = (other.perm & aclmod.EXECUTE) if other is not None else anchor.mode & 0o001
        if w.missing or searchable:
            grants.append(pr.Grant(pr.EVERYONE, f"your umask {mask:04o} gives what JAX creates "
                                                f"{where} write for others"))
    return grants


def replacers(parent: Node, child: Node, accounts: pr.Accounts) -> tuple[pr.Grant, ...]:
    """Who can rename or replace `child` inside `parent`; a sticky bit limits it to owners."""
    grants = dir_grants(parent, accounts)
    if not parent.mode & stat.S_ISVTX:
        return grants
    kept = [g for g in grants
            if g.principal.kind in ("user", "unmapped") and g.principal.id == parent.uid]
    if child.uid != parent.uid and child.uid != 0:
        gids = accounts.groups_of(child.uid)
        if pr.can(child.uid, gids, parent.uid, parent.gid, parent.mode, parent.acl, pr.WX):
            kept.append(pr.Grant(accounts.user(child.uid),
                                 f"owns {child.path}, which sits in sticky {parent.path}"))
    return tuple(kept)
