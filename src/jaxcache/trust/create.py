"""`jaxcache init`: create a private cache directory without races, or accept one that is.

Each missing component is made with mkdirat(parent_fd, name, 0700) and then opened with
O_NOFOLLOW|O_DIRECTORY, so a name planted between the two calls is noticed rather than used.
Ownership, mode and ACLs are checked on the descriptor. Anything that fails is undone, and only
what this call created is ever removed.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator, Mapping
from typing import NamedTuple

from jaxcache.errors import JaxcacheError
from jaxcache.text import quoted, safe
from jaxcache.trust.findings import UNVERIFIABLE, Writer
from jaxcache.trust.inputs.policy import EMPTY, Policy
from jaxcache.trust.judgement.audit import AuditReport, audit
from jaxcache.trust.kernel import acl as aclmod
from jaxcache.trust.kernel.access import Action
from jaxcache.trust.kernel.walk import WalkError, walk, walk_open
from jaxcache.trust.rules import target as targetmod

_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


class InitResult(NamedTuple):
    path: str
    created: tuple[str, ...]
    refused: str | None  # why the directory is not accepted; None when it is ready
    report: AuditReport

    @property
    def ok(self) -> bool:
        return self.refused is None

    def readable(self) -> str | None:
        """An accepted directory others can read or enter: no way to change what JAX loads,
        but they can read your compiled programs; said, never changed (it is not ours)."""
        last = self.report.components[-1] if self.report.components else None
        if not self.ok or self.created or last is None or not last.mode & 0o055:
            return None
        return (f"others can read it (mode {stat.S_IMODE(last.mode):04o}): not who can change "
                "what JAX loads, but they can read your compiled programs; `chmod 700` it if "
                "that matters (jaxcache changes nothing it did not create)")


def default_dir(name: str = "jax") -> str:
    from jaxcache.userdirs import user_dir

    return os.path.join(user_dir("cache"), name)


def default_cache_dir(env: Mapping[str, str] | None = None) -> str:
    """The one rule for every command given no directory: $JAX_COMPILATION_CACHE_DIR (what JAX
    itself would use; empty counts as unset, as JAX takes it), else the project file's
    cache_dir (docs/reference/project-file.md), else the directory a plain `jaxcache init` makes
    (your platform's cache dir, jaxcache/jax): jaxcache/project/ weighs them."""
    from jaxcache.project import effective

    return effective.default_cache_dir(os.environ if env is None else env)


def _private_problem(fd: int, path: str) -> str | None:
    st = os.fstat(fd)
    where = f"/proc/self/fd/{fd}"
    if st.st_uid != os.geteuid():
        return f"{safe(path)} is owned by uid {st.st_uid}, not by you"
    if stat.S_IMODE(st.st_mode) & 0o022:  # others reading is no trust matter (readable())
        return f"{safe(path)} has mode {stat.S_IMODE(st.st_mode):04o}: others can write it"
    for name, label in ((aclmod.ACCESS, "an ACL"), (aclmod.DEFAULT, "a default ACL")):
        acl = aclmod.read(where, name, follow=True)
        if acl is not None and (acl.is_extended or name == aclmod.DEFAULT):
            listed = ", ".join(aclmod.describe(e) for e in acl.entries)
            return f"{safe(path)} has {label} ({listed})"
    return None


def creation_blockers(r: AuditReport) -> tuple[Writer, ...] | None:
    """For a path that does not exist yet: the untrusted writers who could still change it
    after init made it 0700 and ours (None: its storage cannot be judged). Creating the name
    first is no threat to init, which makes it itself and refuses a name someone else made;
    renaming ours away is, unless the parent is sticky; what JAX's umask would let others do
    is not (init sets 0700 and refuses an inherited ACL on the descriptor)."""
    if any(f.effect == UNVERIFIABLE for f in r.findings):
        return None
    anchor = r.components[-1] if r.components else None
    sticky = anchor is not None and bool(anchor.mode & stat.S_ISVTX)
    return tuple(w for w in r.untrusted
                 if not (w.action is Action.INHERIT or (w.action is Action.CREATE_DIR and sticky)))


def _changed(path: str, missing: tuple[str, ...]) -> bool:
    try:
        return walk(path).missing != missing
    except WalkError:
        return True  # still changing: look again


def init(given: str, *, policy: Policy = EMPTY) -> InitResult:
    tgt = targetmod.resolve(given)
    if tgt.path is None:
        raise JaxcacheError(f"init makes local directories; {safe(given)} is a URL")
    if tgt.tilde:
        raise JaxcacheError(f"refusing {quoted(given)}: JAX does not expand '~', so this would "
                            "create a directory literally named '~'; pass an absolute path")
    for attempt in range(3):
        w, fd = walk_open(tgt.path)
        if w.blocked:
            os.close(fd)
            report = audit(tgt.path, policy=policy)
            return InitResult(tgt.path, (), w.blocked, report)
        if not w.missing:
            break
        # judged before anything is made: a refusal changes nothing on disk
        before = audit(tgt.path, policy=policy)
        blockers = creation_blockers(before)
        if blockers == ():
            break
        os.close(fd)
        if attempt < 2 and _changed(tgt.path, w.missing):
            continue  # made meanwhile (another rank's init, say): judge what is there now
        why = "cannot be judged" if blockers is None else \
            f"could be changed by {', '.join(sorted({str(b.principal) for b in blockers}))}"
        return InitResult(tgt.path, (), f"the audit says {before.verdict.value} (the new "
                          f"directory {why})", before)
    created: list[tuple[int, str, str]] = []  # (parent fd, name, path) of what we made
    refused = None
    cur = fd
    path = w.anchor_node.path
    try:
        for name in w.missing:
            path = path.rstrip("/") + "/" + name
            try:
                os.mkdir(name, 0o700, dir_fd=cur)
                mine = True
            except FileExistsError:
                mine = False  # someone made it since the walk: judged below like any other
            except OSError as exc:
                refused = f"cannot create {safe(path)}: {exc.strerror}"
                break
            try:
                nfd = os.open(name, _OPEN if mine else _OPEN | os.O_PATH, dir_fd=cur)
            except OSError as exc:
                refused = f"{safe(path)} appeared while being created and is not a plain " \
                          f"directory ({exc.strerror})"
                break
            if mine:
                created.append((os.dup(cur), name, path))
                if stat.S_IMODE(os.fstat(nfd).st_mode) != 0o700:
                    os.fchmod(nfd, 0o700)  # the umask took bits away; this one is ours
            os.close(cur)
            cur = nfd
        if refused is None:
            refused = _private_problem(cur, path)
    finally:
        os.close(cur)
    report = audit(tgt.path, policy=policy)
    if refused is None and not report.verdict.ok:
        refused = f"the audit says {report.verdict.value}"
    if refused is not None:
        _undo(created)
    else:
        for parent_fd, _, _ in created:
            os.close(parent_fd)
    return InitResult(tgt.path, tuple(p for _, _, p in created) if refused is None else (),
                      refused, report)


def _undo(created: list[tuple[int, str, str]]) -> None:
    """Remove, deepest first, the empty directories this call made; nothing else."""
    for parent_fd, name, _ in reversed(created):
        try:
            os.rmdir(name, dir_fd=parent_fd)
        except OSError:
            pass  # not empty or already gone: leave it, never force
        finally:
            os.close(parent_fd)


def remove_created(result: InitResult) -> None:
    """Take back what a successful init() made, when the caller fails later (enable() is
    all-or-nothing): deepest first, each only if it is still an empty directory of ours,
    reached by the same no-symlink walk."""
    for path in reversed(result.created):
        parent, name = os.path.split(path)
        try:
            w, fd = walk_open(parent)
        except OSError:
            continue
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if not (w.blocked or w.missing) and st.st_uid == os.geteuid() \
                    and stat.S_ISDIR(st.st_mode):
                os.rmdir(name, dir_fd=fd)
        except OSError:
            pass  # gone, replaced or not empty: leave it, never force
        finally:
            os.close(fd)


@contextlib.contextmanager
def taken_back_on_error() -> Iterator[list[InitResult]]:
    """`with taken_back_on_error() as made:` append each init() result to `made`; if the
    block raises, what they created is removed (remove_created), so a failed call leaves no
    directory behind."""
    made: list[InitResult] = []
    try:
        yield made
    except BaseException:
        for result in reversed(made):
            if result.ok:
                remove_created(result)
        raise


def may_create_in(folder: str) -> bool:
    """May this user (its effective ids) add a name in `folder`: what `init` needs first, so
    that an audit of a missing path never promises a directory its user cannot make."""
    try:
        return os.access(folder, os.W_OK | os.X_OK,
                         effective_ids=os.access in os.supports_effective_ids)
    except OSError:
        return False
