"""`verify --quarantine QDIR`: the entries a sealed reader rejects, moved aside into a private
directory jaxcache makes, never deleted, so the next publish can write their keys again.

A rejected entry stays where it is otherwise (a sealed reader only misses it; jaxcache deletes
nothing it did not create), and its cache key stays taken: a publisher's first-writer-wins link
never replaces it. Moving is a rename by directory descriptors (the names are never followed),
so QDIR must be on the cache's filesystem; each entry moves with its sidecars (signature,
co-signatures, last-use mark). An entry that cannot be moved (another user's, under a sticky
directory) is named with why, and the rest go on.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

from jaxcache.errors import JaxcacheError
from jaxcache.seal import names
from jaxcache.seal.scan import ScanResult
from jaxcache.text import safe

KEEP = ("valid", "never-hit")  # what a sealed reader loads, or would never look up


@dataclass(frozen=True)
class Quarantined:
    directory: str  # QDIR
    moved: tuple[tuple[str, str], ...]  # (entry name, why it was rejected)
    failed: tuple[tuple[str, str], ...]  # (entry name, why it could not be moved)


def quarantine(cache: str, qdir: str, result: ScanResult) -> Quarantined:
    """Move every entry of `result` (scan.ScanResult of `cache`) that is not valid into
    `qdir`, made private by init's rules (refused unless it is, or can be made, PRIVATE)."""
    from jaxcache.seal.publish import _exists as _taken  # a rename would replace it: never
    from jaxcache.seal.store import _open_dir
    from jaxcache.trust import create

    made = create.init(qdir)
    if not made.ok:
        raise JaxcacheError(f"--quarantine {safe(qdir)}: {made.refused}")
    src, dst = _open_dir(cache), _open_dir(made.path)
    moved, failed = [], []
    try:
        if os.fstat(src).st_dev != os.fstat(dst).st_dev:
            raise JaxcacheError(f"--quarantine {safe(qdir)} is on another filesystem than "
                                f"{safe(cache)}: entries are moved by rename, never copied")
        listing = os.listdir(src)
        for e in result.entries:
            if e.status in KEEP:
                continue
            stems = (e.name + ".", names.key_of(e.name) + ".")
            if _taken(dst, e.name):
                failed.append((e.name, f"{safe(made.path)} already holds one by that name"))
                continue
            try:
                os.rename(e.name, e.name, src_dir_fd=src, dst_dir_fd=dst)
            except OSError as exc:
                failed.append((e.name, exc.strerror or str(exc)))
                continue
            for other in listing:  # its signature, co-signatures and last-use mark
                if other.startswith(stems) and other != e.name and not _taken(dst, other):
                    # gone since, or not ours to move: the entry is out of the way
                    with contextlib.suppress(OSError):
                        os.rename(other, other, src_dir_fd=src, dst_dir_fd=dst)
            moved.append((e.name, f"{e.status}: {e.reason}"))
    finally:
        os.close(src)
        os.close(dst)
    return Quarantined(made.path, tuple(moved), tuple(failed))
