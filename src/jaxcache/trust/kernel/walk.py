"""Walk a path from `/` with file descriptors, never letting the kernel follow a symlink for us.

Each directory is opened with O_PATH|O_NOFOLLOW|O_DIRECTORY relative to its parent's descriptor,
so what we judge is what we opened. Symlinks are read and expanded by hand, and recorded: the
directory holding a symlink decides where the path goes, so it is part of the trust boundary.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import deque
from typing import NamedTuple

from jaxcache.errors import JaxcacheError
from jaxcache.text import file_type, quoted, safe
from jaxcache.trust.kernel import acl as aclmod
from jaxcache.trust.kernel.acl import Acl, AclFormatError

MAX_SYMLINKS = 40  # the kernel's own limit (ELOOP)
_DIR_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


class WalkError(JaxcacheError):
    """The path cannot name a directory: a file in the middle, a symlink loop, a bad name."""


class Node(NamedTuple):
    """One directory or symlink met on the way, as it was when we opened it."""

    path: str
    kind: str  # "dir" | "symlink"
    uid: int
    gid: int
    mode: int
    dev: int
    ino: int
    parent: int | None  # index of the directory holding it
    acl: Acl | None = None
    default_acl: Acl | None = None
    target: str | None = None  # symlink text
    kernel_writable: bool | None = None  # access(W_OK|X_OK) for our effective ids

    @property
    def identity(self) -> tuple[int, int]:
        return (self.dev, self.ino)


class Walk(NamedTuple):
    requested: str
    nodes: tuple[Node, ...]
    anchor: int  # index of the deepest existing directory reached
    missing: tuple[str, ...]  # components that do not exist yet, below the anchor
    blocked: str | None = None  # why the walk could not go on (fail closed)

    @property
    def exists(self) -> bool:
        return not self.missing and self.blocked is None

    @property
    def anchor_node(self) -> Node:
        return self.nodes[self.anchor]

    @property
    def resolved(self) -> str:
        return _join(self.anchor_node.path, *self.missing)

    def parent_of(self, node: Node) -> Node | None:
        return None if node.parent is None else self.nodes[node.parent]


def _join(base: str, *names: str) -> str:
    path = base
    for name in names:
        path = path.rstrip("/") + "/" + name
    return path


def _components(path: str) -> list[str]:
    return [c for c in path.split("/") if c not in ("", ".")]


def _read_acls(fd: int) -> tuple[Acl | None, Acl | None]:
    where = f"/proc/self/fd/{fd}"
    try:
        return (aclmod.read(where, aclmod.ACCESS, follow=True),
                aclmod.read(where, aclmod.DEFAULT, follow=True))
    except AclFormatError as exc:
        raise WalkError(f"cannot parse the ACL of a directory: {exc}") from exc


def _dir_node(fd: int, path: str, parent: int | None) -> Node:
    st = os.fstat(fd)
    access, default = _read_acls(fd)
    writable = os.access(f"/proc/self/fd/{fd}", os.W_OK | os.X_OK, effective_ids=True)
    return Node(path, "dir", st.st_uid, st.st_gid, st.st_mode, st.st_dev, st.st_ino, parent,
                access, default, None, writable)


def walk(path: str) -> Walk:
    """Resolve an absolute path component by component; never raises for a missing tail."""
    result, fd = walk_open(path)
    os.close(fd)
    return result


def walk_open(path: str) -> tuple[Walk, int]:
    """Like walk(), and also return an O_PATH descriptor of the anchor (the caller closes it)."""
    if not path.startswith("/"):
        raise WalkError(f"internal: walk needs an absolute path, got {quoted(path)}")
    if not os.path.isdir("/proc/self/fd"):
        raise WalkError("/proc is not mounted: cannot inspect descriptors, refusing to guess")
    todo = deque(_components(path))
    cur = os.open("/", _DIR_FLAGS)
    nodes: list[Node] = [_dir_node(cur, "/", None)]
    stack = [0]  # indices of the directories on the current resolved path
    links = 0
    try:
        while todo:
            name = todo.popleft()
            here = nodes[stack[-1]]
            if name == "..":
                if len(stack) > 1:
                    cur = _step_up(cur, stack, nodes)
                continue
            try:
                st = os.stat(name, dir_fd=cur, follow_symlinks=False)
            except FileNotFoundError:
                if ".." in todo:
                    raise WalkError(
                        f"{safe(path)}: '..' after {safe(_join(here.path, name))}, which does "
                        "not exist yet; JAX would create it and then go elsewhere. Give the "
                        "path without '..'") from None
                cur, fd_out = -1, cur
                return Walk(path, tuple(nodes), stack[-1], (name, *todo)), fd_out
            except PermissionError:
                cur, fd_out = -1, cur
                return Walk(path, tuple(nodes), stack[-1], (name, *todo),
                            blocked=f"no permission to look inside {safe(here.path)}"), fd_out
            except OSError as exc:
                raise WalkError(f"cannot look up {safe(_join(here.path, name))}: "
                                f"{exc.strerror}") from exc
            full = _join(here.path, name)
            if stat.S_ISLNK(st.st_mode):
                links += 1
                if links > MAX_SYMLINKS:
                    raise WalkError(f"too many symbolic links (a loop?) at {safe(full)}")
                target = os.readlink(name, dir_fd=cur)
                nodes.append(Node(full, "symlink", st.st_uid, st.st_gid, st.st_mode, st.st_dev,
                                  st.st_ino, stack[-1], target=target))
                if target.startswith("/"):
                    os.close(cur)
                    cur = os.open("/", _DIR_FLAGS)
                    del stack[1:]
                todo.extendleft(reversed(_components(target)))
                continue
            if not stat.S_ISDIR(st.st_mode):
                raise WalkError(not_a_directory(full, st.st_mode))
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=cur)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
                    raise WalkError(f"{safe(full)} changed while it was being audited") from exc
                raise WalkError(f"cannot open {safe(full)}: {exc.strerror}") from exc
            node = _dir_node(fd, full, stack[-1])
            if node.identity != (st.st_dev, st.st_ino):
                os.close(fd)
                raise WalkError(f"{safe(full)} changed while it was being audited")
            os.close(cur)
            cur = fd
            nodes.append(node)
            stack.append(len(nodes) - 1)
        cur, fd_out = -1, cur
        return Walk(path, tuple(nodes), stack[-1], ()), fd_out
    finally:
        if cur >= 0:
            os.close(cur)


def _step_up(cur: int, stack: list[int], nodes: list[Node]) -> int:
    """Go to the parent the kernel would use for '..', checking it is the one we came through."""
    fd = os.open("..", _DIR_FLAGS, dir_fd=cur)
    os.close(cur)
    stack.pop()
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != nodes[stack[-1]].identity:
        os.close(fd)
        raise WalkError(f"{safe(nodes[stack[-1]].path)} changed while it was being audited")
    return fd


def not_a_directory(path: str, mode: int) -> str:
    """'PATH is not a directory (a regular file)': ls, audit, seal and verify say it alike."""
    return f"{safe(path)} is not a directory ({file_type(mode)})"
