"""A FUSE mount for real: bindfs over a directory, taken down whatever the test did. Skipped,
saying why, only where bindfs is missing (`make test` installs it as root) or the kernel refuses
FUSE (/dev/fuse missing, mount denied)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def mounted(path: Path) -> str | None:
    """The filesystem type /proc/mounts gives for `path`, if something is mounted there."""
    with open("/proc/mounts", encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 2 and fields[1] == str(path):
                return fields[2]
    return None


def unmount(path: Path) -> None:
    for argv in (["fusermount", "-u", str(path)], ["umount", str(path)],
                 ["umount", "-l", str(path)]):
        if mounted(path) is None:
            return
        if shutil.which(argv[0]):
            subprocess.run(argv, capture_output=True, timeout=30)
    assert mounted(path) is None, f"could not unmount {path}"


@contextmanager
def bindfs(backing: Path, mnt: Path, log: Path, subtype: str) -> Iterator[Path]:
    """`backing` served at `mnt` by bindfs, /proc/mounts saying `fuse.<subtype>`."""
    if shutil.which("bindfs") is None:
        pytest.skip("bindfs is not installed (scripts/system-deps.sh installs it as root)")
    if not os.path.exists("/dev/fuse"):
        pytest.skip("/dev/fuse is missing: this kernel or container offers no FUSE")
    with open(log, "wb") as err:  # bindfs daemonizes: no pipe it could hold open
        proc = subprocess.run(["bindfs", "-o", f"subtype={subtype}", str(backing), str(mnt)],
                              stdin=subprocess.DEVNULL, stdout=err, stderr=err, timeout=60)
    if proc.returncode != 0 or mounted(mnt) is None:
        unmount(mnt)
        pytest.skip(f"the FUSE mount was refused: {log.read_text(errors='replace').strip()}")
    try:
        yield mnt
    finally:
        unmount(mnt)
