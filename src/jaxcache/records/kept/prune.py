"""Delete old run records, and only run records: what record_dir.py accepts by name and content.

Selection: with --older-than D, records made more than D days ago; with --keep N, all but the
newest N; with both, only records that both select (old AND beyond the newest N), so --keep is
a floor that --older-than never goes below. Deletion is unlinkat relative to the directory fd
the records were read through, after checking that the name still is the very file that was
read (same device and inode, not a symlink): a file swapped in meanwhile is left alone.

The folder is judged as a cache directory is before anything is deleted (the audit: every
ancestor, ACLs, mounts): only one nobody but you and root could replace is pruned. A folder
under a parent others can write could be swapped for another folder of yours between runs,
and its files deleted; such a folder is refused with one line.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass

from jaxcache.errors import JaxcacheError
from jaxcache.records import record_dir as store
from jaxcache.records.kept.summary import RunSummary, summarize
from jaxcache.text import safe
from jaxcache.trust.kernel.principals import Trust

DAY_NS = 86_400 * 1_000_000_000


@dataclass(frozen=True, slots=True)
class PruneResult:
    directory: str
    dry_run: bool
    older_than_days: float | None
    keep: int | None
    deleted: tuple[RunSummary, ...]  # or, with dry_run, would be
    kept: int
    freed_bytes: int
    changed: tuple[str, ...]  # selected, but replaced before deletion: left alone
    skipped: tuple[store.Skipped, ...]  # named like records, not records: never touched


def select(records: tuple[store.Found, ...], *, older_than_days: float | None,
           keep: int | None, now_ns: int) -> list[store.Found]:
    """The records (newest first) the rules pick for deletion."""
    if older_than_days is None and keep is None:
        raise ValueError("give older_than_days or keep")
    out = []
    for rank, found in enumerate(records):
        old = older_than_days is None or now_ns - found.when_ns > older_than_days * DAY_NS
        beyond = keep is None or rank >= keep
        if old and beyond:
            out.append(found)
    return out


def _still_same(dir_fd: int, found: store.Found) -> bool:
    try:
        st = os.stat(found.name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) == (found.dev, found.ino)


def _refuse_unless_private(directory: str, fd: int) -> None:
    """Raise unless only you and root can replace the folder, any folder above it, or write in
    it (the audit's judgement of a cache directory's path; what is inside is record_dir.py's, which
    never reads a link or another user's file), and it is the one `fd` holds."""
    from jaxcache import api

    report = api.audit(os.path.abspath(directory), scan_processes=False, scan_handles=False)
    others = [w for w in report.writers if w.trust not in (Trust.ROOT, Trust.YOU)]
    if others:
        w, more = others[0], len({str(o.principal) for o in others}) - 1
        raise JaxcacheError(f"refusing to prune {safe(directory)}: {w.principal} "
                            f"{' '.join(w.chain)}" + (f" (and {more} more)" if more else ""))
    unknown = [f for f in report.findings if f.effect.fails
               and not f.code.startswith(("entry.", "entries."))]
    if unknown:
        raise JaxcacheError(f"refusing to prune {safe(directory)}: {unknown[0].message}")
    st, now = os.fstat(fd), os.stat(report.resolved or directory, follow_symlinks=False)
    if (st.st_dev, st.st_ino) != (now.st_dev, now.st_ino):
        raise JaxcacheError(f"refusing to prune {safe(directory)}: it changed while it was "
                            "being audited")


def prune(directory: str, *, older_than_days: float | None, keep: int | None,
          dry_run: bool, now_ns: int | None = None) -> PruneResult:
    now_ns = time.time_ns() if now_ns is None else now_ns
    fd = store.open_dir(directory)
    if fd is None:
        return PruneResult(directory, dry_run, older_than_days, keep, (), 0, 0, (), ())
    try:
        _refuse_unless_private(directory, fd)
        scan = store.scan_fd(fd, directory)
        chosen = select(scan.records, older_than_days=older_than_days, keep=keep,
                        now_ns=now_ns)
        deleted, changed = [], []
        for found in chosen:
            if not _still_same(fd, found):
                changed.append(found.name)
                continue
            if not dry_run:
                try:
                    os.unlink(found.name, dir_fd=fd)  # unlinkat: never through a path
                except FileNotFoundError:
                    changed.append(found.name)
                    continue
            deleted.append(summarize(found))
    finally:
        os.close(fd)
    return PruneResult(directory, dry_run, older_than_days, keep, tuple(deleted),
                       len(scan.records) - len(deleted), sum(d.size for d in deleted),
                       tuple(changed), scan.skipped)
