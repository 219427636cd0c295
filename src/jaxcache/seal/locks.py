"""The lock files of a directory tier: jaxcache's own, one per account, and JAX's `.lockfile`.

jaxcache serializes its writers (eviction under max_size, settling a signature left without
its entry: lru.py, publish.py) with an flock on `.jaxcache-lock-<uid>`, the writing account's
own lock. Everything it guards is that account's: its entries, markers and budget (lru.py
counts and evicts only its own), and a signature replaced only compare-and-swap. So no
account waits for another's lock, and no account can take the lock from the others by
creating it first, as one shared name made 0600 by whoever came first let it. (`.jaxcache-lock`
is the name earlier versions shared; JAX's LRUCache locks `.lockfile`.)

A lock is judged, never followed: a writer's own by lstat, then open O_NOFOLLOW|O_NONBLOCK (a
FIFO never blocks the open), then fstat; verify judges every lock of the directory by lstat
alone, opening none. It must be a regular file owned by the account its name names
(`.jaxcache-lock-<uid>`); `.lockfile` and `.jaxcache-lock` by you, root or the directory's
owner. Anything else there (a symbolic link, a directory, a FIFO, another account's file) was
planted: a writer refuses it in one line naming it and its owner (its size-limited writes fail
until the name is removed: jaxcache deletes nothing it did not create), and `verify --strict`
fails on it.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass

from jaxcache.text import safe
from jaxcache.trust.entries import classify
from jaxcache.trust.principals import Accounts

PREFIX = ".jaxcache-lock"  # + "-<uid>": one per account (trust/entries.py knows the names)
_FLAGS = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


class LockRefused(OSError):
    """The name of this account's lock holds something jaxcache did not make: nothing is
    written under it (strerror says what it is, whose, and what to remove)."""


@dataclass(frozen=True)
class LockProblem:
    """A lock file that is no lock of the account it should belong to (verify reports it)."""

    name: str
    why: str  # not escaped: the report escapes what it prints


def name(uid: int) -> str:
    """The lock file of account `uid` in a tier."""
    return f"{PREFIX}-{uid}"


def named_owner(lock: str) -> int | None:
    """The account a per-account lock's name names; None for the shared names."""
    tail = lock[len(PREFIX) + 1:]
    if lock.startswith(PREFIX + "-") and tail.isdigit() and tail.isascii():
        return int(tail)
    return None


def hold(dir_fd: int) -> int:
    """A descriptor of this account's lock file (created 0600 if missing), to flock; raises
    LockRefused when something else stands under its name."""
    me = os.geteuid()
    lock = name(me)
    st = _lstat(dir_fd, lock)
    if st is not None:
        why = _problem(st, frozenset({me}))
        if why is not None:
            raise _refused(lock, why)
    try:
        fd = os.open(lock, _FLAGS | os.O_CREAT, 0o600, dir_fd=dir_fd)
    except OSError as exc:  # replaced since the look: a link (ELOOP), a directory (EISDIR)
        now = _lstat(dir_fd, lock)
        why = _problem(now, frozenset({me})) if now is not None else None
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO) or why is not None:
            raise _refused(lock, why or f"cannot be opened ({exc.strerror})") from None
        raise
    why = _problem(os.fstat(fd), frozenset({me}))
    if why is not None:
        os.close(fd)
        raise _refused(lock, why)
    return fd


def survey(dir_fd: int) -> tuple[LockProblem, ...]:
    """Every lock file of the directory that is not what it should be, judged by lstat alone
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
        return f"is {_kind(st.st_mode)} owned by {who}, not a lock file: planted there"
    if st.st_uid not in owners:
        want = " or ".join(_account(u) for u in sorted(owners))
        return f"is a file owned by {who}, not by {want}: planted there"
    return None


def _refused(lock: str, why: str) -> LockRefused:
    return LockRefused(errno.EPERM, f"{safe(lock)} {safe(why)}; remove it, then size-limited "
                                    "writes resume (jaxcache deletes nothing it did not create)")


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device file" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "no regular file"


def _account(uid: int) -> str:
    found = Accounts().user_name(uid)
    return found if found.startswith("uid ") else f"{found} (uid {uid})"


def _lstat(dir_fd: int, lock: str) -> os.stat_result | None:
    try:
        return os.stat(lock, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
