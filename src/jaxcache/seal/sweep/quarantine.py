"""`verify --quarantine QDIR`: the entries a sealed reader rejects, moved aside into a private
directory jaxcache makes, never deleted, so the next publish can write their keys again.

A rejected entry stays where it is otherwise (a sealed reader only misses it; jaxcache deletes
nothing it did not create), and its cache key stays taken: a publisher's first-writer-wins link
never replaces it. Moving is a rename by directory descriptors (the names are never followed),
so QDIR must be on the cache's filesystem; each entry moves with its sidecars (signature,
co-signatures, last-use mark). An entry that cannot be moved (another user's, under a sticky
directory) is named with why, and the rest go on.

Each run moves into a fresh folder of its own inside QDIR (`<UTC time>-<pid>-<random>`, made
0700 by mkdirat, opened without following links and checked to be ours), so what earlier runs
moved there, other users' files among them, is never judged again nor in the way: QDIR itself
must still be private (init's rules), which is what keeps others from replacing that folder.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import time

from jaxcache.errors import JaxcacheError
from jaxcache.seal.publishing import tier_names as names
from jaxcache.seal.sweep.dir_sweep import Quarantined, ScanResult
from jaxcache.text import safe

KEEP = ("valid", "never-hit")  # what a sealed reader loads, or would never look up


def quarantine(cache: str, qdir: str, result: ScanResult) -> Quarantined:
    """Move every entry of `result` (scan.ScanResult of `cache`) that is not valid into
    `qdir`, made private by init's rules (refused unless it is, or can be made, PRIVATE)."""
    from jaxcache.seal.publishing.publish import (
        exists as _taken,  # a rename would replace it: never
    )
    from jaxcache.seal.publishing.tier_files import open_dir
    from jaxcache.trust import create

    made = create.init(qdir)
    if not made.ok:
        raise JaxcacheError(f"--quarantine {safe(qdir)}: {made.refused}")
    src, top = open_dir(cache), open_dir(made.path)
    dst = -1
    moved: list[tuple[str, str]] = []
    failed: list[tuple[str, str]] = []
    try:
        if os.fstat(src).st_dev != os.fstat(top).st_dev:
            raise JaxcacheError(f"--quarantine {safe(qdir)} is on another filesystem than "
                                f"{safe(cache)}: entries are moved by rename, never copied")
        if all(e.status in KEEP for e in result.entries):
            return Quarantined(made.path, (), ())  # nothing to move: nothing made
        run, dst = _fresh_folder(top, made.path)
        where = os.path.join(made.path, run)
        listing = os.listdir(src)
        for e in result.entries:
            if e.status in KEEP:
                continue
            stems = (e.name + ".", names.key_of(e.name) + ".")
            if _taken(dst, e.name):
                failed.append((e.name, f"{safe(where)} already holds one by that name"))
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
        if not moved:
            with contextlib.suppress(OSError):  # ours, made just now, still empty
                os.rmdir(run, dir_fd=top)
    finally:
        for fd in (src, top, dst):
            if fd != -1:
                os.close(fd)
    return Quarantined(where, tuple(moved), tuple(failed))


def _fresh_folder(top: int, path: str) -> tuple[str, int]:
    """A new folder of this run's in QDIR (by its descriptor `top`), made 0700 now: its name
    and a descriptor of it, checked to be the directory just made and ours alone."""
    for _ in range(5):
        now = time.time()
        name = (time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now)) +
                f"-{os.getpid()}-{secrets.token_hex(4)}")
        try:
            os.mkdir(name, 0o700, dir_fd=top)
        except FileExistsError:
            continue
        try:
            fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                         dir_fd=top)
        except OSError:
            fd = -1
        st = os.fstat(fd) if fd != -1 else None
        if st is None or st.st_uid != os.geteuid():
            if fd != -1:
                os.close(fd)
            raise JaxcacheError(f"--quarantine: {safe(os.path.join(path, name))} was replaced "
                                "while it was being made")
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.fchmod(fd, 0o700)  # the umask took bits away; this one is ours
        return name, fd
    raise JaxcacheError(f"--quarantine: no fresh folder could be made in {safe(path)}")
