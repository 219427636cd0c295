"""The file names of a sealed tier: JAX's entry name, and sidecars that always fit beside it.

JAX stores `<module>-<64 hex>-cache` whenever the filesystem accepts that name (NAME_MAX,
255 bytes almost everywhere: module names up to 184 characters). A sidecar is the entry's
name plus a suffix (`<entry>.sig`) when that fits, else the key plus the suffix
(`<module>-<64 hex>.sig`), which is never longer than the entry's own name: so jaxcache
stores exactly the names JAX stores, and never an entry without room for its signature.
Temporary files have short names of their own for the same reason.

A co-signature (a second key's signature of the same entry, `seal --add-signature`) is
`<entry>.<key id>.sig`, else `<key>.<key id>.sig`: 21 bytes more than the key, so an entry
whose module name is longer than 169 characters has room for its first signature only.
"""

from __future__ import annotations

import os

# a publisher's temporary file is named as every file written, then linked into place, is
from jaxcache.documents.synced import TEMP_PREFIX as TEMP_PREFIX
from jaxcache.documents.synced import TEMP_SUFFIX as TEMP_SUFFIX
from jaxcache.documents.synced import temporary as temporary

# the sidecars' names are the inventory's (trust/kernel/entries.py), which ls, audit, gc and
# verify classify a directory by
from jaxcache.trust.kernel import entries as _inventory

ENTRY_SUFFIX = "-cache"  # as JAX names entries: <module>-<64 hex>-cache
ATIME = "-atime"  # JAX's LRUCache: <module>-<64 hex>-atime, its entry's last use
SIGNATURE = _inventory.SIGNATURE_SUFFIX
USED = _inventory.USED_SUFFIX  # jaxcache wrote this entry; its mtime is its last use (LRU)
DEFAULT_NAME_MAX = 255


def entry(key: str) -> str:
    return key + ENTRY_SUFFIX


def key_of(entry_name: str) -> str:
    return entry_name[:-len(ENTRY_SUFFIX)]


def sidecar(entry_name: str, suffix: str, name_max: int = DEFAULT_NAME_MAX) -> str:
    """`<entry><suffix>` when it fits in name_max bytes, else `<key><suffix>` (it fits
    whenever the entry does: suffixes are no longer than ENTRY_SUFFIX)."""
    assert len(suffix) <= len(ENTRY_SUFFIX)
    full = entry_name + suffix
    if len(os.fsencode(full)) <= name_max:
        return full
    return key_of(entry_name) + suffix


def cosignature(entry_name: str, key_id: str, name_max: int = DEFAULT_NAME_MAX) -> str | None:
    """Where key `key_id`'s co-signature of the entry goes, or None where no name fits."""
    for stem in (entry_name, key_of(entry_name)):
        name = f"{stem}.{key_id}{SIGNATURE}"
        if len(os.fsencode(name)) <= name_max:
            return name
    return None


def entry_of_cosignature(name: str) -> tuple[str, str] | None:
    """(entry, key id) of a co-signature name (either form), or None."""
    if not name.endswith(SIGNATURE) or len(name) < 22 or name[-21] != ".":
        return None
    key_id = name[-20:-4]
    if not _HEX.issuperset(key_id):
        return None
    stem = name[:-21]
    return (stem if stem.endswith(ENTRY_SUFFIX) else entry(stem)), key_id


_HEX = frozenset("0123456789abcdef")


def entry_of_sidecar(name: str, suffix: str) -> str | None:
    """The entry a sidecar name belongs to (either form), or None."""
    if not name.endswith(suffix):
        return None
    stem = name[:-len(suffix)]
    return stem if stem.endswith(ENTRY_SUFFIX) else entry(stem)


def name_max(dir_fd: int) -> int:
    """NAME_MAX of the filesystem holding `dir_fd`."""
    try:
        return int(os.fpathconf(dir_fd, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return DEFAULT_NAME_MAX


def is_temporary(name: str) -> bool:
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)
