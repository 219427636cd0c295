"""Bytes written whole to a new file and made durable before it gets its final name.

A file that is renamed or linked into place (a sealed entry, a compacted ledger) must hold all
its bytes on disk first: os.write may write less than asked, and without fsync a crash after
the rename can leave the name on an empty or partial file.
"""

from __future__ import annotations

import os


def write_synced(fd: int, data: bytes) -> None:
    """All of `data` to `fd` (os.write until none is left), then fsync."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.fsync(fd)
