"""Block devices below a mount, for storage.py's judge: the device nodes that write a
filesystem's blocks, the disks and stacks (partitions, device-mapper, md) it is built on, and
the image file behind a loop device, whose own storage is judged in turn.

A mixin of storage._Judge (which supplies unknown(), add(), mount(), walk_mounts() and the
state `s`), kept apart so that each module holds one kind of storage.
"""

from __future__ import annotations

import os
import stat
import sys

from jaxcache import mounts as mountsmod
from jaxcache.mounts import Mount
from jaxcache.text import safe
from jaxcache.trust.findings import NOTE, Finding, Writer
from jaxcache.trust.kernel import access as accessmod
from jaxcache.trust.kernel import acl as aclmod
from jaxcache.trust.kernel import principals as pr
from jaxcache.trust.kernel import sysfs
from jaxcache.trust.kernel.sysfs import MAX_DEPTH
from jaxcache.trust.kernel.walk import Node, WalkError, walk_open

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from jaxcache.trust.kernel.walk import Walk

_LOOP_GET_STATUS64 = 0x4C05  # linux/loop.h; struct loop_info64 starts with lo_device, lo_inode
_LOOP_INFO64_SIZE = 232


class JudgeState:
    """What one judgement collects (a plain class: a dataclass costs import time on `jaxcache
    run`'s path before the job may import jax)."""

    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.writers: list[Writer] = []
        self.done: set[tuple[object, ...]] = set()  # what was judged, by kind and key
        self.active: list[int] = []  # mount ids being judged (cycles)
        self.base = 0  # > 0 while judging the storage of the root this process started in
        self.dev_nodes: dict[int, list[tuple[str, os.stat_result]]] | None = None
        self.dev_unreadable: list[str] = []
        # what stores the cache's bytes (layer files, images, device nodes): a handle on one
        # writes what JAX loads as surely as one on an entry (trust/kernel/open_handles.py looks for
        # them)
        self.held: set[tuple[int, int]] = set()
        self.held_paths: set[str] = set()


class DeviceJudge:
    """device(), loop() and backing_file() of storage._Judge, which provides what is declared
    here without a body (the results it records, and the walk of the mounts)."""

    mounts: tuple[Mount, ...]
    accounts: pr.Accounts
    s: JudgeState

    if TYPE_CHECKING:
        def unknown(self, message: str, where: str, point: str | None,
                    hidden: bool = False) -> None: ...

        def add(self, code: str, items: Iterable[tuple[pr.Grant, accessmod.Action, str, str]],
                what: str, remedy: str, where: str) -> None: ...

        def mount(self, m: Mount, rels: set[str], depth: int,
                  cache_rel: str | None = None) -> None: ...

        def walk_mounts(self, w: Walk, depth: int, extra_rel: tuple[str, ...] = (),
                        skip: int | None = None, holds_cache: bool = False) -> None: ...

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
        sysdir = f"{sysfs.SYS_BLOCK}/{label}"
        real = os.path.realpath(sysdir)
        if not os.path.isdir(sysdir):
            self.unknown(f"{safe(m.point)} is stored on block device {label}, which the kernel "
                         "does not list in /sys/dev/block here: it cannot be judged", m.point,
                         m.point, hidden=True)
            return
        name = os.path.basename(real)
        if not self.nodes(rdev, name, m):
            self.unknown(f"no device node for {name} ({label}), which stores {safe(m.point)}, "
                         "was found under /dev (a container's /dev leaves the host's disks "
                         "out): who can write it elsewhere cannot be judged", m.point, m.point,
                         hidden=True)
        for holder, hname in sysfs.holders(real):
            self.alias(holder, hname, m, f"{hname} is built on {name} (it writes its blocks)")
        if os.path.exists(f"{real}/partition"):
            parent = sysfs.read_dev(os.path.join(os.path.dirname(real), "dev"))
            if parent is None:
                self.unknown(f"the disk holding partition {name} cannot be identified",
                             m.point, m.point)
                return
            self.device(parent, depth + 1, m, whole=False)
            return
        if whole:
            for part, pname in sysfs.partitions(real):
                self.alias(part, pname, m, f"{pname} is a partition of {name}")
        if sysfs.LOOP.fullmatch(name):
            self.loop(real, name, rdev, depth, m)
        elif sysfs.STACKED.fullmatch(name):
            for slave, _ in sysfs.slaves(real):
                self.device(slave, depth + 1, m, whole=True)
        elif sysfs.LOCAL_DISK.fullmatch(name) and not any(p in real for p in sysfs.REMOTE_PATH):
            return
        elif sysfs.REMOTE.fullmatch(name) or any(p in real for p in sysfs.REMOTE_PATH):
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
            self.add("storage.device", [(g, accessmod.Action.WRITE_DEVICE, path, consequence)
                                        for g in grants],
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
            sysfs.scan_dev("/dev", self.s.dev_nodes, self.s.dev_unreadable, [0])
        return self.s.dev_nodes

    def loop(self, real: str, name: str, rdev: int, depth: int, m: Mount) -> None:
        backing = sysfs.read(f"{real}/loop/backing_file")
        if backing is None:
            self.unknown(f"loop device {name} under {safe(m.point)} has no readable backing "
                         "file", m.point, m.point)
            return
        for other, oname in sysfs.loops_on(backing, rdev):
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
                             m.point, hidden=True)
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
                why = exc.strerror if isinstance(exc, OSError) else None
                self.unknown(f"{where} cannot be judged: {why or exc}", m.point,
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
        self.s.held.add((st.st_dev, st.st_ino))
        node = Node(path, "file", st.st_uid, st.st_gid, st.st_mode, st.st_dev, st.st_ino,
                    w.anchor, acl)
        items = [(g, accessmod.Action.WRITE_STORAGE, path,
                  f"-> can rewrite the filesystem image behind {name}, and so any file on "
                  f"{m.point}")
                 for g in pr.writers(path, st.st_uid, st.st_gid, st.st_mode, acl, self.accounts,
                                     aclmod.WRITE)]
        later = f"; {name} is set up from whatever is there next time (at the next boot)"
        items += [(a.grant, a.action, a.target, a.consequence + later)
                  for a in accessmod.replace_access(w, self.accounts)]
        items += [(g, accessmod.Action.REPLACE, path, f"-> can rename or replace {path}{later}")
                  for g in accessmod.replacers(w.anchor_node, node, self.accounts)]
        self.add("storage.loop-backing", items, where,
                 "keep the image writable only by you and root, in a directory whose every "
                 "parent only you and root can write, or use a private cache (jaxcache init)",
                 path)
        fm = mountsmod.mount_of(path, st.st_dev, self.mounts)
        if fm is not None and fm.point == path:  # the image itself is mounted there (a bind)
            self.mount(fm, {""}, depth + 1)
        self.walk_mounts(w, depth + 1)
