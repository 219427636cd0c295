"""The findings an audit draws from what it saw (the path, its filesystems, the kernel's own
answer, the entries, the writers, other processes, open write handles), and the verdict they
add up to. Anything unknown fails closed: UNVERIFIABLE.
"""

from __future__ import annotations

import os

from jaxcache.mounts import CONTAINER_ROOTS
from jaxcache.text import safe, some
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
from jaxcache.trust.kernel import entries as entriesmod
from jaxcache.trust.kernel import principals as pr
from jaxcache.trust.kernel.access import Action, closed_above, shut_out
from jaxcache.trust.kernel.principals import Trust
from jaxcache.trust.kernel.walk import Walk
from jaxcache.trust.rules.policy_rules import Policy, Rule, as_written, through_trusted_links

TYPE_CHECKING = False  # for type checkers only: importing typing costs `jaxcache run` start-up time
if TYPE_CHECKING:
    from jaxcache.trust.kernel.cache_users import ProcessScan
    from jaxcache.trust.kernel.open_handles import HandleScan


def path_findings(w: Walk, path: str) -> list[Finding]:
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
            w.resolved, "create it before any job runs (`jaxcache init PATH`, or the parent's "
            "owner where you may not write there)"))
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


def declaration_findings(policy: Policy, w: Walk, path: str) -> list[Finding]:
    """A [[cache]] path written as the cache was given, through a link someone other than you
    and root could change: it names no directory (policy_rules.py's declared()), so say why it does
    not apply here."""
    links = [n for n in w.nodes if n.kind == "symlink"]
    if not links or ".." in path.split("/") or as_written(path) == w.resolved or \
            not policy.declares(path) or through_trusted_links(as_written(path)) == w.resolved:
        return []
    return [Finding(
        "policy.through-link", NOTE,
        f"the policy's [[cache]] {safe(as_written(path))} does not apply: it goes through the "
        f"symlink {safe(links[0].path)}, which someone other than you and root could change "
        "(they would choose what the declaration applies to)",
        path, f"declare the directory itself: path = \"{safe(w.resolved)}\"")]


def fs_findings(components: tuple[Component, ...], rule: Rule) -> list[Finding]:
    out, seen = [], set()
    for c in components:
        if c.kind != "dir" or c.mount_point is None:
            continue
        if c.fs_category == "network" and c.mount_point == "/" and c.fs_type in CONTAINER_ROOTS:
            if ("/", "container-root") not in seen:
                seen.add(("/", "container-root"))
                out.append(Finding(
                    "storage.container-root", NOTE,
                    f"/ is on {c.fs_type}, the root this process was started in, which a daemon "
                    "outside this container serves from the image's layers: like the container "
                    "host that set it up (and the programs the audit and the job run, which it "
                    "holds), it is trusted", "/"))
        elif c.fs_category == "network" and c.fs_type not in rule.accepted_filesystems:
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


def kernel_findings(w: Walk, uid: int, accounts: pr.Accounts,
                    components: tuple[Component, ...]) -> list[Finding]:
    """Cross-check the permission model against the kernel's answer for the current user."""
    if uid != os.geteuid():
        return []
    gids = frozenset(os.getgroups()) | {os.getegid()}
    out = []
    for n, c in zip(w.nodes, components, strict=True):
        if n.kind != "dir" or n.kernel_writable is None:
            continue
        mapped = not (accounts.unmapped_uid(n.uid) or accounts.unmapped_gid(n.gid))
        model = pr.can(uid, gids, n.uid, n.gid, n.mode, n.acl, pr.WX,
                       root_overrides=mapped) and not c.read_only
        if model != n.kernel_writable:
            out.append(Finding(
                "kernel.disagrees", UNVERIFIABLE,
                f"the permission model says you {'can' if model else 'cannot'} write "
                f"{safe(n.path)} but the kernel says you {'can' if n.kernel_writable else 'cannot'}"
                " (an LSM, capability, immutable flag or idmapped mount the model does not know)",
                n.path, "inspect the directory by hand (lsattr, getfacl, mount options)"))
    return out


def entry_findings(inv: entriesmod.Inventory, path: str) -> list[Finding]:
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
    sidecar_link = ("is a symlink: JAX never reads it, and jaxcache's sealed-cache reader "
                    "refuses symlinks, so no tool of ours made it: someone placed it there")
    # one finding per kind of flag, naming its entries (a folder of 29 stray files is one
    # finding with a count, not 29 with the same remedy)
    grouped: dict[tuple[str, str], list[str]] = {}
    for e in inv.entries:
        for flag in e.flags:
            if flag in explain:
                text = explain[flag][1]
                if flag == "symlink" and e.kind in ("signature", "used"):
                    text = sidecar_link  # .sig/.used: jaxcache's own files, not JAX's
                grouped.setdefault((flag, text), []).append(e.name)
    for (flag, text), names in grouped.items():
        effect = explain[flag][0]
        said = f"entry {safe(names[0])} {text}" if len(names) == 1 else \
            f"{len(names)} entries ({some(names)}): each {text}"
        out.append(Finding(f"entry.{flag}", effect, said, names[0], None if effect == NOTE else
                           "find out who put them there before any job loads one; jaxcache "
                           "never deletes them for you" if len(names) > 1 else
                           "find out who put it there before any job loads it; "
                           "jaxcache never deletes it for you"))
    return out


def writer_findings(writers: list[Writer], w: Walk) -> list[Finding]:
    """One finding per untrusted writer, and one per cause the directory itself has (a name
    others may create first, a sticky bit others may plant under). One cause, one finding: a
    writer whose only way in is creating names in the sticky directory is said once, by the
    sticky finding, which names them."""
    out = []
    anchor = w.anchor_node.path
    by_principal: dict[pr.Principal, list[Writer]] = {}
    for wr in writers:
        if wr.trust is Trust.UNTRUSTED:
            by_principal.setdefault(wr.principal, []).append(wr)
    planters = sorted({wr.principal for wr in writers if _known_untrusted(wr)
                       and wr.action is Action.CREATE_ENTRIES and wr.target == anchor})
    only_plant = {p for p in planters
                  if all(x.action is Action.CREATE_ENTRIES and x.target == anchor
                         for x in by_principal[p])}
    closed = closed_above(w, w.anchor_node)
    for p, ws in sorted(by_principal.items()):
        if p in only_plant:
            continue  # dir.sticky-preseed below says it
        first = ws[0]
        more = f" (and {len(ws) - 1} more way(s))" if len(ws) > 1 else ""
        if p.kind == "unmapped":
            out.append(Finding(
                "writer.unmapped", UNVERIFIABLE,
                f"{p} can change what JAX loads: {first.chain[0]} {first.chain[1]}{more}; this "
                "user namespace shows every owner it does not map with that one id (root or "
                "any user of the host), so who it is cannot be known from here", first.target,
                "map the owner into the namespace (podman --userns=keep-id, or a uid map that "
                "includes it), or, if you know who owns it on the host and trust them, vouch "
                "for the storage of the mount it is on for this cache path in a policy "
                "(accepted_storage); otherwise use a private cache (jaxcache init)"))
            continue
        if closed is not None and shut_out(closed, p) and all(
                wr.action in _PATH_ACTIONS and wr.target.startswith(closed.path.rstrip("/") + "/")
                for wr in ws):  # its owner keeps every way in, whatever the bits below
            dirs = ", ".join(sorted({safe(wr.target) for wr in ws}))
            remedy = (f"only its owner and root can search {safe(closed.path)}, so no job of "
                      "another user reaches this by name: take away the write access named "
                      f"above on {dirs} (chmod go-w for mode bits, setfacl -x for an ACL entry), "
                      "or use a private cache (jaxcache init)")
        elif p.kind == "everyone":
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
            f"{p} can change what JAX loads: {first.chain[0]} {first.chain[1]}" + more,
            first.target, remedy))
    precreated = w.anchor_node.path.rstrip("/") + "/" + w.missing[0] if w.missing else None
    # (writers of the storage below, trust/judgement/storage.py, have targets of their own)
    if precreated and any(wr.action is Action.CREATE_DIR and wr.target == precreated
                          for wr in writers if _known_untrusted(wr)):
        out.append(Finding(
            "dir.precreate", UNSAFE,
            f"{safe(precreated)} does not exist and others can create it in "
            f"{safe(w.anchor_node.path)} before JAX does (JAX uses a directory it finds, "
            "whoever made it)", precreated,
            "create the cache yourself in a directory only you can write: jaxcache init"))
    if planters:
        who = ", ".join(str(p) for p in planters)
        out.append(Finding(
            "dir.sticky-preseed", UNSAFE,
            f"{safe(anchor)} has the sticky bit and {who} can create names in it: they "
            "cannot replace your entries, but JAX cache keys are computable, so they can plant "
            "an entry your next program will load", anchor,
            "use a private directory (jaxcache init). Other jobs may rely on this access: "
            "check who uses it before changing any permission"))
    return out


# the ways in that need the directory's path (not a handle, not a file's own link)
_PATH_ACTIONS = frozenset({Action.WRITE_ENTRIES, Action.CREATE_ENTRIES, Action.REPLACE,
                           Action.CREATE_DIR, Action.INHERIT})


def _known_untrusted(wr: Writer) -> bool:
    """An untrusted writer who is known: an unmapped owner is unknown (writer.unmapped)."""
    return wr.trust is Trust.UNTRUSTED and wr.principal.kind != "unmapped"


def process_findings(scan: ProcessScan, uid: int) -> list[Finding]:
    out = []
    for use in scan.uses:
        effect = NOTE if use.uid in (uid, 0) else WARNING
        out.append(Finding("users.process", effect,
                           f"process {use.pid} ({safe(use.command)}, user {use.user}) uses this "
                           f"cache ({use.how})", None))
    if scan.uninspected:
        out.append(Finding("users.uninspected", NOTE, uninspected_text(scan), None))
    return out


_NAMED = 3  # up to this many uninspected processes are named, pid and user


def uninspected_text(scan: ProcessScan, *, root: bool | None = None) -> str:
    """'1 process could not be inspected (pid 1, user root: ...)': the pids and users when
    few; run as root advised only to one who is not root (root is refused some too)."""
    root = os.geteuid() == 0 if root is None else root
    n = scan.uninspected
    head = f"{n} process{'' if n == 1 else 'es'} could not be inspected"
    if scan.denied and len(scan.denied) <= _NAMED:
        who = ", ".join(f"pid {pid}, user {user}" for pid, user in scan.denied)
    else:
        users = sorted({user for _, user in scan.denied})
        noun = "user" if len(users) == 1 else "users"
        who = f"{noun} {', '.join(users[:_NAMED])}{', ...' if len(users) > _NAMED else ''}" \
            if users else ""
    if root:
        why = "permission denied even as root"
        return f"{head} ({who}: {why})" if who else f"{head} ({why})"
    advice = "run as root to see every user of the cache"
    return f"{head} ({who}; {advice})" if who else f"{head} ({advice})"


def handle_writers(held: HandleScan, accounts: pr.Accounts) -> list[Writer]:
    return [Writer(accounts.user(h.uid), Action.HOLD_HANDLE, h.path,
                   (f"process {h.pid} ({h.command}) holds {h.path} open for "
                    f"writing ({h.detail}), opened when the permissions allowed it",
                    "-> can change the compiled code JAX loads, whatever the permissions say "
                    "now"), h.trust)
            for h in held.handles]


def handle_findings(held: HandleScan) -> list[Finding]:
    out = []
    for h in held.handles:
        how = ("a descriptor open for writing" if h.kind == "write"
               else "a shared mapping that can write")
        if h.trust is not Trust.UNTRUSTED:
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
        n = held.uninspected_count
        advice = ("even root was refused: a cache that was never shared cannot have such a handle"
                  if os.geteuid() == 0 else
                  "audit as root (sudo jaxcache audit DIR) to check every process; a cache that "
                  "was never shared cannot have such a handle")
        out.append(Finding(
            "handle.uninspected", WARNING,
            f"{n} process{'' if n == 1 else 'es'} of other users could not be inspected "
            f"({users}): a write handle one of them opened while the cache was writable to "
            "them cannot be ruled out", None, advice))
    return out


def verdict(findings: list[Finding], writers: list[Writer]) -> Verdict:
    if any(f.effect == UNSAFE for f in findings):
        return Verdict.UNSAFE
    if any(f.effect == UNVERIFIABLE for f in findings):
        return Verdict.UNVERIFIABLE
    if any(wr.trust is Trust.POLICY for wr in writers):
        return Verdict.SHARED_BY_POLICY
    return Verdict.PRIVATE
