"""The project file's bytes, read as a writer may have planted them.

The walk (effective.py) stops at the first folder holding `.jaxcache.toml` or
`pyproject.toml`: `.jaxcache.toml` is read there if present (a pyproject.toml beside it is not),
else the pyproject.toml's `[tool.jaxcache]` table. A pyproject.toml without that table still
ends the walk: it marks a project of its own, and a file further up (another project's, or one
in a shared folder such as /tmp) is not this project's.

The file is opened with O_NOFOLLOW (a symlink is refused, never followed), checked on its
descriptor (a regular file) and read up to MAX_BYTES; a file that holds settings must be owned
by you or root and not writable by everyone (its settings would otherwise be someone else's to
choose). A pyproject.toml that
does not mention `tool.jaxcache` is not parsed at all (no tomllib on a job's start-up).
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass

from jaxcache.errors import JaxcacheError
from jaxcache.text import safe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

TABLE = "tool.jaxcache"
MAX_BYTES = 1 << 20  # a pyproject.toml is a few KiB; more is not a project file jaxcache reads


@dataclass(frozen=True, slots=True)
class Found:
    """The file that ended the walk: its path, the table our settings are in (None for
    .jaxcache.toml, the whole file), and its bytes (None: a pyproject.toml without
    [tool.jaxcache], which holds no settings of ours)."""

    path: str
    table: str | None
    data: bytes | None

    @property
    def label(self) -> str:
        """How messages name it: the path, and the table for a pyproject.toml (escaped)."""
        return safe(self.path) + (f" [{self.table}]" if self.table else "")


def refuse(path: str, exc: OSError) -> NoReturn:
    """The file is there but cannot be opened: a symlink (O_NOFOLLOW), or no permission."""
    if exc.errno == errno.ELOOP:
        raise JaxcacheError(f"project file {safe(path)} is a symbolic link: jaxcache reads "
                            "the file itself, never through a link (copy it there)")
    raise JaxcacheError(f"project file {safe(path)} cannot be read: "
                        f"{safe(exc.strerror or str(exc))}")


def read(fd: int, path: str, in_pyproject: bool) -> Found:
    """The file open on `fd` (closed here), checked and read."""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise JaxcacheError(f"project file {safe(path)} is not a regular file")
        chunks, left = [], MAX_BYTES + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        refuse(path, exc)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > MAX_BYTES:
        raise JaxcacheError(f"project file {safe(path)} is larger than {MAX_BYTES >> 20} MiB: "
                            "not a project file jaxcache reads")
    if in_pyproject and not _mentions_table(data):
        return Found(path, None, None)  # no settings of ours: whoever owns it, nothing is used
    _check(path, st)
    return Found(path, TABLE if in_pyproject else None, data)


def _mentions_table(data: bytes) -> bool:
    """Whether a pyproject.toml may hold [tool.jaxcache] (or tool.jaxcache.x = ..., or a [tool]
    table naming jaxcache): spaces and quotes aside, the words are there."""
    squeezed = data.translate(None, b" \t\"'")
    return b"tool.jaxcache" in squeezed or (b"[tool]" in squeezed and b"jaxcache" in squeezed)


def _check(path: str, st: os.stat_result) -> None:
    """Settings only from a file you or root own that not everyone can change."""
    if st.st_uid not in (os.geteuid(), 0):
        raise JaxcacheError(f"project file {safe(path)} is owned by {_owner(st.st_uid)}, not by "
                            "you or root: its settings would be theirs to choose")
    if st.st_mode & stat.S_IWOTH:
        raise JaxcacheError(f"project file {safe(path)} has mode "
                            f"{stat.S_IMODE(st.st_mode):04o}: anyone can change it, and so "
                            "choose its settings (chmod o-w it)")


def _owner(uid: int) -> str:
    import pwd

    try:
        return safe(pwd.getpwuid(uid).pw_name)
    except KeyError:
        return f"uid {uid}"
