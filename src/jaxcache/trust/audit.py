"""The audit: walk, compute writers, inspect entries and filesystems, and decide the verdict.

Verdicts (DESIGN.md): PRIVATE when only you and root can create, replace or rename entries, the
directory or any ancestor; SHARED-BY-POLICY when every extra writer is declared trusted; UNSAFE
when any writer is not; UNVERIFIABLE when something cannot be judged (network filesystem, URL,
unreadable ancestor, kernel disagreeing with the model). Anything unknown fails closed.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from jaxcache.display import safe
from jaxcache.trust import acl as aclmod
from jaxcache.trust import entries as entriesmod
from jaxcache.trust import mounts as mountsmod
from jaxcache.trust import policy as policymod
from jaxcache.trust import principals as pr
from jaxcache.trust import sealed as sealedmod
from jaxcache.trust import storage as storagemod
from jaxcache.trust import target as targetmod
from jaxcache.trust.findings import (
    NOTE,
    UNSAFE,
    UNVERIFIABLE,
    WARNING,
    Component,
    Finding,
    Verdict,
    Writer,
)
from jaxcache.trust.policy import EMPTY, Policy, Rule
from jaxcache.trust.walk import Node, Walk, walk, walk_open

if False:  # for type checkers only: importing typing costs `jaxcache run` start-up time
    from jaxcache.trust.handles import HandleScan
    from jaxcache.trust.procs import ProcessScan

SCHEMA = "jaxcache.audit/1"


@dataclass(frozen=True)
class AuditReport:
    requested: str
    path: str | None  # absolute path JAX would use
    resolved: str | None  # after symlinks
    exists: bool
    verdict: Verdict
    judged_for: pr.Principal
    writers: tuple[Writer, ...]
    components: tuple[Component, ...]
    missing: tuple[str, ...]
    inventory: entriesmod.Inventory | None
    processes: ProcessScan | None
    findings: tuple[Finding, ...]
    policy: str | None
    handles: HandleScan | None = None  # None: not looked for

    @property
    def untrusted(self) -> tuple[Writer, ...]:
        return tuple(w for w in self.writers if w.trust == "untrusted")

    def writer_names(self, trust: str | None = None) -> frozenset[str]:
        return frozenset(str(w.principal) for w in self.writers
                         if trust is None or w.trust == trust)


class _Trust:
    """Classifies principals from the judged user's point of view."""

    def __init__(self, uid: int, rule: Rule, accounts: pr.Accounts) -> None:
        self.uid, self.rule, self.accounts = uid, rule, accounts

    def __call__(self, p: pr.Principal) -> str:
        if p.kind == "user" and p.id == 0:
            return "root"
        if p.kind == "user" and p.id == self.uid:
            return "you"
        if p.kind == "user" and p.id is not None and (
                p.id in self.rule.trusted_uids
                or self.accounts.groups_of(p.id) & self.rule.trusted_gids):
            return "policy"
        if p.kind == "group" and p.id in self.rule.trusted_gids:
            return "policy"
        return "untrusted"


def audit(given: str, *, policy: Policy = EMPTY, as_user: int | None = None,
          scan_processes: bool = True, cwd: str | None = None,
          accounts: pr.Accounts | None = None, sealed: bool = False,
          sealed_keys: tuple = (), scan_handles: bool = True) -> AuditReport:
    """sealed: judge for a sealed reader, one that loads only entries signed by the policy's
    trusted_keys for this path or `sealed_keys` (and only then can the verdict be SEALED).
    A plain reader is judged by who can write, whatever keys the policy lists.
    scan_processes: list every process using the cache (cwd, descriptors, environment);
    scan_handles: look for other users' processes holding a write handle (trust/handles.py),
    which `run` and `enable()` keep on."""
    accounts = accounts or pr.Accounts()
    uid = os.geteuid() if as_user is None else as_user
    me = accounts.user(uid)
    tgt = targetmod.resolve(given, cwd)
    notes = [Finding(code, NOTE, text) for code, text in tgt.notes]
    if tgt.path is None:
        return _url_report(tgt, me, notes, policy, sealed, sealed_keys)
    w, fd = walk_open(tgt.path)
    ids = None
    try:
        inventory = None
        if w.exists:
            inventory = entriesmod.inventory_at(fd, w.anchor_node.path,
                                                   frozenset({0, uid}), accounts)
            if scan_handles:
                from jaxcache.trust import handles as handlesmod

                ids = handlesmod.identities(fd, w.resolved)
    finally:
        os.close(fd)
    resolved = w.resolved
    if policy.source and policymod.inside(policy.source, resolved):
        raise policymod.PolicyError(
            f"policy {safe(policy.source)} lies inside the audited tree {safe(resolved)}: "
            "whoever can write there could edit whom you trust")
    rule = policy.rule_for(resolved)
    trust = _Trust(uid, rule, accounts)
    mounts = mountsmod.read_mounts()
    components = tuple(_component(w, n, mounts, accounts) for n in w.nodes)
    writers = _writers(w, accounts, trust, uid)
    findings = notes + _path_findings(w, tgt.path)
    findings += _fs_findings(components, rule)
    findings += _kernel_findings(w, uid, accounts, components)
    stores: list = []
    below, storage_writers = storagemod.judge(w, mounts, accounts, trust, rule, uid, stores)
    if ids is not None and stores:  # a handle on a layer file, an image or a device writes too
        ids = ids.plus(*stores)
    findings += below
    writers += storage_writers
    if inventory is not None:
        writers += _entry_writers(inventory, trust)
        findings += _entry_findings(inventory, w.anchor_node.path)
    findings += _writer_findings(writers, w)
    processes = None
    if scan_processes and w.exists:
        from jaxcache.trust import procs as procsmod

        processes = procsmod.scan(resolved, accounts.user_name)
        findings += _process_findings(processes, uid)
    held = None
    if ids is not None:
        held = handlesmod.scan(ids, lambda u: trust(accounts.user(u)), accounts.user_name,
                               you=uid)
        writers += _handle_writers(held, accounts)
        findings += _handle_findings(held)
    elif w.exists:
        findings.append(Finding("handle.unchecked", NOTE,
                                "other users' processes were not checked for write handles "
                                "opened before the permissions were tightened", None,
                                "audit without --no-processes"))
    if _identities(walk(tgt.path)) != _identities(w):
        findings.append(Finding("path.changed", UNVERIFIABLE,
                                "the path changed while it was being audited", resolved,
                                "run the audit again; if it keeps changing, someone is "
                                "modifying the path"))
    keys = rule.trusted_keys + tuple(sealed_keys) if sealed else ()
    holders = {k.holder: trust(accounts.user(accounts.uid_of(k.holder)))
               for k in rule.trusted_keys}
    findings, is_sealed = sealedmod.account(findings, writers, keys, holders)
    verdict = _verdict(findings, writers)
    if is_sealed and verdict.ok:
        verdict = Verdict.SEALED
    return AuditReport(given, tgt.path, resolved, w.exists, verdict, me,
                       tuple(writers), components, w.missing, inventory, processes,
                       tuple(findings), policy.source, held)


def _identities(w: Walk) -> tuple[tuple[int, int], ...]:
    return tuple(n.identity for n in w.nodes)


def _url_report(tgt: targetmod.Target, me: pr.Principal, notes: list[Finding],
                policy: Policy, sealed: bool = False, sealed_keys: tuple = ()) -> AuditReport:
    scheme = (tgt.url or "").split("://", 1)[0]
    finding = Finding(
        "path.url", UNVERIFIABLE,
        f"{safe(tgt.given)} is a {scheme}:// URL: its writers are decided by the storage "
        "service's access control, which jaxcache cannot read",
        tgt.given,
        "check who holds write (e.g. storage.objects.create / roles/storage.objectAdmin on the "
        "bucket and prefix, including service accounts and CI), turn off public or uniform "
        "write grants, and prefer signed entries or a private local cache (jaxcache init)",
    )
    findings = [*notes, finding]
    verdict = Verdict.UNVERIFIABLE
    if sealed:
        from jaxcache.trust import bucket as bucketmod

        findings, verdict = bucketmod.judge_sealed(tgt.given, findings, policy, sealed_keys)
    return AuditReport(tgt.given, None, None, False, verdict, me, (), (), (), None,
                       None, tuple(findings), policy.source)


def _acl_text(acl: aclmod.Acl | None, accounts: pr.Accounts, gid: int) -> tuple[str, ...]:
    if acl is None or not acl.is_extended:
        return ()
    out = []
    for e in acl.entries:
        name = None
        if e.tag == aclmod.USER and e.id is not None:
            name = accounts.user_name(e.id)
        elif e.tag == aclmod.GROUP and e.id is not None:
            name = accounts.group_name(e.id)
        out.append(aclmod.describe(e, name))
    return tuple(out)


def _component(w: Walk, n: Node, mounts, accounts: pr.Accounts) -> Component:
    m = mountsmod.mount_of(n.path, n.dev, mounts)
    return Component(
        n.path, n.kind, accounts.user_name(n.uid), accounts.group_name(n.gid), n.mode,
        _acl_text(n.acl, accounts, n.gid), _acl_text(n.default_acl, accounts, n.gid), n.target,
        m.fstype if m else None, m.category if m else None, m.point if m else None,
        (f"{m.source}:{m.root}" if m and m.is_bind else None), bool(m and m.read_only),
    )


def _dir_grants(n: Node, accounts: pr.Accounts) -> tuple[pr.Grant, ...]:
    return pr.writers(n.path, n.uid, n.gid, n.mode, n.acl, accounts)


def _new_file_gid(d: Node, uid: int, accounts: pr.Accounts) -> int:
    """The group of files created in `d`: its own if setgid, else the writer's primary group."""
    if d.mode & stat.S_ISGID:
        return d.gid
    primary = accounts.primary_gid(uid)
    return d.gid if primary is None else primary


@dataclass(frozen=True)
class Access:
    """One way one principal can change what a walked path holds (a Writer before trust)."""

    grant: pr.Grant
    action: str
    target: str
    consequence: str


def _writers(w: Walk, accounts: pr.Accounts, trust: _Trust, uid: int) -> list[Writer]:
    return [Writer(a.grant.principal, a.action, a.target, (a.grant.reason, a.consequence),
                   trust(a.grant.principal)) for a in access(w, accounts, uid)]


def access(w: Walk, accounts: pr.Accounts, uid: int, *, umask: bool = True) -> list[Access]:
    """Who can change what JAX would read under a walked path: replace the directory or an
    ancestor, create it first, write its entries, or inherit write on new ones.

    Used for the cache directory itself and for what stores it (trust/storage.py: overlay
    layers, bind sources). `umask`: count the job's umask (only for the directory JAX writes).
    """
    out: list[Access] = []
    seen: set[tuple] = set()

    def add(grant: pr.Grant, action: str, target: str, consequence: str) -> None:
        key = (grant.principal, action, target, grant.reason)
        if key not in seen:
            seen.add(key)
            out.append(Access(grant, action, target, consequence))

    out += replace_access(w, accounts)
    seen.update((a.grant.principal, a.action, a.target, a.grant.reason) for a in out)
    anchor = w.anchor_node
    if w.missing:
        target = anchor.path.rstrip("/") + "/" + w.missing[0]
        for grant in _dir_grants(anchor, accounts):
            add(grant, "create-dir", target,
                f"-> can create {target} before JAX does, and own the cache directory")
        later = f"-> will be able to write {target} once it is created"
    elif w.blocked:
        return out
    else:
        target = anchor.path
        sticky = bool(anchor.mode & stat.S_ISVTX)
        for grant in _dir_grants(anchor, accounts):
            if sticky and grant.principal.id != anchor.uid:
                add(grant, "create-entries", target,
                    "-> can create new entries (sticky bit: not replace yours); JAX keys are "
                    "predictable, so they can plant entries for programs you have not run yet")
            else:
                add(grant, "write-entries", target,
                    "-> can create, replace or delete cache entries, i.e. choose the code JAX "
                    "runs")
        later = "-> can rewrite the entries JAX creates here from now on"
    # what JAX creates from now on: a default ACL decides it, else the job's umask
    if anchor.default_acl is not None:
        inherited = pr.default_acl_writers(anchor.path, _new_file_gid(anchor, uid, accounts),
                                           anchor.default_acl, accounts)
    else:
        inherited = tuple(_umask_grants(w, uid, accounts)) if umask else ()
    for grant in inherited:
        add(grant, "inherit", target, later)
    return out


def replace_access(w: Walk, accounts: pr.Accounts) -> list[Access]:
    """Who can rename or replace a directory (or symlink) of the walk inside its parent."""
    out: list[Access] = []
    seen: set[tuple] = set()
    for n in w.nodes[1:]:
        parent = w.nodes[n.parent] if n.parent is not None else None
        if parent is None:
            continue
        what = "the symlink " if n.kind == "symlink" else ""
        consequence = (f"-> can rename or replace {what}{n.path} and put their own in its place")
        for grant in replacers(parent, n, accounts):
            key = (grant.principal, n.path, grant.reason)
            if key not in seen:
                seen.add(key)
                out.append(Access(grant, "replace", n.path, consequence))
    return out


def _umask() -> int | None:
    """This process's umask, read without changing it (os.umask would, racily)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        return None
    return None


def _umask_grants(w: Walk, uid: int, accounts: pr.Accounts) -> list[pr.Grant]:
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
    gid = _new_file_gid(anchor, uid, accounts)
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
    grants = _dir_grants(parent, accounts)
    if not parent.mode & stat.S_ISVTX:
        return grants
    kept = [g for g in grants if g.principal.kind == "user" and g.principal.id == parent.uid]
    if child.uid != parent.uid and child.uid != 0:
        gids = accounts.groups_of(child.uid)
        if pr.can(child.uid, gids, parent.uid, parent.gid, parent.mode, parent.acl, pr.WX):
            kept.append(pr.Grant(accounts.user(child.uid),
                                 f"owns {child.path}, which sits in sticky {parent.path}"))
    return tuple(kept)


def _entry_writers(inv: entriesmod.Inventory, trust: _Trust) -> list[Writer]:
    out = []
    for e in inv.entries:
        for grant in e.writers:
            out.append(Writer(grant.principal, "rewrite-entry", e.name,
                              (grant.reason, f"-> can change the compiled code in {e.name}"),
                              trust(grant.principal)))
    return out


def _path_findings(w: Walk, path: str) -> list[Finding]:
    out = []
    if w.blocked:
        out.append(Finding("path.unreadable", UNVERIFIABLE,
                           f"{w.blocked}: the rest of the path cannot be judged", path,
                           "run the audit as a user who can search every ancestor (or root)"))
    elif w.missing:
        out.append(Finding(
            "path.missing", NOTE,
            f"{safe(w.resolved)} does not exist yet; judged by its nearest existing ancestor "
            f"{safe(w.anchor_node.path)}: whoever can write there can create it first",
            w.resolved, "create it yourself with `jaxcache init PATH` before any job runs"))
    links = [n for n in w.nodes if n.kind == "symlink"]
    for n in links:
        parent = w.parent_of(n)
        note = f"{safe(n.path)} is a symlink to {safe(n.target or '')}"
        if parent is not None and n.uid not in (0, parent.uid):
            note += f" owned by uid {n.uid}, not by the owner of {safe(parent.path)}"
        out.append(Finding("path.symlink", NOTE, note, n.path,
                           "the directories on both sides of the link are part of the trust "
                           "boundary; JAX keys on <= 0.10.2 also include the path you pass"))
    return out


def _fs_findings(components: tuple[Component, ...], rule: Rule) -> list[Finding]:
    out, seen = [], set()
    for c in components:
        if c.kind != "dir" or c.mount_point is None:
            continue
        if c.fs_category == "network" and c.fs_type not in rule.accepted_filesystems:
            if (c.mount_point, "net") not in seen:
                seen.add((c.mount_point, "net"))
                out.append(Finding(
                    "fs.network", UNVERIFIABLE,
                    f"{safe(c.path)} is on {c.fs_type} ({safe(c.mount_point)}): on network and "
                    "FUSE filesystems local permission bits do not bound writers (an NFS client "
                    "with AUTH_SYS chooses its own uid; a FUSE daemon serves what it likes)",
                    c.path,
                    "use a private cache on a local disk (jaxcache init), or, if you control "
                    f"every client and server, accept '{c.fs_type}' for this path in a policy"))
        elif c.fs_category == "network":
            out.append(Finding("fs.network-accepted", NOTE,
                               f"{safe(c.path)} is on {c.fs_type}, accepted by policy", c.path))
        if c.bind_of and (c.mount_point, "bind") not in seen:
            seen.add((c.mount_point, "bind"))
            out.append(Finding("fs.bind", NOTE,
                               f"{safe(c.mount_point)} is a bind mount of {safe(c.bind_of)}: the "
                               "same directory is reachable under its source path too",
                               c.mount_point))
        if c.fs_category == "tmpfs" and (c.mount_point, "tmpfs") not in seen:
            seen.add((c.mount_point, "tmpfs"))
            out.append(Finding("fs.tmpfs", NOTE,
                               f"{safe(c.path)} is on tmpfs ({safe(c.mount_point)}): entries "
                               "vanish at reboot", c.path))
        if c.fs_category == "overlay" and (c.mount_point, "overlay") not in seen:
            seen.add((c.mount_point, "overlay"))
            out.append(Finding("fs.overlay", NOTE,
                               f"{safe(c.path)} is on an overlay filesystem: whoever built its "
                               "lower layers (the image) decided their contents", c.path))
    last = next((c for c in reversed(components) if c.kind == "dir"), None)
    if last is not None and last.read_only:
        out.append(Finding("fs.read-only", NOTE,
                           f"{safe(last.path)} is on a read-only mount: JAX can read entries "
                           "but will not write new ones", last.path))
    return out


def _kernel_findings(w: Walk, uid: int, accounts: pr.Accounts,
                     components: tuple[Component, ...]) -> list[Finding]:
    """Cross-check the permission model against the kernel's answer for the current user."""
    if uid != os.geteuid():
        return []
    gids = frozenset(os.getgroups()) | {os.getegid()}
    out = []
    for n, c in zip(w.nodes, components, strict=True):
        if n.kind != "dir" or n.kernel_writable is None:
            continue
        model = pr.can(uid, gids, n.uid, n.gid, n.mode, n.acl, pr.WX) and not c.read_only
        if model != n.kernel_writable:
            out.append(Finding(
                "kernel.disagrees", UNVERIFIABLE,
                f"the permission model says you {'can' if model else 'cannot'} write "
                f"{safe(n.path)} but the kernel says you {'can' if n.kernel_writable else 'cannot'}"
                " (an LSM, capability, immutable flag or idmapped mount the model does not know)",
                n.path, "inspect the directory by hand (lsattr, getfacl, mount options)"))
    return out


def _entry_findings(inv: entriesmod.Inventory, path: str) -> list[Finding]:
    out = []
    if inv.unreadable:
        out.append(Finding("entries.unreadable", UNVERIFIABLE, inv.unreadable, path,
                           "run the audit as the user who owns the cache"))
    explain = {
        "symlink": (UNSAFE, "is a symlink: JAX follows it when reading and writing, so the "
                            "link's target decides the compiled code"),
        "hard-link": (WARNING, "has other hard links: JAX never creates them; its content is "
                               "also reachable under another name"),
        "not-regular": (UNSAFE, "is not a regular file (device, FIFO or socket)"),
        "unexpected-dir": (WARNING, "is a directory JAX does not create"),
        "unexpected-name": (NOTE, "is not a name JAX writes"),
        "acl-unreadable": (UNVERIFIABLE, "has an ACL that cannot be read"),
    }
    for e in inv.entries:
        for flag in e.flags:
            if flag in explain:
                effect, text = explain[flag]
                out.append(Finding(f"entry.{flag}", effect, f"entry {safe(e.name)} {text}",
                                   e.name, None if effect == NOTE else
                                   "find out who put it there before any job loads it; "
                                   "jaxcache never deletes it for you"))
    return out


def _writer_findings(writers: list[Writer], w: Walk) -> list[Finding]:
    out = []
    by_principal: dict[pr.Principal, list[Writer]] = {}
    for wr in writers:
        if wr.trust == "untrusted":
            by_principal.setdefault(wr.principal, []).append(wr)
    for p, ws in sorted(by_principal.items()):
        first = ws[0]
        if p.kind == "everyone":
            remedy = ("do not point JAX at this directory: use a private one (jaxcache init); "
                      "no policy can make 'everyone' trusted. Other jobs may rely on this "
                      "access: check who uses it before changing any permission")
        else:
            remedy = ("do not point JAX at this directory: use a private one (jaxcache init), "
                      f"or, if {p} is meant to share it, declare them in a policy. Other jobs "
                      "may rely on this access: check who uses it before changing any "
                      "permission")
        out.append(Finding(
            "writer.untrusted", UNSAFE,
            f"{p} can change what JAX loads: {first.chain[0]} {first.chain[1]}"
            + (f" (and {len(ws) - 1} more way(s))" if len(ws) > 1 else ""),
            first.target, remedy))
    precreated = w.anchor_node.path.rstrip("/") + "/" + w.missing[0] if w.missing else None
    # (writers of the storage below, trust/storage.py, have targets of their own)
    if precreated and any(wr.action == "create-dir" and wr.target == precreated
                          for wr in writers if wr.trust == "untrusted"):
        out.append(Finding(
            "dir.precreate", UNSAFE,
            f"{safe(precreated)} does not exist and others can create it in "
            f"{safe(w.anchor_node.path)} before JAX does (JAX uses a directory it finds, "
            "whoever made it)", precreated,
            "create the cache yourself in a directory only you can write: jaxcache init"))
    if any(wr.action == "create-entries" and wr.target == w.anchor_node.path
           for wr in writers if wr.trust == "untrusted"):
        out.append(Finding(
            "dir.sticky-preseed", UNSAFE,
            f"{safe(w.anchor_node.path)} has the sticky bit: others cannot replace your entries "
            "but can create new names, and JAX cache keys are computable, so they can plant an "
            "entry your next program will load", w.anchor_node.path,
            "use a private directory (jaxcache init)"))
    return out


def _process_findings(scan: ProcessScan, uid: int) -> list[Finding]:
    out = []
    for use in scan.uses:
        effect = NOTE if use.uid in (uid, 0) else WARNING
        out.append(Finding("users.process", effect,
                           f"process {use.pid} ({safe(use.command)}, user {use.user}) uses this "
                           f"cache ({use.how})", None))
    if scan.uninspected:
        out.append(Finding("users.uninspected", NOTE,
                           f"{scan.uninspected} processes of other users could not be inspected "
                           "(run as root to see every user of the cache)", None))
    return out


def _handle_writers(held: HandleScan, accounts: pr.Accounts) -> list[Writer]:
    return [Writer(accounts.user(h.uid), "hold-handle", h.path,
                   (f"process {h.pid} ({safe(h.command)}) holds {safe(h.path)} open for "
                    f"writing ({h.detail}), opened when the permissions allowed it",
                    "-> can change the compiled code JAX loads, whatever the permissions say "
                    "now"), h.trust)
            for h in held.handles]


def _handle_findings(held: HandleScan) -> list[Finding]:
    out = []
    for h in held.handles:
        how = ("a descriptor open for writing" if h.kind == "write"
               else "a shared mapping that can write")
        if h.trust != "untrusted":
            out.append(Finding(f"handle.{h.kind}", NOTE,
                               f"process {h.pid} ({safe(h.command)}, user {h.user}, trusted by "
                               f"the policy) holds {how} on {safe(h.path)} ({h.detail})", h.path))
            continue
        out.append(Finding(
            f"handle.{h.kind}", UNSAFE,
            f"process {h.pid} ({safe(h.command)}, user {h.user}) holds {how} on "
            f"{safe(h.path)} ({h.detail}): permissions are checked only when a file is opened, "
            "so it can rewrite what JAX loads whatever they say now", h.path,
            f"stop process {h.pid} (ask {h.user}, or as root), then audit again; if "
            f"{h.user} is meant to share this cache, declare them in a policy"))
    if held.uninspected:
        users = ", ".join(f"{u} ({n})" for u, n in held.uninspected)
        out.append(Finding(
            "handle.uninspected", WARNING,
            f"{held.uninspected_count} processes of other users could not be inspected "
            f"({users}): a write handle one of them opened while the cache was writable to "
            "them cannot be ruled out", None,
            "audit as root (sudo jaxcache audit DIR) to check every process; a cache that was "
            "never shared cannot have such a handle"))
    return out


def _verdict(findings: list[Finding], writers: list[Writer]) -> Verdict:
    if any(f.effect == UNSAFE for f in findings):
        return Verdict.UNSAFE
    if any(f.effect == UNVERIFIABLE for f in findings):
        return Verdict.UNVERIFIABLE
    if any(wr.trust == "policy" for wr in writers):
        return Verdict.SHARED_BY_POLICY
    return Verdict.PRIVATE
