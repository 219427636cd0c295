"""The memo of a passed audit in the user's state folder, and the audit that uses it.

`$XDG_STATE_HOME/jaxcache/audited/<device>-<inode>` (of the directory, in hex): one file per
cache directory, what trust/judgement/shortcut.py remembers of the last judgement that passed
(memo_format.py). Whoever could write it could make the next audit call a swapped entry
unchanged, so it is held as the origin ledger is: read as a trusted input (trust/inputs/
trusted_file.py: a regular file of yours that no one else can write, in folders no one else can
modify or replace, up to `/`), written only into a folder of yours that only you can write,
by a new file renamed over the old (never rewritten in place), and bound to this boot. Anything
odd about it is no memo: the audit then judges every entry.

remembering() is the audit `jaxcache run` makes: the shortcut where it holds, the full audit
for the final word wherever the shorter judgement does not pass, and the memo kept, replaced or
removed by what that judgement says.
"""

from __future__ import annotations

import os
import stat

from jaxcache.trust.findings import Judged, Why
from jaxcache.trust.inputs import trusted_file as inputs
from jaxcache.trust.judgement import memo_format
from jaxcache.trust.judgement.shortcut import Loaded, Memo, Seen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from jaxcache.fingerprint.model import Fingerprint
    from jaxcache.trust.judgement.audit import AuditReport
    from jaxcache.trust.kernel.principals import Accounts
    from jaxcache.trust.provenance.ledger_file import Ledger
    from jaxcache.trust.rules.policy_rules import Policy

FOLDER = "audited"
MAX_MEMOS = 64  # memos kept; the least recently written beyond go (a cache gone, a temp path)
AUDIT_MEMO = inputs.Kind("audit memo", 64 << 20,
                         "decides which cache entries count as unchanged since they were judged")


def folder() -> str:
    from jaxcache.userdirs import user_dir

    return os.path.join(user_dir("state"), FOLDER)


def memo_path(dev: int, ino: int) -> str:
    """Where the memo of the directory with this device and inode lives (its path is in the
    memo, and compared)."""
    return os.path.join(folder(), f"{dev:x}-{ino:x}")


def load(now: Seen) -> Loaded | None:
    """The memo of the directory as the audit found it (`now`), its header and notable rows
    read (the rest when asked); None where there is none or it is not a trusted input or not a
    memo this version wrote for that directory."""
    from jaxcache.errors import JaxcacheError

    resolved = now.path
    try:
        found = inputs.streamed(memo_path(now.directory[0], now.directory[1]), AUDIT_MEMO,
                                missing_ok=True)
    except (JaxcacheError, OSError):  # not a trusted input, or its folders cannot be walked
        return None
    if found is None:
        return None
    fd, st = found
    try:
        first = os.pread(fd, memo_format.MAX_HEADER, 0)
        end = first.find(b"\n")
        if end < 0:
            return None
        h = memo_format.header(first[:end])
        start = end + 1
        if st.st_size != start + h.notable_bytes + h.rest_bytes or h.path != resolved:
            return None
        notable = memo_format.rows(_pread(fd, h.notable_bytes, start), h.notable)
    except (memo_format.MemoError, OSError):
        os.close(fd)
        return None
    rest = _Rest(fd, start + h.notable_bytes, h.rest_bytes, h.rows - h.notable)
    return Loaded(h, notable, rest.rows, rest.lines, _ledger_now)


def _ledger_now(path: str) -> os.stat_result | None:
    """The origin ledger at `path` opened as a trusted input (as ledger.load() opens it), not
    read: its stat, None where there is none; raises where it is not a trusted input."""
    found = inputs.streamed(path, inputs.ORIGIN_LEDGER, missing_ok=True)
    if found is None:
        return None
    fd, st = found
    os.close(fd)
    return st


def _pread(fd: int, size: int, offset: int) -> bytes:
    data = os.pread(fd, size, offset)
    if len(data) != size:
        raise memo_format.MemoError("short read")
    return data


class _Rest:
    """The rows after the notable ones, read from the very file judged (its descriptor, held
    until then: the file is never rewritten in place), once: as rows, or as lines by name."""

    def __init__(self, fd: int, offset: int, size: int, count: int) -> None:
        self.fd: int | None = fd
        self.offset, self.size, self.count = offset, size, count
        self.data: bytes | None = None

    def read(self) -> bytes:
        if self.data is None:
            if self.fd is None:
                raise memo_format.MemoError("the memo could not be read")
            fd, self.fd = self.fd, None
            try:
                self.data = _pread(fd, self.size, self.offset)
            finally:
                os.close(fd)
        return self.data

    def rows(self) -> tuple[memo_format.Row, ...]:
        return memo_format.rows(self.read(), self.count)

    def lines(self) -> dict[str, bytes]:
        return memo_format.lines(self.read(), self.count)


def save(memo: Memo) -> bool:
    """Keep `memo` for its directory: a new file renamed over the old one, in the state
    folder's `audited` folder, each missing folder made 0700 inside the one above it. Only in
    folders of yours (or root's, sticky ones above) that no one else can write (the load
    judges every folder up to `/` again); False where it could not be kept (the next audit
    then judges every entry)."""
    try:
        data = memo_format.encode(memo.header, memo.notable, memo.rest, memo.carried)
    except memo_format.MemoError:
        return False
    dfd = _private(folder())
    if dfd is None:
        return False
    try:
        name = os.path.basename(memo_path(*memo.header.directory[:2]))
        return _replace(dfd, name, data) and _prune(dfd)
    finally:
        os.close(dfd)


def _private(path: str) -> int | None:
    """An O_PATH descriptor of the folder `path`, made 0700 where missing (each inside the
    descriptor of the one above, reached by the fd walk), the last one yours alone and none
    above it writable by others but through a sticky bit; None where it cannot be."""
    from jaxcache.errors import JaxcacheError
    from jaxcache.trust.kernel.walk import walk_open

    missing = []
    top = path
    while not os.path.lexists(top) and os.path.dirname(top) != top:
        missing.append(os.path.basename(top))
        top = os.path.dirname(top)
    try:
        w, dfd = walk_open(top)
    except (JaxcacheError, OSError):
        return None
    try:
        if w.missing or w.blocked or not _ours(os.fstat(dfd), 0o022, sticky=True):
            os.close(dfd)
            return None
        for name in reversed(missing):
            _made(dfd, name)
            nxt = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                          dir_fd=dfd)
            os.close(dfd)
            dfd = nxt
            if not _ours(os.fstat(dfd), 0o022, sticky=True):
                os.close(dfd)
                return None
        if not _ours(os.fstat(dfd), 0o077) or os.fstat(dfd).st_uid != os.geteuid():
            os.close(dfd)
            return None
    except OSError:
        os.close(dfd)
        return None
    return dfd


def _made(dfd: int, name: str) -> bool:
    """A private folder `name` in `dfd`, made now (False: it was there)."""
    try:
        os.mkdir(name, 0o700, dir_fd=dfd)
    except FileExistsError:
        return False
    return True


def _gone(dfd: int, name: str) -> bool:
    try:
        os.unlink(name, dir_fd=dfd)
    except OSError:
        return False
    return True


def _ours(st: os.stat_result, forbidden: int, sticky: bool = False) -> bool:
    """A directory of yours (or root's) without the `forbidden` bits (but where `sticky`
    allows them behind a sticky bit: no one can replace another's names there)."""
    return stat.S_ISDIR(st.st_mode) and st.st_uid in (0, os.geteuid()) and (
        not st.st_mode & forbidden or (sticky and bool(st.st_mode & stat.S_ISVTX)))


def _replace(dfd: int, name: str, data: bytes) -> bool:
    import time

    temp = f".{name}.{os.getpid()}.{time.time_ns()}"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600, dir_fd=dfd)
    except OSError:
        return False
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.rename(temp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        return True
    except OSError:
        _gone(dfd, temp)
        return False


def _prune(dfd: int) -> bool:
    """At most MAX_MEMOS memos: the least recently written beyond go."""
    try:
        rd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dfd)
        try:
            found = [(e.stat(follow_symlinks=False).st_mtime_ns, e.name)
                     for e in os.scandir(rd) if not e.name.startswith(".")]
        finally:
            os.close(rd)
        for _, name in sorted(found)[:-MAX_MEMOS]:
            os.unlink(name, dir_fd=dfd)
    except OSError:
        pass
    return True


def forget(resolved: str) -> None:
    """No memo for the directory at `resolved` any more (its last judgement could not be
    remembered)."""
    from jaxcache.errors import JaxcacheError
    from jaxcache.trust.kernel.walk import walk_open

    try:
        w, dfd = walk_open(folder())
    except (JaxcacheError, OSError):
        return
    try:
        st = os.stat(resolved, follow_symlinks=False)
        if not w.missing and not w.blocked and _ours(os.fstat(dfd), 0o077):
            _gone(dfd, os.path.basename(memo_path(st.st_dev, st.st_ino)))
    except OSError:
        return
    finally:
        os.close(dfd)


def remembering(given: str, *, policy: Policy, accounts: Accounts,
                require_origin: bool = False, env: dict[str, str] | None = None,
                ledger: Ledger | Callable[[], Ledger] | None = None,
                fingerprint: Callable[[], Fingerprint] | None = None,
                remember: bool = True) -> AuditReport:
    """The audit of `given` as `jaxcache run` makes it (judgement/audit.py's, its other
    users' processes not listed, the handle scan on), through the memo of the last judgement
    that passed: where the shorter judgement does not pass, the full audit judges again and
    has the final word. Then the memo is replaced by what this judgement leaves to remember,
    or removed where it leaves nothing. `remember=False`: the same audit of a plain cache,
    without the memo (read, written or removed). A sealed cache is never remembered: its audit
    is judgement/audit.py's alone."""
    from jaxcache.trust.judgement.audit import audit

    def judged(remembered: Callable[[Seen], Loaded | None] | None) -> AuditReport:
        return audit(given, policy=policy, scan_processes=False, accounts=accounts,
                     require_origin=require_origin, env=env, ledger=ledger,
                     fingerprint=fingerprint, remembered=remembered)

    if not remember:
        return judged(None)
    report = judged(load)
    if report.judged is not Judged.FULL and not report.verdict.ok:
        report = judged(lambda _: None)._replace(judged_why=Why.REFUSED)
    if report.resolved is None or report.judged_why in (Why.NOT_ASKED, Why.SMALL):
        return report
    if report.memo is not None:
        save(report.memo)
    elif report.judged is not Judged.UNCHANGED:
        forget(report.resolved)
    return report
