"""The kernel's view of block devices, read without following links: /sys/dev/block (what a
device is built on and what is built on it), /sys/block (loop devices and their images),
/sys/fs/btrfs (a filesystem's member devices) and the device nodes under /dev.

Stdlib only; storage.py and storage_devices.py judge what these name.
"""

from __future__ import annotations

import os
import re
import stat

SYS_BLOCK = "/sys/dev/block"
MAX_DEPTH = 8  # mounts and block devices stacked on each other; deeper is UNVERIFIABLE
_MAX_DEV_ENTRIES = 20000
LOCAL_DISK = re.compile(r"(vd|sd|hd|xvd)[a-z]+|nvme\d+n\d+|mmcblk\d+|zram\d+|ram\d+|pmem\d+")
STACKED = re.compile(r"dm-\d+|md\d+")
LOOP = re.compile(r"loop\d+")
REMOTE = re.compile(r"nbd\d+|rbd\d+|drbd\d+|rnbd\w+|ublkb\d+")
REMOTE_PATH = ("/session", "nvme-fabrics", "/iscsi")  # an sd/nvme disk that is iSCSI/NVMe-oF


def read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            return f.read().rstrip("\n")
    except OSError:
        return None


def read_dev(path: str) -> int | None:
    text = read(path)
    try:
        major, minor = (int(x) for x in (text or "").split(":"))
    except ValueError:
        return None
    return os.makedev(major, minor)


def listed(real: str, sub: str) -> list[tuple[int, str]]:
    try:
        names = sorted(os.listdir(f"{real}/{sub}"))
    except OSError:
        return []
    out = []
    for n in names:
        rdev = read_dev(f"{real}/{sub}/{n}/dev")
        if rdev is not None:
            out.append((rdev, n))
    return out


def slaves(real: str) -> list[tuple[int, str]]:
    return listed(real, "slaves")


def holders(real: str, depth: int = 0) -> list[tuple[int, str]]:
    """Devices built on this one (device-mapper, md): writing them writes its blocks."""
    out = []
    for rdev, name in listed(real, "holders"):
        out.append((rdev, name))
        if depth < MAX_DEPTH:
            out += holders(os.path.realpath(f"/sys/class/block/{name}"), depth + 1)
    return out


def partitions(real: str) -> list[tuple[int, str]]:
    try:
        names = sorted(os.listdir(real))
    except OSError:
        return []
    out = []
    disk = os.path.basename(real)
    for n in names:  # partitions are named after their disk: vda1, nvme0n1p1, loop0p1
        if n.startswith(disk) and os.path.exists(f"{real}/{n}/partition"):
            rdev = read_dev(f"{real}/{n}/dev")
            if rdev is not None:
                out.append((rdev, n))
    return out


def loops_on(backing: str, rdev: int) -> list[tuple[int, str]]:
    """Other loop devices on the same image: writing them writes it."""
    out: list[tuple[int, str]] = []
    try:
        names = sorted(n for n in os.listdir("/sys/block") if LOOP.fullmatch(n))
    except OSError:
        return out
    for n in names:
        if read(f"/sys/block/{n}/loop/backing_file") == backing:
            other = read_dev(f"/sys/block/{n}/dev")
            if other is not None and other != rdev:
                out.append((other, n))
    return out


def btrfs_members(rdev: int) -> list[int]:
    """Every device of the btrfs filesystem that has `rdev` among its devices."""
    try:
        fsids = os.listdir("/sys/fs/btrfs")
    except OSError:
        return [rdev]
    for fsid in fsids:
        members = listed(f"/sys/fs/btrfs/{fsid}", "devices")
        if any(d == rdev for d, _ in members):
            return [d for d, _ in members]
    return [rdev]


def block_rdev(source: str) -> int | None:
    if not source.startswith("/dev/"):
        return None
    try:
        st = os.stat(source)
    except OSError:
        return None
    return st.st_rdev if stat.S_ISBLK(st.st_mode) else None


def scan_dev(path: str, index: dict[int, list[tuple[str, os.stat_result]]],
             unreadable: list[str], count: list[int], dev: int | None = None) -> None:
    """Every block device node under /dev, by rdev, without following symlinks.

    Only /dev's own filesystem (devtmpfs, or a container's tmpfs), which only root can write:
    other filesystems mounted below it (/dev/shm, /dev/pts, /dev/mqueue, hugepages) are left
    out. Users write /dev/shm; an unreadable folder or 20,000 files there must not make every
    other user's audit UNVERIFIABLE, and no user can put a block device node there (mknod needs
    CAP_MKNOD in the initial namespace, and a hard link cannot cross into another filesystem)."""
    try:
        if dev is None:
            dev = os.stat(path, follow_symlinks=False).st_dev
        it = os.scandir(path)
    except OSError:
        unreadable.append(path)
        return
    with it:
        for e in it:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISBLK(st.st_mode):  # wherever it lives: a bind-mounted node counts too
                index.setdefault(st.st_rdev, []).append((e.path, st))
            if stat.S_ISDIR(st.st_mode) and st.st_dev != dev:
                continue  # the root of another filesystem mounted here: not searched
            count[0] += 1
            if count[0] > _MAX_DEV_ENTRIES:
                unreadable.append(f"{path} (more than {_MAX_DEV_ENTRIES} entries)")
                return
            if stat.S_ISDIR(st.st_mode):
                scan_dev(e.path, index, unreadable, count, dev)
