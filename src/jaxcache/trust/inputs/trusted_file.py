"""The one loader for every file jaxcache trusts: policy, keys, run records, bench and audit JSON.

Whoever can change such a file decides what jaxcache concludes (a policy decides whom you
trust, a public key which entries a sealed reader loads), so each is held to the policy's rule:
a regular file, owned by you or root, writable by no one else (mode bits and ACL), in a
directory no one else can modify or replace, all the way up from `/`.

The file is found with the fd walk (trust/kernel/walk.py), looked at with lstat before it is opened
(a device is never opened, a FIFO never blocks: O_NONBLOCK), opened O_NOFOLLOW relative to the
directory the walk reached, checked again with fstat, and read through that one descriptor up
to a size limit. Anything else is one line and exit code 2 (InputError).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from typing import NamedTuple

from jaxcache.errors import JaxcacheError
from jaxcache.text import file_type, quoted, safe
from jaxcache.trust.findings import Effect
from jaxcache.trust.kernel import acl as aclmod
from jaxcache.trust.kernel.access import Action
from jaxcache.trust.kernel.principals import Accounts, Trust

_OPEN = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY
_READ_CHUNK = 1 << 20
# Writers of the directory above a trusted file that cannot replace the file itself: entries
# in it (judged by the file check), future files (umask, default ACL), and new names next to
# it in a sticky directory (the sticky bit keeps them from renaming ours).
_HARMLESS = (Action.REWRITE_ENTRY, Action.INHERIT, Action.CREATE_ENTRIES)


class InputError(JaxcacheError):
    """A trusted input that is missing, not a regular file, unprotected or too large."""


class Kind(NamedTuple):
    """What a trusted file is, for messages and limits."""

    name: str  # "policy", "public key", ...
    limit: int  # bytes
    stake: str  # what whoever can change it decides, for the message


POLICY = Kind("policy", 1 << 20, "decides whom you trust")
PUBLIC_KEY = Kind("public key", 4 << 10, "decides which cache entries you load")
SIGNING_KEY = Kind("signing key", 64 << 10, "decides what you sign")
RECORD = Kind("record", 256 << 20, "decides what jaxcache concludes from it")
BENCH = Kind("bench result", 256 << 20, "decides what jaxcache concludes from it")
AUDIT = Kind("audit", 256 << 20, "decides what jaxcache concludes from it")
FINGERPRINT = Kind("fingerprint", 1 << 20, "decides what jaxcache concludes from it")
ORIGIN_LEDGER = Kind("ledger", 64 << 20, "decides which entries count as your jobs' own")
# a token's PIN (trust/inputs/pkcs11.py): whoever reads it can sign with the key in the token
PIN_FILE = Kind("PIN file", 1 << 10, "decides how jaxcache logs in to the token")
# the Sigstore trusted root (or trust config) keyless signatures are judged against
SIGSTORE_ROOT = Kind("Sigstore trusted root", 1 << 20,
                     "decides which certificates, logs and times you believe")
# a PKCS#11 library: code loaded into the process, judged by opened() (never read: no limit)
LIBRARY = Kind("PKCS#11 library", 0, "decides what code runs in this process")


class TrustedFile(NamedTuple):
    path: str  # as given
    data: bytes
    uid: int
    mode: int
    dev: int = 0  # the file read: a reader may bind its contents to the file itself
    ino: int = 0


def read(path: str, kind: Kind, *, missing_ok: bool = False,
         accounts: Accounts | None = None, also: frozenset[int] = frozenset()
         ) -> TrustedFile | None:
    """Read a trusted file, or raise InputError saying what is wrong with it.

    With `missing_ok`, a file (or directory above it) that does not exist gives None. `also`:
    users besides you and root who may own and write it (those a policy trusts, as streamed()).
    """
    got = _opened(path, kind, missing_ok, accounts, also)
    if got is None:
        return None
    fd, st = got
    try:
        data = _read_all(fd, f"{kind.name} {safe(path)}", kind)
    finally:
        os.close(fd)
    return TrustedFile(path, data, st.st_uid, st.st_mode, st.st_dev, st.st_ino)


def opened(path: str, kind: Kind, *, follow: bool = False,
           accounts: Accounts | None = None) -> tuple[int, os.stat_result]:
    """A trusted file judged as read() judges it, left open and unread, for what is too large
    to read (a shared library): the caller holds the descriptor while it uses the file, checks
    that the name still names it (/proc/self/fd/N gives the path judged), and closes it.

    `follow`: a symbolic link as the last name is followed (libfoo.so -> libfoo.so.1, as
    libraries are installed), provided the link is yours or root's and its directory passes
    the same check as the file's: whoever can change the link decides what it names.
    """
    if follow:
        path = _through_links(path, kind, accounts or Accounts())
    got = _opened(path, kind, False, accounts)
    assert got is not None
    return got


def streamed(path: str, kind: Kind, *, missing_ok: bool = False,
             accounts: Accounts | None = None, also: frozenset[int] = frozenset()
             ) -> tuple[int, os.stat_result] | None:
    """A trusted file judged as read() judges it, left open for a reader that reads it in
    chunks (chunks(), bounded by the kind's limit) instead of holding it whole: the origin
    ledger, which grows to tens of megabytes. The caller closes the descriptor. `also`: the
    users besides you and root who may own and write the file and its folders (a trusted
    writer's own ledger, trust/inputs/ledger.py's load_trusted)."""
    return _opened(path, kind, missing_ok, accounts, also)


def chunks(fd: int, what: str, kind: Kind) -> Iterator[bytes]:
    """The file open as `fd`, in chunks; InputError once it passes the kind's limit."""
    total = 0
    while True:
        try:
            chunk = os.read(fd, min(_READ_CHUNK, kind.limit + 1 - total))
        except OSError as exc:
            raise InputError(f"cannot read {what}: {exc.strerror}") from None
        if not chunk:
            return
        total += len(chunk)
        if total > kind.limit:
            raise InputError(f"{what} is larger than the {kind.limit} bytes a {kind.name} "
                             "may have")
        yield chunk


def _opened(path: str, kind: Kind, missing_ok: bool, accounts: Accounts | None,
            also: frozenset[int] = frozenset()) -> tuple[int, os.stat_result] | None:
    if not isinstance(path, str) or not path:
        raise InputError(f"give a file name for the {kind.name}")
    what = f"{kind.name} {safe(path)}"
    accounts = accounts or Accounts()
    if "\0" in path:
        raise InputError(f"{kind.name} path {quoted(path)} contains a NUL byte")
    full = path if path.startswith("/") else os.getcwd().rstrip("/") + "/" + path
    parent, name = full.rsplit("/", 1)
    parent = parent or "/"
    if name in ("", ".", ".."):
        raise InputError(f"{what} names a directory, not a file")
    if missing_ok:  # the common case for the default policy: no walk needed to say so
        try:
            os.lstat(full)
        except FileNotFoundError:
            return None
        except OSError:
            pass  # judged below, with the reason
    from jaxcache.trust.kernel.walk import walk_open

    w, dfd = walk_open(parent)
    try:
        if w.missing or w.blocked:
            if w.blocked:
                raise InputError(f"cannot read {what}: {w.blocked}")
            if missing_ok:
                return None
            raise InputError(_missing(kind, path))
        fd = _open(dfd, name, path, kind, missing_ok)
        if fd is None:
            return None
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # replaced between lstat and open
            raise InputError(f"{what} changed while it was being opened")
        _check_file(fd, st, what, kind, accounts, also)
        _check_parents(parent, what, kind, accounts, also)
        if kind in (POLICY, PUBLIC_KEY, SIGNING_KEY, PIN_FILE, LIBRARY, SIGSTORE_ROOT):
            _check_handles(full, st, what, kind, accounts)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def _through_links(path: str, kind: Kind, accounts: Accounts) -> str:
    """Where a chain of symbolic links as the last name ends, each link judged by its owner and
    its directory. A name that is no link (or is missing) ends the chain: _opened judges it."""
    from jaxcache.trust.kernel.walk import MAX_SYMLINKS

    full = os.path.abspath(path)
    for _ in range(MAX_SYMLINKS):
        try:
            st = os.lstat(full)
        except (OSError, ValueError):
            return full
        if not stat.S_ISLNK(st.st_mode):
            return full
        parent = os.path.dirname(full) or "/"
        what = f"{kind.name} {safe(path)} (the link {safe(full)})"
        if st.st_uid not in (0, os.geteuid()):
            raise InputError(_fit(f"{what} is owned by {accounts.user_name(st.st_uid)}, not by "
                                  "you or root", f"whoever owns it {kind.stake}"))
        _check_parents(parent, what, kind, accounts)
        try:
            target = os.readlink(full)
        except OSError as exc:
            raise InputError(f"cannot read {what}: {exc.strerror}") from None
        # the directory's own links were judged above: ".." in the target counts from where
        # the directory really is, as the kernel counts it
        full = os.path.normpath(os.path.join(os.path.realpath(parent), target))
    raise InputError(f"{kind.name} {safe(path)}: more than {MAX_SYMLINKS} symbolic links")


def _open(dfd: int, name: str, path: str, kind: Kind, missing_ok: bool) -> int | None:
    what = f"{kind.name} {safe(path)}"
    try:
        before = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        if missing_ok:
            return None
        raise InputError(_missing(kind, path)) from None
    except OSError as exc:
        raise InputError(f"cannot read {what}: {exc.strerror}") from None
    if stat.S_ISLNK(before.st_mode):
        target = os.readlink(name, dir_fd=dfd)
        if os.path.isabs(target) and \
                os.path.dirname(target) == os.path.dirname(os.path.abspath(path)):
            target = os.path.basename(target)  # beside the link: the same file, said shorter
        why = "whoever can change a link decides what it names"
        raise InputError(_fit(f"{what} is a symbolic link (to {safe(target)}); give the file "
                              "itself", why, f"{what} is a symbolic link; give the file itself"))
    if not stat.S_ISREG(before.st_mode):
        raise InputError(f"{what} is {file_type(before.st_mode)}, not a regular file")
    try:
        fd = os.open(name, _OPEN, dir_fd=dfd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOENT, errno.ENXIO):
            raise InputError(f"{what} changed while it was being opened") from None
        raise InputError(f"cannot read {what}: {exc.strerror}") from None
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
        os.close(fd)
        raise InputError(f"{what} changed while it was being opened")
    return fd


_LINE = 190  # "jaxcache: " and the message stay within 200 characters when they can


def _fit(head: str, why: str, shorter: str | None = None) -> str:
    """One line: the refusal and why, or the refusal alone when long paths leave no room for
    the why (the refusal must stay whole), or `shorter` (fewer details) if even that is long."""
    line = f"{head}: {why}"
    if len(line) <= _LINE or shorter is None:
        return line if len(line) <= _LINE else head
    return head if len(head) <= _LINE else shorter


def _missing(kind: Kind, path: str) -> str:
    return f"no such {kind.name}: {safe(path)} (file not found)"


def _check_file(fd: int, st: os.stat_result, what: str, kind: Kind,
                accounts: Accounts, also: frozenset[int] = frozenset()) -> None:
    me = os.geteuid()
    mine = {0, me} | also
    if st.st_uid not in mine:
        owners = "you or root" if not also else \
            f"you, root or {', '.join(sorted(accounts.user_name(u) for u in also))}"
        raise InputError(_fit(f"{what} is owned by {accounts.user_name(st.st_uid)}, not by "
                              f"{owners}", f"whoever owns it {kind.stake}"))
    try:
        acl = aclmod.read(f"/proc/self/fd/{fd}", aclmod.ACCESS, follow=True)
    except (aclmod.AclFormatError, OSError) as exc:
        raise InputError(f"cannot judge who may write {what}: its ACL cannot be read "
                         f"({exc})") from None
    if acl is not None and acl.is_extended:
        from jaxcache.trust.kernel import principals

        others = [g for g in principals.writers(safe(what), st.st_uid, st.st_gid, st.st_mode,
                                                acl, accounts, want=aclmod.WRITE)
                  if not (g.principal.kind == "user" and g.principal.id in mine)]
        if others:
            who = ", ".join(sorted({str(g.principal) for g in others}))
            raise InputError(_fit(f"{what} is writable by {who} through its ACL",
                                  f"anyone who can edit it {kind.stake}"))
    if st.st_mode & 0o022:
        raise InputError(_fit(f"{what} is writable by group or others (mode "
                              f"{stat.S_IMODE(st.st_mode):04o})",
                              f"anyone who can edit it {kind.stake}"))


def _check_parents(parent: str, what: str, kind: Kind, accounts: Accounts,
                   also: frozenset[int] = frozenset()) -> None:
    """The directories above the file must be as private as the file: whoever can rename
    one of them, or replace names in the last, can swap in a file of their own (`also`: the
    users besides you and root who may)."""
    from jaxcache.trust.judgement.audit import audit
    from jaxcache.trust.rules.policy_rules import EMPTY, Policy, Rule

    policy = Policy(default=Rule(trusted_uids=also)) if also else EMPTY
    report = audit(parent, policy=policy, scan_processes=False, scan_handles=False,
                   accounts=accounts)
    bad = [w for w in report.untrusted if w.action not in _HARMLESS]
    blind = [f for f in report.findings if f.effect is Effect.UNVERIFIABLE
             and f.code.startswith(("path.", "fs.", "kernel."))]
    if bad or blind:
        who = ", ".join(sorted({str(w.principal) for w in bad})) or report.verdict.value
        raise InputError(_fit(f"{what} sits in {safe(parent)}, which others can modify or "
                              f"replace ({who})", f"whoever can swap it {kind.stake}"))


def _check_handles(full: str, st: os.stat_result, what: str, kind: Kind,
                   accounts: Accounts) -> None:
    """A process of another user that opened the file for writing while the bits allowed it
    keeps that power (trust/kernel/open_handles.py). Checked for what decides whom you trust
    (policy, keys); processes we may not inspect (not root) cannot be judged and are not guessed."""
    from jaxcache.trust.kernel import open_handles as handles

    me = os.geteuid()
    ids = handles.Identities(full, frozenset({(st.st_dev, st.st_ino)}))
    held = handles.scan(ids, lambda u: Trust.YOU if u == me else Trust.ROOT if u == 0
                        else Trust.UNTRUSTED,
                        accounts.user_name, you=me)
    if held.handles:
        h = held.handles[0]
        raise InputError(_fit(f"{what} is held open for writing by process {h.pid} "
                              f"({safe(h.command)}, user {h.user}, {h.detail})",
                              f"opened when the permissions allowed it, whoever can edit it "
                              f"{kind.stake}"))


def _read_all(fd: int, what: str, kind: Kind) -> bytes:
    return b"".join(chunks(fd, what, kind))
