"""Which owners this process's user namespace hides.

In a user namespace (rootless podman, `unshare -U`, Kubernetes user namespaces) the kernel shows
every uid and gid its map leaves out as the overflow id (65534 by default): host root, another
host user and the namespace's own `nobody` all look alike. An owner shown so cannot be named
from here, so the audit judges it as someone unknown, outside the namespace (fail closed),
never as the local account that happens to carry that number.
"""

from __future__ import annotations

import os

_FULL = (0, 0, 4294967295)  # the initial namespace's map: every id is itself


def _read(path: str, limit: int = 4096) -> str | None:
    """The file's first `limit` bytes as ASCII text (os.read and bytes.decode: open() with an
    encoding imports its codec, on the path of every `jaxcache run`)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = os.read(fd, limit)
        finally:
            os.close(fd)
        return data.decode("ascii")
    except (OSError, ValueError):
        return None


def _maps_everything(text: str | None) -> bool:
    if text is None:
        return True  # no /proc here: nothing is known of a namespace (the mount table fails)
    try:
        rows = [tuple(int(x) for x in line.split()) for line in text.splitlines()
                if line.strip()]
    except ValueError:
        return False  # unreadable: judged as a namespace that hides some
    return rows == [_FULL]


def shows_every_owner() -> bool:
    """Whether every file's owner shows as itself here, known for certain: the uid map is read
    and maps every id (hidden_ids() takes an unreadable map as no namespace; a reader that
    trusts a file by its owner fails closed instead)."""
    text = _read("/proc/self/uid_map")
    return text is not None and _maps_everything(text)


def hidden_ids() -> tuple[int | None, int | None]:
    """(uid, gid) the kernel shows for owners this user namespace does not map, or None for
    each where it maps every id (no user namespace, or one that maps them all)."""
    out: list[int | None] = []
    for kind in ("uid", "gid"):
        if _maps_everything(_read(f"/proc/self/{kind}_map")):
            out.append(None)
            continue
        value = _read(f"/proc/sys/kernel/overflow{kind}", 32)
        try:
            out.append(int(value) if value is not None else 65534)
        except ValueError:
            out.append(65534)
    return out[0], out[1]
