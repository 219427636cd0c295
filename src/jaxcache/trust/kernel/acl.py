"""POSIX ACLs read from their xattrs with the standard library (no libacl needed).

Layout (linux/posix_acl_xattr.h): le32 version 2, then 8-byte entries
{le16 tag, le16 perm, le32 id}.
"""

from __future__ import annotations

import errno
import os
import struct
from typing import NamedTuple

ACCESS = "system.posix_acl_access"
DEFAULT = "system.posix_acl_default"

USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
TAG_NAMES = {USER_OBJ: "user::", USER: "user:", GROUP_OBJ: "group::", GROUP: "group:",
             MASK: "mask::", OTHER: "other::"}
READ, WRITE, EXECUTE = 4, 2, 1
_VERSION = 2
_HEADER = struct.Struct("<I")
_ENTRY = struct.Struct("<HHI")


class AclFormatError(ValueError):
    """The xattr is not an ACL this parser understands: callers fail closed."""


class AclEntry(NamedTuple):
    tag: int
    perm: int
    id: int | None  # uid or gid for USER / GROUP entries, else None


class Acl(NamedTuple):
    entries: tuple[AclEntry, ...]

    def find(self, tag: int) -> AclEntry | None:
        return next((e for e in self.entries if e.tag == tag), None)

    def named(self, tag: int) -> tuple[AclEntry, ...]:
        return tuple(e for e in self.entries if e.tag == tag)

    @property
    def mask(self) -> int | None:
        entry = self.find(MASK)
        return None if entry is None else entry.perm

    def effective(self, entry: AclEntry) -> int:
        """Permission after the mask, which bounds named entries and the owning group."""
        if entry.tag in (USER, GROUP_OBJ, GROUP) and self.mask is not None:
            return entry.perm & self.mask
        return entry.perm

    @property
    def is_extended(self) -> bool:
        return any(e.tag in (USER, GROUP, MASK) for e in self.entries)


def parse(blob: bytes) -> Acl:
    if len(blob) < _HEADER.size or (len(blob) - _HEADER.size) % _ENTRY.size:
        raise AclFormatError(f"ACL xattr has odd length {len(blob)}")
    (version,) = _HEADER.unpack_from(blob)
    if version != _VERSION:
        raise AclFormatError(f"ACL xattr version {version}, expected {_VERSION}")
    entries = []
    for offset in range(_HEADER.size, len(blob), _ENTRY.size):
        tag, perm, ident = _ENTRY.unpack_from(blob, offset)
        if tag not in TAG_NAMES:
            raise AclFormatError(f"unknown ACL tag 0x{tag:x}")
        entries.append(AclEntry(tag, perm & 7, ident if tag in (USER, GROUP) else None))
    return Acl(tuple(entries))


def read(path: str, name: str, *, follow: bool = False) -> Acl | None:
    """Read one ACL xattr; None when there is none.

    `follow` only for /proc/self/fd/N paths, whose final component is the descriptor's magic
    link: not following it would read the link's own (empty) xattrs.
    """
    try:
        blob = os.getxattr(path, name, follow_symlinks=follow)
    except OSError as exc:
        if exc.errno in (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP):
            return None
        raise
    return parse(blob)


def describe(entry: AclEntry, name: str | None = None) -> str:
    """Render like getfacl: user:alice:rwx."""
    perm = "".join(c if entry.perm & bit else "-" for c, bit in
                   (("r", READ), ("w", WRITE), ("x", EXECUTE)))
    label = TAG_NAMES[entry.tag]
    if entry.id is not None:
        label += name if name is not None else str(entry.id)
        label += ":"
    return label + perm
