"""An audit that does not grow with the cache: when a remembered judgement of the entries still
stands, and what it stands for.

A directory that passed (PRIVATE, every entry a regular file of yours with one link, no group
or other write, no ACL, no other user's process holding any descriptor on one) is remembered in
your state folder (memo_format.py, trust/inputs/audit_memo.py). The next audit still walks every
ancestor, judges the directory, its mounts, what stores them and other users' write handles;
only the entries' part is shortened, in one of two ways (Judged):

- UNCHANGED: the directory's device, inode, mtime, ctime, link count, mode and owners are as
  remembered, so no name in it was added, removed or renamed (each moves its mtime and ctime;
  a user can set an mtime back, never a ctime), and its bits and ACL are the ones judged, in
  this boot, on the same mount, with nothing mounted inside it. The same inodes sit under the
  same names. The directory is closed to everyone but you (no search bit for group or others,
  no ACL), so since then no one else could look a name up in it, and without a name no one
  could open an entry anew: when it was remembered every process was inspected and none of
  another user held a descriptor on an entry. So none but you and root can have written,
  chmodded or linked an entry since: no entry is looked at.
- CHANGED: the directory changed (or its judgement is older than MAX_AGE, or it is open to
  others, or a process could not be inspected, or origin is required: CI, --require-origin,
  where an entry you rewrote in place, a restore's, must be found, and only its ctime says).
  The listing is read and each name lstat'ed; an entry whose inode and ctime are the ones
  judged is unchanged (a write, chmod, chown, ACL or link count change moves an inode's
  ctime), anything else is judged as the full audit judges it.

Anything else (another boot, user, mount, directory, judging context or ledger file) is the full
audit. docs/explanation/security-model.md states each argument and the tests that attack it.
"""

from __future__ import annotations

import os
import stat
from typing import NamedTuple

from jaxcache.trust.findings import Judged, Why
from jaxcache.trust.judgement.memo_format import (
    ROW_KINDS,
    Carried,
    Header,
    LedgerSeen,
    MemoError,
    Row,
    fields,
)
from jaxcache.trust.kernel import entries as entriesmod
from jaxcache.trust.provenance import origin as originmod

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from jaxcache.fingerprint.model import Fingerprint
    from jaxcache.mounts import Mount
    from jaxcache.trust.findings import Verdict
    from jaxcache.trust.kernel.open_handles import HandleScan
    from jaxcache.trust.kernel.principals import Accounts
    from jaxcache.trust.provenance.ledger_file import Ledger

MAX_AGE_NS = 3600 * 10**9  # an unchanged directory's judgement is redone entry by entry hourly
# A change made after a stat moves a ctime past one read at least this long before the stat
# (timestamps are taken from a coarse clock: a tick, or a second on some filesystems)
SETTLE_NS = 2 * 10**9
# filesystems that keep ctime as the kernel's clock says, below every user (not network, FUSE
# or overlay: their ctimes come from a server, a daemon or layers changed underneath)
CTIME_KEPT = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "f2fs", "bcachefs"})
# Below this a directory is audited in full without a memo: a memo is itself a trusted input
# (its folders audited, ~4 ms), more than judging a few hundred entries costs. A directory's
# st_size grows with its names on every filesystem (ext4 4 KiB blocks, btrfs the names' bytes,
# tmpfs 20 bytes a name): a gate on cost, not on trust (either side is sound).
MIN_DIR_BYTES = 16 << 10
_ELIDED_KINDS = ("cache", "atime", "lockfile")


class Loaded(NamedTuple):
    """A memo as read from its file: the header, the notable rows, and the rest when asked,
    as rows or as lines by name (memo_format.lines(); each raises MemoError). `ledger_now`
    opens a ledger's path as the origin ledger is read, a trusted input (trust/inputs/
    ledger.py), and says its stat (None: there is none; it raises where it is not one), for
    _ledger_holds(); given by the loader, which lives where trusted inputs are read."""

    header: Header
    notable: tuple[Row, ...]
    rest: Callable[[], tuple[Row, ...]]
    lines: Callable[[], dict[str, bytes]]
    ledger_now: Callable[[str], os.stat_result | None]


class Memo(NamedTuple):
    """What a passed audit leaves to remember (memo_format.encode's parts)."""

    header: Header
    notable: tuple[Row, ...]
    rest: tuple[Row, ...]
    carried: Carried | None = None


class Seen(NamedTuple):
    """The directory as this audit found it, before anything in it was read."""

    path: str
    uid: int
    boot: str
    time_ns: int  # taken just before the directory's stat
    directory: tuple[int, int, int, int, int, int, int, int]
    mount: str  # mount_identity()
    fstype: str
    inside: bool  # a mount at or below the directory (not the one it is on)
    context: str
    # only you (and root) can look a name up in it: yours, no search bit for group or
    # others, no ACL (whoever cannot look a name up cannot open an entry by it, whatever the
    # entry's own bits say)
    closed: bool
    # entries no watched job of yours wrote are refused here (CI, --require-origin): then
    # bytes you rewrote in place (a restore) must be found, and only their ctime shows them
    origin_required: bool

    @property
    def stamp(self) -> tuple[int, int, int, int, int]:
        d = self.directory
        return d[0], d[1], d[2], d[3], d[4]


def context(uid: int, reader: Fingerprint | None, ci: str | None, required: bool,
            restored_from: tuple[str, ...], origins: bool) -> str:
    """What the judgement of the entries depended on besides the entries: whose it is, the
    build that judged their builds, the origin rules, and whether origins were judged (said
    in full: it is compared, never hashed)."""
    return repr((uid, reader.id if reader is not None else None,
                 reader is not None and reader.build is not None, ci, required,
                 tuple(restored_from), origins))


def mount_identity(m: Mount | None) -> str:
    """The mount a directory is on, as mountinfo says it (a remount over it is another)."""
    return "-" if m is None else repr((m.mount_id, m.dev, m.fstype, m.source, m.root, m.point))


def seen(fd: int, path: str, uid: int, mounts: tuple[Mount, ...], ctx: str,
         acl: bool, origin_required: bool) -> Seen:
    """The directory open as the O_PATH descriptor `fd`, stat'ed now (`acl`: it has an
    extended ACL, as the walk read it)."""
    import time

    from jaxcache.fingerprint.boot import boot_id
    from jaxcache.mounts import mount_of

    now = time.time_ns()
    st = os.fstat(fd)
    m = mount_of(path, st.st_dev, mounts)
    inside = any(x.point != (m.point if m else None) and
                 (x.point == path or x.point.startswith(path.rstrip("/") + "/"))
                 for x in mounts)
    return Seen(path, uid, boot_id(), now,
                (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_nlink,
                 st.st_mode, st.st_uid, st.st_gid),
                mount_identity(m), m.fstype if m else "", inside, ctx,
                st.st_uid == uid and not st.st_mode & 0o011 and not acl, origin_required)


def decide(memo: Loaded | None, now: Seen) -> tuple[Judged, Why]:
    """How much of the entries this audit must look at, and why not less."""
    if memo is None:
        return Judged.FULL, Why.NO_MEMO
    h = memo.header
    if h.uid != now.uid:
        return Judged.FULL, Why.OTHER_USER
    if not now.boot or h.boot != now.boot:
        return Judged.FULL, Why.OTHER_BOOT
    if h.path != now.path or h.directory[:2] != now.directory[:2]:
        return Judged.FULL, Why.OTHER_DIRECTORY
    if h.mount != now.mount or now.fstype not in CTIME_KEPT:
        return Judged.FULL, Why.OTHER_MOUNT
    if now.inside:
        return Judged.FULL, Why.MOUNT_INSIDE
    if h.context != now.context:
        return Judged.FULL, Why.OTHER_CONTEXT
    if not _ledger_holds(h.ledger, any(r.origin not in ("", "yours") for r in memo.notable),
                         memo.ledger_now):
        return Judged.FULL, Why.LEDGER
    if h.directory != now.directory:
        return Judged.CHANGED, Why.DIRECTORY_CHANGED
    if not h.settled:
        return Judged.CHANGED, Why.UNSETTLED
    if not 0 <= now.time_ns - h.written_ns <= MAX_AGE_NS:
        return Judged.CHANGED, Why.EXPIRED
    if not h.inspected_all:
        return Judged.CHANGED, Why.UNINSPECTED
    if not now.closed:
        return Judged.CHANGED, Why.OPEN_DIRECTORY
    if now.origin_required:
        return Judged.CHANGED, Why.ORIGIN_REQUIRED
    return Judged.UNCHANGED, Why.NONE


def _ledger_holds(seen: LedgerSeen | None, strangers: bool,
                  ledger_now: Callable[[str], os.stat_result | None]) -> bool:
    """Does the ledger the entries were judged with still say the same of them? It is still
    one no one else could write (a ledger that became writable by others since would be a
    problem now, and with it nothing is yours: the full audit says so). Lines are only
    ever appended (compaction replaces the file): the same file, no shorter, still judges
    your entries yours; new lines could vouch for entries of unknown origin, so those are
    judged again."""
    if seen is None:
        return True  # origins were not judged
    from jaxcache.errors import JaxcacheError

    # still a trusted input (its bits, ACL, owner and folders, as ledger.load() judges it: one
    # another user may write since vouches for nothing), opened but not read
    try:
        st = ledger_now(seen.path)
    except (JaxcacheError, OSError):
        return False
    if st is None:
        return seen.dev is None  # there was none, and there is none
    if seen.dev is None or seen.ino is None or seen.size is None:
        return not strangers  # lines appeared where there were none
    if (st.st_dev, st.st_ino) != (seen.dev, seen.ino) or st.st_size < seen.size:
        return False
    return st.st_size == seen.size or not strangers


def unchanged(memo: Loaded, accounts: Accounts, reader: Fingerprint | None, now_s: float
              ) -> tuple[entriesmod.Inventory, originmod.Origins | None]:
    """The inventory and origins of a directory found as remembered: the notable rows as
    entries (the reports name them), the plain ones counted (Elided)."""
    h = memo.header
    dev = h.directory[0]
    owner = accounts.user_name(h.uid)
    listed = tuple(_entry(r, dev, h.uid, owner, now_s) for r in memo.notable)
    elided = entriesmod.Elided(*h.elided, h.elided_bytes, _names(memo), h.stamp)
    inventory = entriesmod.Inventory(listed, elided=elided)
    if h.ledger is None or not h.rows:
        return inventory, None
    origins = originmod.Origins(
        tuple(_origin(r, h.uid) for r in memo.notable if r.kind == "cache" and r.origin),
        h.ledger.path, h.ledger.problem, h.ledger.skipped, h.ledger.other_boot, reader=reader,
        elided_yours=h.elided[0])
    return inventory, origins


def remembered_inodes(memo: Loaded) -> Callable[[], frozenset[tuple[int, int]] | None]:
    """The inodes of every entry remembered (None: the memo's rows cannot be read), for the
    handle scan of a directory found unchanged. Its argument says no other user could get a
    descriptor on an entry since the judgement, but a descriptor in flight in a Unix socket
    message when it was made is in no process's table: received since, it is held by a
    process the scan must find. The path cannot be relied on (a descriptor opened through
    a hard link since removed is named by that link, "(deleted)"), so by inode, as the full
    audit finds it; read only where an untrusted process holds a descriptor or mapping that
    could be one."""
    dev = memo.header.directory[0]

    def inodes() -> frozenset[tuple[int, int]] | None:
        try:
            return frozenset((dev, r.ino) for r in (*memo.notable, *memo.rest()))
        except (MemoError, OSError):
            return None

    return inodes


def _names(memo: Loaded) -> Callable[[], dict[str, int] | None]:
    def names() -> dict[str, int] | None:
        try:
            return {r.name: r.size for r in (*memo.notable, *memo.rest())}
        except (MemoError, OSError):
            return None

    return names


def _entry(r: Row, dev: int, uid: int, owner: str, now_s: float) -> entriesmod.Entry:
    kind, module, key = (r.kind, r.name[:-71], r.name[-70:-6]) if r.kind == "cache" else \
        entriesmod.classify(r.name)  # a row's kind is the one classify() gave it
    return entriesmod.Entry(r.name, kind, module, key, "file", r.size, uid, owner,
                            r.mode, max(0.0, now_s - r.mtime_ns / 1e9), 1, False,
                            ("unexpected-name",) if kind == "unexpected" else (), (),
                            (dev, r.ino, r.mtime_ns, r.ctime_ns or 0))


def _origin(r: Row, uid: int) -> originmod.EntryOrigin:
    return originmod.EntryOrigin(r.name, r.origin, r.written_at, r.writer,
                                 owner=None if r.origin == originmod.YOURS else uid)


class Relisted(NamedTuple):
    """A changed directory, listed and each name lstat'ed: the inventory (the entries judged
    now and the unchanged notable ones listed, the unchanged plain ones counted: Elided), the
    origins of the unchanged listed ones, the entries judged now (for their origins), the
    unchanged plain rows (remembered again as they were read), and the inodes for the
    handle scan."""

    inventory: entriesmod.Inventory
    kept: Mapping[str, originmod.EntryOrigin]
    fresh: entriesmod.Inventory
    carried: Carried
    inodes: frozenset[tuple[int, int]]


def relist(memo: Loaded, dir_fd: int, path: str, me: frozenset[int], accounts: Accounts,
           now: Seen, now_s: float) -> Relisted | None:
    """The directory behind `dir_fd` listed, each name lstat'ed: an entry whose device, inode
    and ctime are those remembered is as it was judged (counted if it was plain, listed
    without reading its ACL if not), any other is judged as inventory() judges it. None:
    judge it in full (unreadable, a subdirectory)."""
    h = memo.header
    plain = memo.lines()
    notable = {r.name: r for r in memo.notable}
    try:
        rd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return None
    listed, fresh, carried = [], [], []
    kept: dict[str, originmod.EntryOrigin] = {}
    files: dict[str, int] = {}
    counts, count_bytes = [0, 0, 0], 0
    dev = h.directory[0]
    try:
        st_dir = os.fstat(rd)
        base = entriesmod.acl_base(rd, path)
        inodes = {(st_dir.st_dev, st_dir.st_ino)}
        for item in os.scandir(rd):
            try:
                st = item.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(st.st_mode):
                return None
            inodes.add((st_dir.st_dev, st.st_ino))
            regular = stat.S_ISREG(st.st_mode)
            if regular:
                files[item.name] = st.st_size
            line = plain.get(item.name)
            if line is not None and regular:
                kind, ino, size, ctime = fields(line)
                if ctime is not None and (st.st_dev, st.st_ino, st.st_ctime_ns) == \
                        (dev, ino, ctime):
                    carried.append(line)
                    counts[_ELIDED_KINDS.index(kind)] += 1
                    count_bytes += size
                    continue
            r = notable.get(item.name)
            same = r is not None and r.ctime_ns is not None and regular and \
                (st.st_dev, st.st_ino, st.st_ctime_ns) == (dev, r.ino, r.ctime_ns)
            e = entriesmod.entry(item.name, st, base, path, me, accounts, now_s,
                                 acl_read=not same)
            if e is None:
                continue
            listed.append(e)
            if not same:
                fresh.append(e)
            elif r is not None and r.kind == "cache" and r.origin:
                kept[e.name] = _origin(r, h.uid)
    except PermissionError:
        return None
    finally:
        os.close(rd)
    listed.sort(key=lambda e: e.name)
    elided = entriesmod.Elided(counts[0], counts[1], counts[2], count_bytes, lambda: files,
                               now.stamp)
    return Relisted(entriesmod.Inventory(tuple(listed), elided=elided), kept,
                    entriesmod.Inventory(tuple(fresh)),
                    Carried(b"".join(carried), len(carried), (counts[0], counts[1], counts[2]),
                            count_bytes),
                    frozenset(inodes))


def merged(relisted: Relisted, judged: originmod.Origins) -> originmod.Origins:
    """The origins of every compiled entry listed, in the inventory's order: remembered for
    the unchanged ones, `judged` (origin.judge() of the fresh ones, or remembered_origins()
    where none is compiled code) for the rest; the carried ones counted."""
    fresh = {e.name: e for e in judged.entries}
    out = []
    for e in relisted.inventory.entries:
        o = relisted.kept.get(e.name) or fresh.get(e.name)
        if o is not None:
            out.append(o)
    elided = relisted.inventory.elided
    return originmod.Origins(tuple(out), judged.ledger, judged.ledger_problem,
                             judged.ledger_skipped, judged.ledger_other_boot, judged.relearned,
                             judged.reader, judged.described, judged.trusted,
                             elided.compiled if elided is not None else 0)


def remembered_origins(h: Header, reader: Fingerprint | None) -> originmod.Origins:
    """No entry to judge by the ledger: its state as remembered (what the findings say of it)."""
    assert h.ledger is not None
    return originmod.Origins((), h.ledger.path, h.ledger.problem, h.ledger.skipped,
                             h.ledger.other_boot, reader=reader)


def remember(now: Seen, verdict: Verdict, inventory: entriesmod.Inventory | None,
             origins: originmod.Origins | None, held: HandleScan | None,
             ledger: LedgerSeen | None, trusted_ledgers: bool,
             carried: Carried | None = None) -> Memo | None:
    """What to remember of a judgement that passed, or None where its argument would not
    hold: not PRIVATE, not every entry a plain regular file of yours (one link, no group or
    other write, no ACL), a directory inside, a handle of any kind another user's process
    holds on an entry (one that can only read today could be reopened for writing once the
    entry's bits were loosened), a filesystem whose ctimes are
    not the kernel's, ledgers of other writers (their files change under them), entries
    judged against another build's fingerprint (judged each time), no boot id, too many
    entries. `ledger`: the ledger the origins were judged with (stat'ed before it was read).
    `carried`: the plain rows a changed directory still holds unchanged (relist()), which its
    inventory counts (Elided) instead of listing."""
    from jaxcache.trust.findings import Verdict
    from jaxcache.trust.judgement.memo_format import MAX_ROWS

    counted = inventory.elided.files if inventory is not None and inventory.elided else 0
    if verdict is not Verdict.PRIVATE or inventory is None or inventory.unreadable \
            or counted != (carried.rows if carried is not None else 0) \
            or held is None or held.handles or held.readers \
            or trusted_ledgers or not now.boot or now.fstype not in CTIME_KEPT or now.inside \
            or len(inventory.entries) + counted > MAX_ROWS \
            or (origins is not None and ledger is None):
        return None
    by_name = {o.name: o for o in origins.entries} if origins is not None else {}
    reader = origins.reader if origins is not None else None
    plain_id = reader.id if reader is not None and reader.build is not None else None
    settle = now.time_ns - SETTLE_NS
    notable: list[Row] = []
    rest: list[Row] = []
    elided = list(carried.kinds) if carried is not None else [0, 0, 0]
    elided_bytes = carried.bytes if carried is not None else 0
    for e in inventory.entries:
        if e.type != "file" or e.uid != now.uid or e.mode & 0o022 or e.has_acl or \
                e.nlink != 1 or set(e.flags) - {"unexpected-name"} or e.kind not in ROW_KINDS:
            return None
        o = by_name.get(e.name)
        if o is not None and (o.build is not None or o.other_build or o.vouched_by):
            return None  # judged against another build's fingerprint, or another's ledger
        ctime = e.identity[3] if e.identity[3] < settle else None
        row = Row(e.name, e.kind, e.identity[1], e.size, e.mode, e.identity[2], ctime,
                  o.origin if o is not None else "", o.written_at if o is not None else None,
                  o.writer if o is not None else None)
        plain = e.kind in ("atime", "lockfile") or (e.kind == "cache" and (
            o is None or (o.origin == originmod.YOURS and o.writer == plain_id)))
        if plain:
            rest.append(row)
            elided[_ELIDED_KINDS.index(e.kind)] += 1
            elided_bytes += e.size
        else:
            notable.append(row)
    if now.closed and _open_elsewhere(now):
        return None
    header = Header(now.path, now.uid, now.boot, now.time_ns, now.directory,
                    now.directory[3] < settle, now.mount, now.context,
                    ledger if origins is not None else None, held.uninspected_count == 0,
                    len(notable) + len(rest) + counted, len(notable), 0, 0,
                    (elided[0], elided[1], elided[2]), elided_bytes)
    return Memo(header, tuple(notable), tuple(rest), carried)


def _open_elsewhere(now: Seen) -> bool:
    """Is any file in the directory open anywhere but here, or can that not be told?

    The handle scan sees descriptors in processes' tables and mappings; a descriptor in flight
    in a Unix socket message (sent with SCM_RIGHTS, not yet received) is in none. Sent away
    while this judgement was made and received after it, it would be a descriptor no name
    lookup was needed for, on an entry a closed directory's memo takes as unchanged without
    looking. The kernel counts every open file on an inode, in flight or not: a write lease
    (F_SETLEASE F_WRLCK, which you may take on your own files) is refused while any other
    open file description reads or writes it. Each file is probed so, the lease dropped at
    once (SIGIO, which an opener meanwhile sends the lease holder, ignored for that moment:
    only from the main thread, `jaxcache run`'s; anywhere else, or where leases are off,
    nothing is remembered). A descriptor opened O_PATH (or with the access mode 3, for
    ioctls) is not counted (nor can it read or write: reopened through /proc/PID/fd its
    permissions are checked again, and a directory found unchanged has its entries' handles
    looked for by inode: remembered_inodes()). Only for a closed directory: only its memo
    skips the entries."""
    import fcntl
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGIO) is None:  # a handler not Python's: left alone
        return True
    try:
        dfd = os.open(now.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return True
    before = signal.signal(signal.SIGIO, signal.SIG_IGN)
    try:
        st = os.fstat(dfd)
        if (st.st_dev, st.st_ino) != now.directory[:2]:
            return True
        with os.scandir(dfd) as listing:
            for item in listing:
                if not item.is_file(follow_symlinks=False):  # opened, a device could act
                    return True
                try:
                    fd = os.open(item.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK |
                                 os.O_NOCTTY | os.O_CLOEXEC, dir_fd=dfd)
                except OSError:
                    return True
                try:
                    if not stat.S_ISREG(os.fstat(fd).st_mode):
                        return True
                    fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
                    fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
                except OSError:
                    return True  # EAGAIN: open elsewhere; anything else: cannot be told
                finally:
                    os.close(fd)
    except OSError:
        return True
    finally:
        signal.signal(signal.SIGIO, before)
        os.close(dfd)
    return False


def ledger_stat(path: str) -> os.stat_result | None:
    """The ledger file stat'ed before it is read: lines appended after that make it longer
    than remembered (None: there is none, or it cannot be stat'ed)."""
    try:
        return os.stat(path, follow_symlinks=False)
    except OSError:
        return None


def ledger_seen(st: os.stat_result | None, judged: Ledger) -> LedgerSeen:
    """The ledger as the origins were judged with it: its file as stat'ed before the read
    (ledger_stat()), and what the read said."""
    if st is None:
        return LedgerSeen(judged.path, None, None, None, judged.problem, judged.skipped,
                          judged.other_boot)
    return LedgerSeen(judged.path, st.st_dev, st.st_ino, st.st_size, judged.problem,
                      judged.skipped, judged.other_boot)
