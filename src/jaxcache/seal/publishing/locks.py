"""The lock of an account's size-limited writes to a tier, and the lock names found in a tier.

jaxcache serializes its writers (eviction under max_size, settling a signature left without
its entry: lru.py, publish.py) with an flock on a lock of the writing account's own. Everything
it guards is that account's: its entries, markers and budget (lru.py counts and evicts only
its own), and a signature replaced only compare-and-swap. So the lock needs no place in the
tier, where every writer of a shared folder could create its name first (made 0600, or a
link, a FIFO, a directory: the account's size-limited writes then failed, and in a sticky
folder it could not even remove the file). It lives in the account's state folder
(`<state>/locks`, made 0700 and checked as yours by folders.private_folders), one file per
tier, named by a digest of the tier directory's device and inode (so every path to one
directory, a bind mount too, takes one lock), its text naming the tier's path for a reader.
Two processes of one account on one machine exclude each other; no two accounts ever wait
for each other.

The lock is judged, never followed: lstat, then open O_NOFOLLOW|O_NONBLOCK (a FIFO never
blocks the open), then fstat: a regular file of yours, else refused in one line saying what
to remove (only you or root can have put it there).

`survey` judges the lock names in a tier for `verify --strict`, by lstat alone, opening none:
JAX's `.lockfile` (its LRUCache's, under max_size), the name earlier versions shared,
`.jaxcache-lock`, and the per-account `.jaxcache-lock-<uid>` of the previous layout. None of
them is jaxcache's lock now; a regular file of the right owner is harmless and passes (its
owner may delete it; in a sticky folder nobody else can, so failing the gate on it would fail
it for good); anything else was planted and fails the gate.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from dataclasses import dataclass

from jaxcache import folders
from jaxcache.errors import JaxcacheError
from jaxcache.text import file_type, safe
from jaxcache.trust.kernel.entries import classify
from jaxcache.trust.kernel.principals import Accounts
from jaxcache.userdirs import user_dir

# + "-<uid>": the previous layout's in-tier names (trust/kernel/entries.py)
PREFIX = ".jaxcache-lock"
_FLAGS = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_TEXT = "jaxcache lock of size-limited writes to "


class LockRefused(OSError):
    """This account's lock cannot be kept or opened (its folder is not yours alone, or its
    name holds something jaxcache did not make): nothing is written (strerror says why)."""


@dataclass(frozen=True, slots=True)
class LockProblem:
    """A lock file in a tier that is no lock of the account it should belong to (verify
    reports it)."""

    name: str
    why: str  # not escaped: the report escapes what it prints


def folder() -> str:
    """Where this account keeps its locks: its state folder's `locks` (XDG_STATE_HOME)."""
    return os.path.join(user_dir("state"), "locks")


def lock_name(tier: os.stat_result) -> str:
    """The lock file (in `folder()`) of the tier directory with this stat: a digest of its
    device and inode, so each directory has one, whatever the path it is reached by."""
    digest = hashlib.sha256(f"jaxcache.lock/1 {tier.st_dev} {tier.st_ino}".encode())
    return f"tier-{digest.hexdigest()[:32]}.lock"


def path_of(dir_fd: int) -> str:
    """The full path of the lock of tier `dir_fd` (for messages and tests)."""
    return os.path.join(folder(), lock_name(os.fstat(dir_fd)))


def name(uid: int) -> str:
    """The in-tier lock name of account `uid` in the previous layout (survey judges it)."""
    return f"{PREFIX}-{uid}"


def named_owner(lock: str) -> int | None:
    """The account a per-account lock's name names; None for the shared names."""
    tail = lock[len(PREFIX) + 1:]
    if lock.startswith(PREFIX + "-") and tail.isdigit() and tail.isascii():
        return int(tail)
    return None


def hold(dir_fd: int) -> int:
    """A descriptor of this account's lock of tier `dir_fd` (created 0600 in `folder()`, the
    folders made 0700, if missing), to flock; raises LockRefused when the folder is not
    yours alone or something else stands under the lock's name. Nothing in the tier is
    opened or made."""
    where = folder()
    try:
        _, locks_fd = folders.private_folders(where, "lock")
    except JaxcacheError as exc:
        raise LockRefused(errno.EACCES, f"{exc}; size-limited writes need a state folder of "
                                        "yours (XDG_STATE_HOME)") from None
    try:
        return _open(locks_fd, where, dir_fd)
    finally:
        os.close(locks_fd)


def _open(locks_fd: int, where: str, dir_fd: int) -> int:
    me = frozenset({os.geteuid()})
    lock = lock_name(os.fstat(dir_fd))
    shown = os.path.join(where, lock)
    st = _lstat(locks_fd, lock)
    if st is not None:
        why = _problem(st, me)
        if why is not None:
            raise _refused(shown, why)
    try:
        fd = os.open(lock, _FLAGS | os.O_CREAT, 0o600, dir_fd=locks_fd)
    except OSError as exc:  # replaced since the look: a link (ELOOP), a directory (EISDIR)
        now = _lstat(locks_fd, lock)
        why = _problem(now, me) if now is not None else None
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO) or why is not None:
            raise _refused(shown, why or f"cannot be opened ({exc.strerror})") from None
        raise
    st = os.fstat(fd)
    why = _problem(st, me)
    if why is not None:
        os.close(fd)
        raise _refused(shown, why)
    if st.st_size == 0:  # new: say whose lock it is (every writer writes the same text)
        with contextlib.suppress(OSError):  # the text is for a reader; the lock is the flock
            os.pwrite(fd, f"{_TEXT}{safe(_tier_path(dir_fd))}\n".encode(), 0)
    return fd


def _tier_path(dir_fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{dir_fd}")
    except OSError:
        return "(a directory whose path this system does not say)"


def survey(dir_fd: int) -> tuple[LockProblem, ...]:
    """Every lock file of the tier that is not what it should be, judged by lstat alone
    (nothing is opened): a per-account lock owned by another account than its name's, a shared
    name owned by neither you, root nor the directory's owner, or anything but a regular file."""
    allowed = frozenset({os.geteuid(), 0, os.fstat(dir_fd).st_uid})
    out = []
    for n in sorted(os.listdir(dir_fd)):
        if classify(n)[0] != "lockfile":
            continue
        st = _lstat(dir_fd, n)
        if st is None:
            continue  # removed since the listing
        named = named_owner(n)
        why = _problem(st, frozenset({named}) if named is not None else allowed)
        if why is not None:
            out.append(LockProblem(n, why))
    return tuple(out)


def _problem(st: os.stat_result, owners: frozenset[int]) -> str | None:
    """Why a lock file with this lstat is no lock of `owners` (None: it is one)."""
    who = _account(st.st_uid)
    if not stat.S_ISREG(st.st_mode):
        return f"is {file_type(st.st_mode)} owned by {who}, not a lock file: planted there"
    if st.st_uid not in owners:
        want = " or ".join(_account(u) for u in sorted(owners))
        return f"is a file owned by {who}, not by {want}: planted there"
    return None


def _refused(lock: str, why: str) -> LockRefused:
    return LockRefused(errno.EPERM, f"{safe(lock)} {safe(why)}; remove it, then size-limited "
                                    "writes resume (jaxcache deletes nothing it did not create)")


def _account(uid: int) -> str:
    found = Accounts().user_name(uid)
    return found if found.startswith("uid ") else f"{found} (uid {uid})"


def _lstat(dir_fd: int, lock: str) -> os.stat_result | None:
    try:
        return os.stat(lock, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def flock_within(fd: int, seconds: float) -> bool:
    """An exclusive flock(2) on `fd`, asked without blocking until `seconds` have passed:
    False when another holder kept it all that time (a stuck or hostile one never hangs us)."""
    import fcntl
    import time

    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
