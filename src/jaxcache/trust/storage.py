"""What stores the filesystems on the audited path, and who can write that.

The walk judges inodes, but the bytes JAX loads live below them: in overlay layer directories,
in a loop-mounted image file, on block devices (partitions, device-mapper and md stacks), or in
another directory a bind mount shows here. Whoever can write those changes what JAX loads
without touching an inode the walk saw. For every mount a directory of the path sits on, this
module finds what backs it and computes its writers with the audit's own rules, recursively (an
image file's own filesystem too), bounded in depth. What it cannot identify or judge (a remote
or unknown block driver, a layer or bind source not visible here, a deleted image) is
UNVERIFIABLE, unless the policy vouches for that mount point (`accepted_storage`).

It cannot see below the kernel: root, the kernel itself, the hypervisor or container host that
provides a virtual disk, firmware and hardware are trusted (docs/audit.md).
"""

from __future__ import annotations

import os
import re
import stat
import sys

from jaxcache.display import safe
from jaxcache.trust import acl as aclmod
from jaxcache.trust import mounts as mountsmod
from jaxcache.trust import principals as pr
from jaxcache.trust.findings import NOTE, UNSAFE, UNVERIFIABLE, Finding, Writer
from jaxcache.trust.mounts import Mount
from jaxcache.trust.walk import Node, Walk, WalkError, walk, walk_open

MAX_DEPTH = 8  # mounts and block devices stacked on each other; deeper is UNVERIFIABLE
_MAX_DEV_ENTRIES = 20000
_SYS_BLOCK = "/sys/dev/block"
_OVERLAY_PARAMS = "/sys/module/overlay/parameters"
_LOOP_GET_STATUS64 = 0x4C05  # linux/loop.h; struct loop_info64 starts with lo_device, lo_inode
_LOOP_INFO64_SIZE = 232

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
_LOCAL_DISK = re.compile(r"(vd|sd|hd|xvd)[a-z]+|nvme\d+n\d+|mmcblk\d+|zram\d+|ram\d+|pmem\d+")
_STACKED = re.compile(r"dm-\d+|md\d+")
_LOOP = re.compile(r"loop\d+")
_REMOTE = re.compile(r"nbd\d+|rbd\d+|drbd\d+|rnbd\w+|ublkb\d+")
_REMOTE_PATH = ("/session", "nvme-fabrics", "/iscsi")  # an sd/nvme disk that is iSCSI/NVMe-oF


class _State:
    """What one judgement collects (a plain class: a dataclass costs import time on `jaxcache
    run`'s path before the job may import jax)."""

    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.writers: list[Writer] = []
        self.done: set = set()
        self.active: list[int] = []  # mount ids being judged (cycles)
        self.dev_nodes: dict[int, list[tuple[str, os.stat_result]]] | None = None
        self.dev_unreadable: list[str] = []
        # what stores the cache's bytes (layer files, images, device nodes): a handle on one
        # writes what JAX loads as surely as one on an entry (trust/handles.py looks for them)
        self.held: set[tuple[int, int]] = set()
        self.held_paths: set[str] = set()


class _Judge:
    def __init__(self, mounts: tuple[Mount, ...], accounts: pr.Accounts, trust, rule,
                 uid: int) -> None:
        self.mounts, self.accounts, self.trust, self.rule, self.uid = (
            mounts, accounts, trust, rule, uid)
        self.s = _State()

    # ---- results -----------------------------------------------------------------------------
    def unknown(self, message: str, where: str, point: str | None) -> None:
        key = ("unknown", message)
        if key in self.s.done:
            return
        self.s.done.add(key)
        vouch = (f"if you know what stores {safe(point)} and that only trusted users can write "
                 f"it, vouch for it for this cache path in a policy: accepted_storage = "
                 f"[\"{safe(point)}\"]; otherwise " if point else "")
        self.s.findings.append(Finding(
            "storage.unknown", UNVERIFIABLE, message, where,
            vouch + "use a private cache on a plain local disk (jaxcache init)"))

    def add(self, code: str, items, what: str, remedy: str, where: str) -> None:
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
                self.unknown(f"{safe(n.path)} is on no mount listed in /proc/self/mountinfo",
                             n.path, None)
                continue
            if m.mount_id == skip:
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

    def mount(self, m: Mount, rels: set[str], depth: int, cache_rel: str | None = None) -> None:
        if m.mount_id in self.s.active:
            self.unknown(f"the storage of {safe(m.point)} leads back to itself (a loop image "
                         "stored on the filesystem it holds?)", m.point, m.point)
            return
        key = ("mount", m.mount_id, frozenset(rels), cache_rel)
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
        try:
            self._mount(m, rels, depth, cache_rel)
        finally:
            self.s.active.pop()

    def _mount(self, m: Mount, rels: set[str], depth: int, cache_rel: str | None) -> None:
        if m.category == "network":
            if depth and m.fstype not in self.rule.accepted_filesystems:
                self.unknown(f"{safe(m.point)} is {m.fstype}, a network or FUSE filesystem, and "
                             "stores a layer, image or bind source of the cache: its writers "
                             "cannot be known", m.point, m.point)
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
            devices = [d for d in (_block_rdev(s) for s in m.source.split(":")) if d is not None]
            if not devices:
                self.unknown(f"{safe(m.point)} is {m.fstype} from {safe(m.source)}, which is not "
                             "a block device jaxcache can identify: what stores it cannot be "
                             "judged", m.point, m.point)
            for rdev in devices:
                for member in _btrfs_members(rdev) if m.fstype == "btrfs" else (rdev,):
                    self.device(member, depth + 1, m, whole=True)
        else:
            self.unknown(f"{safe(m.point)} is {m.fstype}, a filesystem jaxcache does not know: "
                         "what stores it cannot be judged", m.point, m.point)

    # ---- overlay -----------------------------------------------------------------------------
    def overlay(self, m: Mount, rels: set[str], depth: int, cache_rel: str | None) -> None:
        layers, problem = overlay_layers(m)
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
                         "cannot be found", m.point, m.point)
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
                         "image?): who can write it cannot be judged", m.point, m.point)
            return
        from jaxcache.trust import audit as auditmod  # audit imports this module

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
                    from jaxcache.trust import handles as handlesmod

                    self.s.held |= handlesmod.identities(fd, path).inodes
                    self.s.held_paths.add(path)
            finally:
                os.close(fd)
            if lw.blocked:
                self.unknown(f"{where}: {lw.blocked}", m.point, m.point)
            tail = (f" ({role} of the overlay at {m.point}: what it holds is what the merged "
                    "directory shows)")
            items = [(a.grant, a.action, a.target, a.consequence + tail)
                     for a in auditmod.access(lw, self.accounts, self.uid, umask=False)]
            items += [(g, "rewrite-entry", name, f"-> can change the compiled code in {name}{tail}")
                      for name, g in entry_grants]
            self.add("storage.overlay-layer", items,
                     f"the {where}, which holds what JAX reads from {safe(m.point)}",
                     "build the overlay from layer directories only you and root can write, or "
                     "use a private cache on a plain local filesystem (jaxcache init)", path)
            self.walk_mounts(lw, depth + 1, holds_cache=holds_cache)

    def _layer_entries(self, lw: Walk, fd: int) -> list[tuple[str, pr.Grant]]:
        if not lw.exists:
            return []
        from jaxcache.trust import entries as entriesmod

        inv = entriesmod.inventory_at(fd, lw.anchor_node.path, frozenset({0, self.uid}),
                                      self.accounts)
        base = lw.anchor_node.path.rstrip("/")
        return [(f"{base}/{e.name}", g) for e in inv.entries for g in e.writers]

    def _writer(self, grant: pr.Grant, action: str, target: str, consequence: str) -> list[str]:
        trust = self.trust(grant.principal)
        if trust == "root":
            return []
        self.s.writers.append(Writer(grant.principal, action, target,
                                     (grant.reason, consequence), trust))
        return [str(grant.principal)] if trust == "untrusted" else []

    # ---- bind mounts -------------------------------------------------------------------------
    def bind(self, m: Mount, depth: int) -> None:
        sources = self._bind_sources(m)
        if not sources:
            self.unknown(f"{safe(m.point)} is a bind mount of {safe(m.root)} on {safe(m.source)}, "
                         "which is not reachable as a directory in this mount namespace: whoever "
                         "can rename it or its parents decides what is mounted here at the next "
                         "boot, and jaxcache cannot see them", m.point, m.point)
            return
        from jaxcache.trust import audit as auditmod

        for w, path in sources:  # which one a remount uses is up to its config: judge each
            tail = (f"; {path} is the source of the bind mount at {m.point}, which takes "
                    "whatever is there when it is set up again (at the next boot)")
            self.add("storage.bind-source",
                     [(a.grant, a.action, a.target, a.consequence + tail)
                      for a in auditmod.replace_access(w, self.accounts)],
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
            if c.dev != m.dev or c.mount_id == m.mount_id or not _contains(c.root, m.root):
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

    # ---- block devices -----------------------------------------------------------------------
    def device(self, rdev: int, depth: int, m: Mount, *, whole: bool) -> None:
        key = ("dev", rdev)
        if key in self.s.done:
            return
        self.s.done.add(key)
        label = f"{os.major(rdev)}:{os.minor(rdev)}"
        if depth > MAX_DEPTH:
            self.unknown(f"the block devices under {safe(m.point)} are stacked more than "
                         f"{MAX_DEPTH} levels deep", m.point, m.point)
            return
        sysdir = f"{_SYS_BLOCK}/{label}"
        real = os.path.realpath(sysdir)
        if not os.path.isdir(sysdir):
            self.unknown(f"{safe(m.point)} is stored on block device {label}, which the kernel "
                         "does not list in /sys/dev/block: it cannot be judged", m.point, m.point)
            return
        name = os.path.basename(real)
        if not self.nodes(rdev, name, m):
            self.unknown(f"no device node for {name} ({label}), which stores {safe(m.point)}, "
                         "was found under /dev: who can write it elsewhere cannot be judged",
                         m.point, m.point)
        for holder, hname in _holders(real):
            self.alias(holder, hname, m, f"{hname} is built on {name} (it writes its blocks)")
        if os.path.exists(f"{real}/partition"):
            parent = _read_dev(os.path.join(os.path.dirname(real), "dev"))
            if parent is None:
                self.unknown(f"the disk holding partition {name} cannot be identified",
                             m.point, m.point)
                return
            self.device(parent, depth + 1, m, whole=False)
            return
        if whole:
            for part, pname in _partitions(real):
                self.alias(part, pname, m, f"{pname} is a partition of {name}")
        if _LOOP.fullmatch(name):
            self.loop(real, name, rdev, depth, m)
        elif _STACKED.fullmatch(name):
            for slave, _ in _slaves(real):
                self.device(slave, depth + 1, m, whole=True)
        elif _LOCAL_DISK.fullmatch(name) and not any(p in real for p in _REMOTE_PATH):
            return
        elif _REMOTE.fullmatch(name) or any(p in real for p in _REMOTE_PATH):
            self.unknown(f"{safe(m.point)} is stored on {name}, a network block device: whoever "
                         "can write it on the far side is not visible here", m.point, m.point)
        else:
            self.unknown(f"{safe(m.point)} is stored on {name} ({label}), a block driver "
                         "jaxcache does not know: what backs it cannot be judged",
                         m.point, m.point)

    def alias(self, rdev: int, name: str, m: Mount, why: str) -> None:
        key = ("alias", rdev)
        if key not in self.s.done and ("dev", rdev) not in self.s.done:
            self.s.done.add(key)
            self.nodes(rdev, name, m, why)

    def nodes(self, rdev: int, name: str, m: Mount, why: str | None = None) -> bool:
        """Judge every block device node with this rdev under /dev; False if there is none."""
        found = self._dev_index().get(rdev, [])
        for path, st in found:
            try:
                acl = aclmod.read(path, aclmod.ACCESS)
            except (OSError, aclmod.AclFormatError) as exc:
                self.unknown(f"the ACL of device node {safe(path)} cannot be read: {exc}",
                             path, m.point)
                continue
            self.s.held.add((st.st_dev, st.st_ino))
            grants = []
            for g in pr.writers(path, st.st_uid, st.st_gid, st.st_mode, acl, self.accounts,
                                aclmod.WRITE):
                if g.principal.kind == "group":
                    self.s.findings.append(Finding(
                        "storage.device-group", NOTE,
                        f"device node {safe(path)} gives write to {g.principal}, which has no "
                        "member users on this machine: not counted as a writer (a user added "
                        "to it later could write the filesystem's blocks)", path))
                else:
                    grants.append(g)
            via = f" ({why})" if why else ""
            consequence = (f"-> can write the blocks of {name}{via}, below every permission "
                           f"check, and so change any file on {m.point}")
            self.add("storage.device", [(g, "write-device", path, consequence) for g in grants],
                     f"block device {safe(path)}{via}, which stores {safe(m.point)}",
                     "only root should be able to write the device (e.g. root:disk 0660 with no "
                     "members in disk); check who relies on that access before changing it",
                     path)
        if self.s.dev_unreadable:
            self.unknown("parts of /dev could not be read (" + ", ".join(
                safe(p) for p in self.s.dev_unreadable[:3]) + "): device nodes there were not "
                "judged", "/dev", None)
        return bool(found)

    def _dev_index(self) -> dict[int, list[tuple[str, os.stat_result]]]:
        if self.s.dev_nodes is None:
            self.s.dev_nodes = {}
            _scan_dev("/dev", self.s.dev_nodes, self.s.dev_unreadable, [0])
        return self.s.dev_nodes

    def loop(self, real: str, name: str, rdev: int, depth: int, m: Mount) -> None:
        backing = _read(f"{real}/loop/backing_file")
        if backing is None:
            self.unknown(f"loop device {name} under {safe(m.point)} has no readable backing "
                         "file", m.point, m.point)
            return
        for other, oname in _loops_on(backing, rdev):
            self.alias(other, oname, m, f"{oname} is another loop device on {backing}")
        if backing.endswith(" (deleted)"):
            self.unknown(f"the image behind {name} ({safe(backing)}) was deleted: who can still "
                         "write it cannot be judged", m.point, m.point)
            return
        self.backing_file(backing, name, depth, m, rdev)

    def _attached(self, rdev: int) -> tuple[int, int] | None:
        """(device, inode) of the file the loop device really uses (LOOP_GET_STATUS64), or None
        when no node of it can be opened (not root, not in its group): then the path alone."""
        import fcntl

        for path, _ in self._dev_index().get(rdev, []):
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
            except OSError:
                continue
            try:
                info = bytearray(_LOOP_INFO64_SIZE)
                fcntl.ioctl(fd, _LOOP_GET_STATUS64, info, True)
            except OSError:
                return None
            finally:
                os.close(fd)
            return (int.from_bytes(info[0:8], sys.byteorder),
                    int.from_bytes(info[8:16], sys.byteorder))
        return None

    def backing_file(self, path: str, name: str, depth: int, m: Mount, rdev: int) -> None:
        where = f"the image {safe(path)} behind {name}, which stores {safe(m.point)}"
        parent, base = os.path.split(path)
        if not path.startswith("/") or not base:
            self.unknown(f"{where} is not an absolute file path", m.point, m.point)
            return
        try:
            w, fd = walk_open(parent)
        except WalkError as exc:
            self.unknown(f"{where} cannot be judged: {exc}", m.point, m.point)
            return
        try:
            if not w.exists:
                self.unknown(f"{where} is not visible in this mount namespace", m.point,
                             m.point)
                return
            try:
                st = os.stat(base, dir_fd=fd, follow_symlinks=False)
                acl = None
                if stat.S_ISREG(st.st_mode):
                    ffd = os.open(base, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                    try:
                        acl = aclmod.read(f"/proc/self/fd/{ffd}", aclmod.ACCESS, follow=True)
                        now = os.fstat(ffd)
                        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                            raise OSError(0, "it changed while it was being audited")
                    finally:
                        os.close(ffd)
            except (OSError, aclmod.AclFormatError) as exc:
                self.unknown(f"{where} cannot be judged: {exc.strerror or exc}", m.point,
                             m.point)
                return
        finally:
            os.close(fd)
        attached = self._attached(rdev)
        if attached is not None and attached != (st.st_dev, st.st_ino):
            self.unknown(f"{where}: that path now names another file than the one attached to "
                         f"{name} (renamed, covered by a mount, or another mount namespace's "
                         "path)", m.point, m.point)
            return
        if stat.S_ISBLK(st.st_mode):
            self.device(st.st_rdev, depth + 1, m, whole=True)
            return
        if not stat.S_ISREG(st.st_mode):
            self.unknown(f"{where} is not a regular file", m.point, m.point)
            return
        from jaxcache.trust import audit as auditmod

        self.s.held.add((st.st_dev, st.st_ino))
        node = Node(path, "file", st.st_uid, st.st_gid, st.st_mode, st.st_dev, st.st_ino,
                    w.anchor, acl)
        items = [(g, "write-storage", path, f"-> can rewrite the filesystem image behind {name}, "
                  f"and so any file on {m.point}")
                 for g in pr.writers(path, st.st_uid, st.st_gid, st.st_mode, acl, self.accounts,
                                     aclmod.WRITE)]
        later = f"; {name} is set up from whatever is there next time (at the next boot)"
        items += [(a.grant, a.action, a.target, a.consequence + later)
                  for a in auditmod.replace_access(w, self.accounts)]
        items += [(g, "replace", path, f"-> can rename or replace {path}{later}")
                  for g in auditmod.replacers(w.anchor_node, node, self.accounts)]
        self.add("storage.loop-backing", items, where,
                 "keep the image writable only by you and root, in a directory whose every "
                 "parent only you and root can write, or use a private cache (jaxcache init)",
                 path)
        fm = mountsmod.mount_of(path, st.st_dev, self.mounts)
        if fm is not None and fm.point == path:  # the image itself is mounted there (a bind)
            self.mount(fm, {""}, depth + 1)
        self.walk_mounts(w, depth + 1)


def judge(w: Walk, mounts: tuple[Mount, ...], accounts: pr.Accounts, trust, rule,
          uid: int, held: list | None = None) -> tuple[list[Finding], list[Writer]]:
    """Findings and writers for the storage below every mount on the walked path. `held`, if
    given, receives what stores the cache's bytes: (inodes, directory paths) of the overlay
    layers' cache directories, loop images and block device nodes, for the handle scan."""
    j = _Judge(mounts, accounts, trust, rule, uid)
    j.walk_mounts(w, 0, w.missing, holds_cache=True)
    if held is not None:
        held[:] = [frozenset(j.s.held), tuple(sorted(j.s.held_paths))]
    # a mount met on several walks (the path, a layer, an image's directory) is judged once per
    # relative path, so the same conclusion can come twice
    return list(dict.fromkeys(j.s.findings)), list(dict.fromkeys(j.s.writers))


# ---- overlay options ---------------------------------------------------------------------------
def split_lowerdir(value: str) -> list[str]:
    """lowerdir=a:b\\:c::d -> ["a", "b:c", "", "d"]: `\\` escapes, an empty item starts the
    data-only layers."""
    out, cur, i = [], [], 0
    while i < len(value):
        ch = value[i]
        if ch == "\\" and i + 1 < len(value):
            cur.append(value[i + 1])
            i += 2
            continue
        if ch == ":":
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    out.append("".join(cur))
    return out


def overlay_layers(m: Mount) -> tuple[list[tuple[str, str]], str | None]:
    """(role, directory) for every layer of an overlay mount, or why they cannot be known."""
    layers: list[tuple[str, str]] = []
    data = False
    for opt in m.super_options:
        key, _, value = opt.partition("=")
        if key == "lowerdir":
            for item in split_lowerdir(value):
                if item == "":
                    data = True
                    continue
                layers.append(("data-only lower layer" if data else "lower layer", item))
        elif key in ("lowerdir+", "datadir+"):
            layers.append(("lower layer" if key == "lowerdir+" else "data-only lower layer",
                           value))
        elif key in ("upperdir", "workdir"):
            layers.append(("upper layer" if key == "upperdir" else "workdir", value))
    if not any(r.endswith("lower layer") for r, _ in layers):
        return [], "its lower layers are not listed in /proc/self/mountinfo"
    if any(r.startswith("data-only") for r, _ in layers):
        return [], ("it has data-only layers, whose files are found by redirects jaxcache does "
                    "not follow")
    redirect = m.option("redirect_dir") or _param("redirect_dir")
    metacopy = m.option("metacopy") or _param("metacopy")
    if redirect in ("on", "Y") or metacopy in ("on", "Y"):
        return [], ("redirect_dir or metacopy is on, so a directory or file may be served from "
                    "another path of a lower layer than the one jaxcache judges")
    return layers, None


def _param(name: str) -> str | None:
    return _read(f"{_OVERLAY_PARAMS}/{name}")


# ---- sysfs and /dev ----------------------------------------------------------------------------
def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            return f.read().rstrip("\n")
    except OSError:
        return None


def _read_dev(path: str) -> int | None:
    text = _read(path)
    try:
        major, minor = (int(x) for x in (text or "").split(":"))
    except ValueError:
        return None
    return os.makedev(major, minor)


def _listed(real: str, sub: str) -> list[tuple[int, str]]:
    try:
        names = sorted(os.listdir(f"{real}/{sub}"))
    except OSError:
        return []
    out = []
    for n in names:
        rdev = _read_dev(f"{real}/{sub}/{n}/dev")
        if rdev is not None:
            out.append((rdev, n))
    return out


def _slaves(real: str) -> list[tuple[int, str]]:
    return _listed(real, "slaves")


def _holders(real: str, depth: int = 0) -> list[tuple[int, str]]:
    """Devices built on this one (device-mapper, md): writing them writes its blocks."""
    out = []
    for rdev, name in _listed(real, "holders"):
        out.append((rdev, name))
        if depth < MAX_DEPTH:
            out += _holders(os.path.realpath(f"/sys/class/block/{name}"), depth + 1)
    return out


def _partitions(real: str) -> list[tuple[int, str]]:
    try:
        names = sorted(os.listdir(real))
    except OSError:
        return []
    out = []
    disk = os.path.basename(real)
    for n in names:  # partitions are named after their disk: vda1, nvme0n1p1, loop0p1
        if n.startswith(disk) and os.path.exists(f"{real}/{n}/partition"):
            rdev = _read_dev(f"{real}/{n}/dev")
            if rdev is not None:
                out.append((rdev, n))
    return out


def _loops_on(backing: str, rdev: int) -> list[tuple[int, str]]:
    """Other loop devices on the same image: writing them writes it."""
    out = []
    try:
        names = sorted(n for n in os.listdir("/sys/block") if _LOOP.fullmatch(n))
    except OSError:
        return out
    for n in names:
        if _read(f"/sys/block/{n}/loop/backing_file") == backing:
            other = _read_dev(f"/sys/block/{n}/dev")
            if other is not None and other != rdev:
                out.append((other, n))
    return out


def _btrfs_members(rdev: int) -> list[int]:
    """Every device of the btrfs filesystem that has `rdev` among its devices."""
    try:
        fsids = os.listdir("/sys/fs/btrfs")
    except OSError:
        return [rdev]
    for fsid in fsids:
        members = _listed(f"/sys/fs/btrfs/{fsid}", "devices")
        if any(d == rdev for d, _ in members):
            return [d for d, _ in members]
    return [rdev]


def _block_rdev(source: str) -> int | None:
    if not source.startswith("/dev/"):
        return None
    try:
        st = os.stat(source)
    except OSError:
        return None
    return st.st_rdev if stat.S_ISBLK(st.st_mode) else None


def _scan_dev(path: str, index: dict, unreadable: list[str], count: list[int]) -> None:
    """Every block device node under /dev, by rdev, without following symlinks."""
    try:
        it = os.scandir(path)
    except OSError:
        unreadable.append(path)
        return
    with it:
        for e in it:
            count[0] += 1
            if count[0] > _MAX_DEV_ENTRIES:
                unreadable.append(f"{path} (more than {_MAX_DEV_ENTRIES} entries)")
                return
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISBLK(st.st_mode):
                index.setdefault(st.st_rdev, []).append((e.path, st))
            elif stat.S_ISDIR(st.st_mode):
                _scan_dev(e.path, index, unreadable, count)


def _relative(path: str, point: str) -> str:
    if point == "/":
        return path.strip("/")
    return path[len(point):].strip("/")


def _contains(root: str, inner: str) -> bool:
    return root == "/" or inner == root or inner.startswith(root.rstrip("/") + "/")
