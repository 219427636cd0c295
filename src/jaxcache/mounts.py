"""Which filesystem each directory lives on, matched by st_dev against /proc/self/mountinfo.

Local permission bits only bound writers on local filesystems: an NFS client picks its own uid,
CIFS invents owners from mount options, a FUSE daemon serves whatever it likes.
"""

from __future__ import annotations

import os
from typing import NamedTuple

NETWORK = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "ceph", "beegfs", "glusterfs",
    "9p", "virtiofs", "afs", "ocfs2", "gfs2", "orangefs", "pvfs2", "davfs", "ncpfs", "coda",
    "panfs", "wekafs", "vboxsf", "vmhgfs",
})

# FUSE filesystems that serve a container's root from its image's layers (podman without kernel
# overlay): mounted at / they are the container host's, as an overlay root's hidden layers are
CONTAINER_ROOTS = frozenset({"fuse.fuse-overlayfs"})


class Mount(NamedTuple):
    mount_id: int
    dev: int
    root: str  # the subtree of the filesystem mounted here ("/" unless a bind mount)
    point: str
    options: frozenset[str]
    fstype: str
    source: str
    super_options: tuple[str, ...] = ()  # the filesystem's own options (overlay layers...)

    @property
    def category(self) -> str:
        """local | tmpfs | overlay | network (writers not bounded by local bits)."""
        base = self.fstype.split(".", 1)[0]
        if self.fstype in NETWORK or base in ("fuse", "fuseblk"):
            return "network"
        if self.fstype in ("tmpfs", "ramfs"):
            return "tmpfs"
        if self.fstype == "overlay":
            return "overlay"
        return "local"

    @property
    def is_bind(self) -> bool:
        return self.root != "/"

    def option(self, name: str) -> str | None:
        """The value of the filesystem option `name=` (the last one given), or None."""
        found = None
        for opt in self.super_options:
            key, sep, value = opt.partition("=")
            if sep and key == name:
                found = value
        return found

    @property
    def read_only(self) -> bool:
        """Read-only as a mount, or as a filesystem (an overlay with no upper layer: its mount
        options say rw, its superblock ro)."""
        return "ro" in self.options or "ro" in self.super_options

    def describe(self) -> str:
        text = f"{self.fstype} mounted at {self.point}"
        if self.is_bind:
            text += f" (bind mount of {self.root} from {self.source})"
        if self.read_only:
            text += " read-only"
        return text


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal."""
    if "\\" not in field:
        return field
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 4 <= len(field) and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> tuple[Mount, ...]:
    mounts = []
    for line in text.splitlines():
        if " - " not in line:
            continue
        left, right = line.split(" - ", 1)
        fields, tail = left.split(), right.split()
        if len(fields) < 6 or len(tail) < 2:
            continue
        major, minor = (int(x) for x in fields[2].split(":"))
        mounts.append(Mount(
            mount_id=int(fields[0]), dev=os.makedev(major, minor), root=_unescape(fields[3]),
            point=_unescape(fields[4]), options=frozenset(fields[5].split(",")),
            fstype=tail[0], source=_unescape(tail[1]),
            super_options=tuple(_unescape(o) for o in tail[2].split(",")) if len(tail) > 2
            else (),
        ))
    return tuple(mounts)


def read_mounts() -> tuple[Mount, ...]:
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        return parse_mountinfo(f.read())


def _under(path: str, point: str) -> bool:
    return point == "/" or path == point or path.startswith(point.rstrip("/") + "/")


def mount_of(path: str, dev: int, mounts: tuple[Mount, ...]) -> Mount | None:
    """The mount a directory is on: same device, deepest mount point above the path.

    Later lines of mountinfo are mounted on top of earlier ones, so among equals the last wins.
    Falls back to the deepest mount point alone (btrfs subvolumes report their own st_dev).
    """
    best: Mount | None = None
    for m in mounts:
        if m.dev == dev and _under(path, m.point) and (
                best is None or len(m.point) >= len(best.point)):
            best = m
    if best is not None:
        return best
    for m in mounts:
        if _under(path, m.point) and (best is None or len(m.point) >= len(best.point)):
            best = m
    return best
