"""A sealed directory read as an object store, for the fetch ahead only (prefetch.py): on a
network filesystem (NFS, Lustre, a FUSE mount) each open and read of JAX's one-at-a-time loads
waits a round trip, as a bucket's requests do, so the entries the job hit last time are read
and verified in parallel while it imports JAX.

Reads go through the directory's descriptor exactly as the sealed reader's own (tier_files
`read_whole`: no link followed, regular files only, at most `limit` bytes); nothing is written.
Whatever the fetch finds wrong (a link, a non-file, a bad signature) the reader's own load of
that entry finds again, and reports with the file's owner.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator

from jaxcache.seal.objects.object_store import ERROR, ObjectInfo, StoreError
from jaxcache.seal.publishing import tier_names as names
from jaxcache.seal.publishing.tier_files import open_dir, read_whole


class DirectoryObjects:
    """The files of one directory as read-only objects (names relative to it)."""

    def __init__(self, path: str) -> None:
        self.url = path  # the key under which an early fetch is kept for its enable
        self._fd = open_dir(path)  # held for the process's life, as the reader's own
        # its filesystem's, as the reader's and the publisher's: a long module name's
        # signature is `<key>.sig` there, never `<entry>.sig`
        self.name_max = names.name_max(self._fd)

    def prepare(self) -> None:
        pass  # nothing to import or make

    def get(self, name: str, limit: int | None = None) -> bytes | None:
        return read_whole(self._fd, name, limit)

    def stat(self, name: str) -> ObjectInfo | None:
        try:
            st = os.stat(name, dir_fd=self._fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        return ObjectInfo(name, st.st_size, f"{st.st_ino}:{st.st_mtime_ns}", st.st_mtime)

    def put_if_absent(self, name: str, data: bytes) -> bool:
        raise StoreError(ERROR, "the fetch ahead writes nothing")

    def replace_if(self, name: str, data: bytes, generation: str) -> bool:
        raise StoreError(ERROR, "the fetch ahead writes nothing")

    def delete_if(self, name: str, generation: str) -> bool:
        raise StoreError(ERROR, "the fetch ahead deletes nothing")

    def list(self) -> Iterator[ObjectInfo]:
        raise StoreError(ERROR, "the fetch ahead lists nothing")
