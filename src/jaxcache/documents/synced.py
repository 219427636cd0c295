"""Bytes written whole to a new file and made durable before it gets its final name.

A file that is renamed or linked into place (a sealed entry, a compacted ledger) must hold all
its bytes on disk first: os.write may write less than asked, and without fsync a crash after
the rename can leave the name on an empty or partial file. Such a file is made under a
temporary name of one form, which gc and verify know (seal/publishing/tier_names.py re-exports
it).
"""

from __future__ import annotations

import os

TEMP_PREFIX, TEMP_SUFFIX = ".jaxcache-", ".tmp"


def temporary() -> str:
    """A new temporary name: this process's id and 64 random bits (os.urandom, as secrets
    uses it: importing secrets would bring hashlib and random onto `jaxcache run`'s path,
    about 5 ms)."""
    return f"{TEMP_PREFIX}{os.getpid()}-{os.urandom(8).hex()}{TEMP_SUFFIX}"


def write_synced(fd: int, data: bytes) -> None:
    """All of `data` to `fd` (os.write until none is left), then fsync."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.fsync(fd)
