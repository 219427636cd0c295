"""What stores the filesystems on the audited path, and who can write that.

The walk judges inodes, but the bytes JAX loads live below them: in overlay layer directories,
in a loop-mounted image file, on block devices (partitions, device-mapper and md stacks), or in
another directory a bind mount shows here. Whoever can write those changes what JAX loads
without touching an inode the walk saw. For every mount a directory of the path sits on, this
module finds what backs it and computes its writers with the audit's own rules, recursively (an
image file's own filesystem too), bounded in depth. What it cannot identify or judge (a remote
or unknown block driver, a layer or bind source not visible here, a deleted image) is
UNVERIFIABLE, unless the policy vouches for that mount point (`accepted_storage`).

Inside a container or a chroot the mount namespace hides the host: a volume's source and its
parents, the image's layers, the disk's device node. What it hides about a mount on the cache's
path is named and UNVERIFIABLE ("the host side of /cache is not visible..."). What it hides
about the root this process was started in (the mount at `/`, or a chroot's filesystem that
mountinfo does not list at all) is a note: that root holds /etc, the loader and the programs the
audit and the job run, so whoever could change it owns the job whatever the cache holds; it is
trusted like the container host that set it up (docs/reference/audit.md). What the namespace shows
of either is judged as everywhere.

It cannot see below the kernel: root, the kernel itself, the hypervisor or container host that
provides a virtual disk, firmware and hardware are trusted (docs/reference/audit.md).
"""

from __future__ import annotations

import os

from jaxcache import mounts as mountsmod
from jaxcache.mounts import Mount
from jaxcache.text import safe
from jaxcache.trust.findings import NOTE, UNSAFE, UNVERIFIABLE, Finding, Writer
from jaxcache.trust.judgement.storage_devices import DeviceJudge, JudgeState
from jaxcache.trust.kernel import access as accessmod
from jaxcache.trust.kernel import overlay, sysfs
from jaxcache.trust.kernel import principals as pr
from jaxcache.trust.kernel.principals import Trust
from jaxcache.trust.kernel.sysfs import MAX_DEPTH
from jaxcache.trust.kernel.walk import Walk, WalkError, walk, walk_open

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from jaxcache.trust.rules.policy_rules import Rule

# No backing store: contents live in memory or are made up by the kernel.
VIRTUAL = frozenset({
    "tmpfs", "ramfs", "proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "mqueue",
    "debugfs", "tracefs", "securityfs", "configfs", "bpf", "pstore", "efivarfs", "hugetlbfs",
    "autofs", "binfmt_misc", "fusectl", "nsfs", "rpc_pipefs", "selinuxfs", "rootfs",
})
# Filesystems that live on a block device (or a file): their device must be found and judged.
DISK = frozenset({
    "ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "jfs", "bcachefs", "zfs", "vfat", "msdos",
    "exfat", "ntfs", "ntfs3", "reiserfs", "hfsplus", "iso9660", "udf", "squashfs", "erofs",
    "nilfs2", "minix",
})
class _Judge(DeviceJudge):
    def __init__(self, mounts: tuple[Mount, ...], accounts: pr.Accounts,
                 trust: Callable[[pr.Principal], Trust], rule: Rule, uid: int) -> None:
        self.mounts, self.accounts, self.trust, self.rule, self.uid = (
            mounts, accounts, trust, rule, uid)
        self.s = JudgeState()
        try:
            self.root_dev: int | None = os.lstat("/").st_dev
        except OSError:
            self.root_dev = None

    # ---- results -----------------------------------------------------------------------------
    def unknown(self, message: str, where: str, point: str | None, hidden: bool = False) -> None:
        """Record what cannot be judged. hidden: this mount namespace hides it (a volume's host
        side, an image's layers, a device node outside this /dev): for the root this process
        was started in, that is the container host's, a note; anywhere else UNVERIFIABLE."""
        base = hidden and self.s.base > 0
        key = ("unknown", message, base)
        if key in self.s.done:
            return
        self.s.done.add(key)
        if base:
            self.s.findings.append(Finding(
                "storage.container-root", NOTE,
                f"{message}; this is part of what stores /, the root this process was started "
                "in (a container's or a chroot's), set up from outside this namespace: it holds "
                "the programs the audit and the job run, so it is trusted like the container "
                "host (what the namespace shows of it is judged)", where))
            return
        vouch = (f"if you know what stores {safe(point)} and that only trusted users can write "
                 f"it, vouch for it for this cache path in a policy: accepted_storage = "
                 f"[\"{safe(point)}\"]; otherwise " if point else "")
        self.s.findings.append(Finding(
            "storage.unknown", UNVERIFIABLE, message, where,
            vouch + "use a private cache on a plain local disk (jaxcache init)"))

    def add(self, code: str, items: Iterable[tuple[pr.Grant, accessmod.Action, str, str]],
            what: str,
            remedy: str, where: str) -> None:
        """Record writers, given as (grant, action, target, consequence), root left out (it is
        trusted and would only add noise), and one finding naming the untrusted ones."""
        bad: list[str] = []
        for grant, action, target, consequence in items:
            bad += self._writer(grant, action, target, consequence)
        if bad:
            self.s.findings.append(Finding(
                code, UNSAFE, f"{', '.join(dict.fromkeys(bad))} can change {what}", where,
                remedy))

    # ---- mounts ------------------------------------------------------------------------------
    def walk_mounts(self, w: Walk, depth: int, extra_rel: tuple[str, ...] = (),
                    skip: int | None = None, holds_cache: bool = False) -> None:
        """Judge the storage of every mount a directory of this walk sits on (but `skip`).

        holds_cache: the walk's anchor (plus `extra_rel`) is the cache directory, or what a
        layer holds of it: its entries are judged in each layer too."""
        rels: dict[int, tuple[Mount, set[str]]] = {}
        cache_at: tuple[int, str] | None = None
        for n in w.nodes:
            if n.kind != "dir":
                continue
            m = mountsmod.mount_of(n.path, n.dev, self.mounts)
            if m is None:
                self._unlisted(n.path, n.dev)
                continue
            if m.mount_id == skip:
                continue
            if m.mount_id in self.s.active and n is not w.anchor_node:
                # a directory above a layer, image or bind source on a mount being judged
                # already (the root, most often): its storage is that judgement's, no cycle
                continue
            rel = _relative(n.path, m.point)
            if n is w.anchor_node:
                rel = "/".join(p for p in (rel, *extra_rel) if p)
                if holds_cache:
                    cache_at = (m.mount_id, rel)
            rels.setdefault(m.mount_id, (m, set()))[1].add(rel)
        for m, found in rels.values():
            leaves = {r for r in found
                      if not any(o != r and o.startswith(r + "/") or (r == "" and o)
                                 for o in found)}
            cache_rel = cache_at[1] if cache_at and cache_at[0] == m.mount_id else None
            self.mount(m, leaves, depth, cache_rel)

    def _unlisted(self, path: str, dev: int) -> None:
        """A directory on no mount this namespace lists: a chroot's filesystem (its mount point
        lies outside the root, so mountinfo leaves it out) or one mounted elsewhere."""
        if dev == self.root_dev:
            self.s.base += 1
            try:
                self.unknown("the filesystem of / is on no mount listed in /proc/self/"
                             "mountinfo (a chroot: its mount point lies outside this root), so "
                             "what stores it cannot be seen", "/", None, hidden=True)
            finally:
                self.s.base -= 1
            return
        self.unknown(f"{safe(path)} is on no mount listed in /proc/self/mountinfo (mounted "
                     "outside this root?): what stores it cannot be seen", path, None,
                     hidden=True)

    def mount(self, m: Mount, rels: set[str], depth: int, cache_rel: str | None = None) -> None:
        if m.mount_id in self.s.active:
            self.unknown(f"the storage of {safe(m.point)} leads back to itself (a loop image "
                         "stored on the filesystem it holds?)", m.point, m.point)
            return
        root = m.point == "/"  # the root this process was started in: see the docstring
        key = ("mount", m.mount_id, frozenset(rels), cache_rel, self.s.base > 0 or root)
        if key in self.s.done:
            return
        self.s.done.add(key)
        if depth > MAX_DEPTH:
            self.unknown(f"the storage of {safe(m.point)} is stacked more than {MAX_DEPTH} "
                         "levels deep", m.point, m.point)
            return
        if os.path.normpath(m.point) in self.rule.accepted_storage:
            self.s.findings.append(Finding(
                "storage.accepted", NOTE, f"the storage behind {safe(m.point)} ({m.fstype} from "
                f"{safe(m.source)}) is vouched for by the policy (accepted_storage), not "
                "judged", m.point))
            return
        self.s.active.append(m.mount_id)
        self.s.base += root
        try:
            self._mount(m, rels, depth, cache_rel)
        finally:
            self.s.base -= root
            self.s.active.pop()

    def _mount(self, m: Mount, rels: set[str], depth: int, cache_rel: str | None) -> None:
        if m.category == "network":
            if depth and m.fstype not in self.rule.accepted_filesystems:
                self.unknown(f"{safe(m.point)} is {m.fstype}, a network or FUSE filesystem, and "
                             "stores a layer, image or bind source of the cache: its writers "
                             "cannot be known", m.point, m.point,
                             hidden=m.point == "/" and m.fstype in mountsmod.CONTAINER_ROOTS)
            return  # on the path itself, fs.network already judges it
        if m.is_bind and not (m.fstype == "btrfs" and m.option("subvol") == m.root):
            self.bind(m, depth)
        if m.fstype == "overlay":
            self.overlay(m, rels, depth, cache_rel)
        elif m.fstype in VIRTUAL:
            return
        elif os.major(m.dev) != 0:
            self.device(m.dev, depth + 1, m, whole=True)
        elif m.fstype in DISK:
            devices = [d for d in (sysfs.block_rdev(s) for s in m.source.split(":"))
                       if d is not None]
            if not devices:
                self.unknown(f"{safe(m.point)} is {m.fstype} from {safe(m.source)}, which is not "
                             "a block device jaxcache can identify: what stores it cannot be "
                             "judged", m.point, m.point)
            for rdev in devices:
                for member in sysfs.btrfs_members(rdev) if m.fstype == "btrfs" else (rdev,):
                    self.device(member, depth + 1, m, whole=True)
        else:
            self.unknown(f"{safe(m.point)} is {m.fstype}, a filesystem jaxcache does not know: "
                         "what stores it cannot be judged", m.point, m.point)

    # ---- overlay -----------------------------------------------------------------------------
    def overlay(self, m: Mount, rels: set[str], depth: int, cache_rel: str | None) -> None:
        layers, problem = overlay.overlay_layers(m)
        if problem:
            self.unknown(f"the overlay at {safe(m.point)}: {problem}", m.point, m.point)
            return
        for role, layer in layers:
            self.layer(m, role, layer, rels, depth, cache_rel)

    def layer(self, m: Mount, role: str, layer: str, rels: set[str], depth: int,
              cache_rel: str | None) -> None:
        where = f"{role} {safe(layer)} of the overlay at {safe(m.point)}"
        if not layer.startswith("/"):
            self.unknown(f"{where} is a relative path: the directory it named at mount time "
                         "(from the mounting process's working directory) cannot be found",
                         m.point, m.point, hidden=True)
            return
        try:
            root = walk(layer)
        except WalkError as exc:
            self.unknown(f"{where} cannot be judged: {exc}", m.point, m.point)
            return
        if root.blocked:
            self.unknown(f"{where} cannot be judged: {root.blocked}", m.point, m.point)
            return
        if not root.exists:
            self.unknown(f"{where} is not visible in this mount namespace (a container's "
                         "image?): who can write it cannot be judged", m.point, m.point,
                         hidden=True)
            return
        for rel in sorted(rels) if role != "workdir" else [""]:
            path = layer.rstrip("/") + ("/" + rel if rel else "")
            try:
                lw, fd = walk_open(path)
            except WalkError as exc:
                self.unknown(f"{where}: {safe(path)} cannot be judged: {exc}", m.point, m.point)
                continue
            holds_cache = rel == cache_rel and role != "workdir"
            try:
                entry_grants = self._layer_entries(lw, fd) if holds_cache else []
                if holds_cache and lw.exists:
                    from jaxcache.trust.kernel import open_handles as handlesmod

                    self.s.held |= handlesmod.identities(fd, path).inodes
                    self.s.held_paths.add(path)
            finally:
                os.close(fd)
            if lw.blocked:
                self.unknown(f"{where}: {lw.blocked}", m.point, m.point)
            tail = (f" ({role} of the overlay at {m.point}: what it holds is what the merged "
                    "directory shows)")
            items = [(a.grant, a.action, a.target, a.consequence + tail)
                     for a in accessmod.access(lw, self.accounts, self.uid, umask=False)]
            items += [(g, accessmod.Action.REWRITE_ENTRY, name,
                       f"-> can change the compiled code in {name}{tail}")
                      for name, g in entry_grants]
            self.add("storage.overlay-layer", items,
                     f"the {where}, which holds what JAX reads from {safe(m.point)}",
                     "build the overlay from layer directories only you and root can write, or "
                     "use a private cache on a plain local filesystem (jaxcache init)", path)
            self.walk_mounts(lw, depth + 1, holds_cache=holds_cache)

    def _layer_entries(self, lw: Walk, fd: int) -> list[tuple[str, pr.Grant]]:
        if not lw.exists:
            return []
        from jaxcache.trust.kernel import entries as entriesmod

        inv = entriesmod.inventory_at(fd, lw.anchor_node.path, frozenset({0, self.uid}),
                                      self.accounts)
        base = lw.anchor_node.path.rstrip("/")
        return [(f"{base}/{e.name}", g) for e in inv.entries for g in e.writers]

    def _writer(self, grant: pr.Grant, action: accessmod.Action, target: str, consequence: str
                ) -> list[str]:
        trust = self.trust(grant.principal)
        if trust is Trust.ROOT:
            return []
        if grant.principal.kind == "unmapped" and trust is Trust.UNTRUSTED:
            # someone this user namespace does not map: unknown, not known to be bad
            # (verdict.py's writer.unmapped names it); the root's host side is trusted
            if self.s.base:
                self.unknown(f"{grant.principal} can write {safe(target)} ({grant.reason})",
                             target, None, hidden=True)
                return []
            self.s.writers.append(Writer(grant.principal, action, target,
                                         (grant.reason, consequence), trust))
            return []
        self.s.writers.append(Writer(grant.principal, action, target,
                                     (grant.reason, consequence), trust))
        return [str(grant.principal)] if trust is Trust.UNTRUSTED else []

    # ---- bind mounts -------------------------------------------------------------------------
    def bind(self, m: Mount, depth: int) -> None:
        sources = self._bind_sources(m)
        if not sources:
            self.unknown(f"the host side of {safe(m.point)} is not visible from this mount "
                         f"namespace (a container or chroot): {safe(m.point)} is a bind mount of "
                         f"{safe(m.root)} on {safe(m.source)}, which is not reachable as a "
                         "directory here, so whoever can write or rename it or its parents "
                         "there (deciding what is mounted here next time) is unknown",
                         m.point, m.point, hidden=True)
            return
        for w, path in sources:  # which one a remount uses is up to its config: judge each
            tail = (f"; {path} is the source of the bind mount at {m.point}, which takes "
                    "whatever is there when it is set up again (at the next boot)")
            self.add("storage.bind-source",
                     [(a.grant, a.action, a.target, a.consequence + tail)
                      for a in accessmod.replace_access(w, self.accounts)],
                     f"the source {safe(path)} of the bind mount at {safe(m.point)}",
                     "bind-mount a directory whose parents only you and root can write, or use "
                     "a private cache (jaxcache init)", path)
            self.walk_mounts(w, depth + 1, skip=m.mount_id)  # a bind of a dir onto itself

    def _bind_sources(self, m: Mount) -> list[tuple[Walk, str]]:
        """Where the bound directory is reachable: other mounts of the same filesystem whose
        root contains it, checked by device and inode against the mount's own root."""
        try:
            here = os.lstat(m.point)
        except OSError:
            return []
        if here.st_dev != m.dev:
            return []  # covered by another mount: the identity cannot be checked
        found: dict[str, Walk] = {}
        for c in self.mounts:
            if c.dev != m.dev or c.mount_id == m.mount_id or not _contains(c.root, m.root) \
                    or c.mount_id in self.s.active:  # seen through what is being judged
                continue
            path = (c.point.rstrip("/") + "/" + _relative(m.root, c.root)).rstrip("/") or "/"
            if path in found:
                continue
            try:
                w = walk(path)
            except WalkError:
                continue
            if w.exists and w.anchor_node.identity == (here.st_dev, here.st_ino):
                found[path] = w
        return [(w, path) for path, w in found.items()]

def judge(w: Walk, mounts: tuple[Mount, ...], accounts: pr.Accounts,
          trust: Callable[[pr.Principal], Trust], rule: Rule, uid: int,
          held: list[tuple[frozenset[tuple[int, int]], tuple[str, ...]]] | None = None
          ) -> tuple[list[Finding], list[Writer]]:
    """Findings and writers for the storage below every mount on the walked path. `held`, if
    given, receives (as its one item) what stores the cache's bytes: (inodes, directory paths)
    of the overlay layers' cache directories, loop images and block device nodes, for the handle
    scan."""
    j = _Judge(mounts, accounts, trust, rule, uid)
    j.walk_mounts(w, 0, w.missing, holds_cache=True)
    if held is not None:
        held[:] = [(frozenset(j.s.held), tuple(sorted(j.s.held_paths)))]
    # a mount met on several walks (the path, a layer, an image's directory) is judged once per
    # relative path, so the same conclusion can come twice
    return list(dict.fromkeys(j.s.findings)), list(dict.fromkeys(j.s.writers))


def _relative(path: str, point: str) -> str:
    if point == "/":
        return path.strip("/")
    return path[len(point):].strip("/")


def _contains(root: str, inner: str) -> bool:
    return root == "/" or inner == root or inner.startswith(root.rstrip("/") + "/")
