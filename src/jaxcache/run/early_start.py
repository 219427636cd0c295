"""May `jaxcache run` start the job while the full audit is still running?

The audit's own imports cost more start-up than `jaxcache run` may add to a job, so when it
is safe the job starts at once and the audit runs once the job begins to import jax, beside
JAX's own import (probe/launch.py: never, for a job that does not). Safe means both of:

1. the job's first process certainly loads the probe: a Python 3 interpreter (its executable,
   not a script by that name, which runs code of its own first) started without -S, -I or -E
   (which would skip sitecustomize or PYTHONPATH);
2. the directory already looks private by a few system calls: it exists on a local filesystem
   mounted straight from a local disk or memory (not an overlay, a bind mount, a loop image or a
   stacked device: what backs those is judged by the full audit first), it and every ancestor
   are real directories (no symlinks) owned by you or root, not writable by group or others
   (ancestors may be sticky, like /tmp), without ACLs; its entries (at most 512 of them, or it
   is not a quick check) are yours or root's, not writable by others, not symlinks or hard
   links; no policy file and no sealed cache.

Either way JAX never sees the directory before the full audit passed: the job starts without
it, and the probe holds JAX at `import jax` until jaxcache says which cache to use (the
gate, probe/launch.py). JAX has read its environment by then: the probe puts every variable
the gate grants into JAX's config (jaxcompat.put_in_force), or turns the cache off.
Anything else (a shell script, a shared or new directory, a policy) is audited first and
only then started, as before. If the full audit refuses a directory
that looked private (it also looks for other users' processes holding a write handle on the
cache, trust/kernel/open_handles.py, which no quick check could), the job is stopped, at the latest
when it imports jax.
"""

from __future__ import annotations

import errno
import os
import stat

_LOCAL_FS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "bcachefs",
                       "jfs", "tmpfs"})
_MAX_ENTRIES = 512
_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")


# Names matched without patterns: compiling two costs every early start ~0.3 ms


def _digits(text: str, at: int) -> int:
    """Where the run of decimal digits starting at `at` ends."""
    while at < len(text) and text[at].isdecimal():
        at += 1
    return at


def is_python(name: str) -> bool:
    """`python(\\d+(\\.\\d+)*)?`: python, python3, python3.11, ..."""
    rest = name[6:]
    return name.startswith("python") and (
        not rest or all(part and part.isdecimal() for part in rest.split(".")))


def is_local_disk(name: str) -> bool:
    """`(vd|sd|hd|xvd)[a-z]+\\d*|nvme\\d+n\\d+(p\\d+)?|mmcblk\\d+(p\\d+)?`: a local disk or
    its partition, by its kernel name."""
    for prefix in ("vd", "sd", "hd", "xvd"):
        if name.startswith(prefix):
            at = len(prefix)
            letters = at
            while letters < len(name) and name[letters] in _LOWER:
                letters += 1
            return letters > at and _digits(name, letters) == len(name)
    if name.startswith("nvme"):
        at = _digits(name, 4)
        if at == 4 or not name.startswith("n", at):
            return False
        end = _digits(name, at + 1)
        return end > at + 1 and _partition(name, end)
    if name.startswith("mmcblk"):
        at = _digits(name, 6)
        return at > 6 and _partition(name, at)
    return False


def _partition(name: str, at: int) -> bool:
    """`(p\\d+)?` from `at` to the end."""
    if at == len(name):
        return True
    end = _digits(name, at + 1)
    return name[at] == "p" and end > at + 1 and end == len(name)


def loads_probe(exe: str, args: list[str]) -> bool:
    """Is this a Python interpreter that will import our sitecustomize before the program?"""
    real = os.path.realpath(exe)
    names = {os.path.basename(exe), os.path.basename(real)}
    if not any(is_python(n) for n in names) or any(n.startswith("python2") for n in names):
        return False  # Python 2 cannot parse the probe: it would run the program unheld
    if not _machine_code(real):
        return False  # a script by that name (a pyenv shim, a wrapper) runs before any probe
    if _path_file_beside(exe) or _path_file_beside(real):
        return False  # a ._pth file makes it isolated: PYTHONPATH, hence the probe, ignored
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-", "--") or not arg.startswith("-"):
            return True  # the script (or stdin): interpreter options end here
        if arg.startswith("--"):
            i += 2 if arg == "--check-hash-based-pycs" else 1
            continue
        for j, letter in enumerate(arg[1:]):
            if letter in "SIE":
                return False
            if letter in "cm":
                return True  # -c CMD / -m MOD: the rest is the program's
            if letter in "WX":
                i += 1 if j == len(arg) - 2 else 0  # its value is the next argument
                break
        i += 1
    return True


def _machine_code(path: str) -> bool:
    """An ELF executable: the interpreter itself, not a script that runs something first."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return os.read(fd, 4) == b"\x7fELF"
    except OSError:
        return False
    finally:
        os.close(fd)


def _path_file_beside(exe: str) -> bool:
    """A `._pth` file beside the interpreter (it then runs isolated, ignoring PYTHONPATH)."""
    try:
        return any(name.endswith("._pth") for name in os.listdir(os.path.dirname(exe) or "."))
    except OSError:
        return True  # cannot tell: not known to load the probe


def _has_acl(path: str, names: tuple[str, ...]) -> bool:
    for name in names:
        try:
            os.getxattr(path, name, follow_symlinks=False)
            return True
        except OSError as exc:
            if exc.errno not in (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP):
                return True  # cannot tell: not "looks private"
    return False


def looks_private(path: str) -> bool:
    """A cheap, conservative guess that the full audit will say PRIVATE (never the verdict)."""
    path = os.path.abspath(path)
    me = os.geteuid()
    prefix = "/"
    parts = [p for p in path.split("/") if p]
    for depth in range(len(parts) + 1):
        if depth:
            prefix = os.path.join(prefix, parts[depth - 1])
        try:
            st = os.lstat(prefix)
        except OSError:
            return False
        last = depth == len(parts)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid not in (0, me):
            return False
        if st.st_mode & 0o022 and (last or not st.st_mode & stat.S_ISVTX):
            return False
        acls = ("system.posix_acl_access", "system.posix_acl_default") if last else \
            ("system.posix_acl_access",)
        if _has_acl(prefix, acls):
            return False
    return _local_fs(st.st_dev, path) and _entries_look_private(path, me)


def _local_fs(dev: int, path: str = "/") -> bool:
    """Is the mount holding `path` (on `dev`) a filesystem whose permission bits bound its
    writers, mounted from its own root (not a bind), on memory or straight on a local disk
    (not a loop image or stacked device)?"""
    want = f"{os.major(dev)}:{os.minor(dev)}"
    best: list[str] | None = None
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 4:  # the kernel writes ' ', '\t', '\n' and '\\' as \ooo
                    fields[3], fields[4] = _unescaped(fields[3]), _unescaped(fields[4])
                if len(fields) > 4 and fields[2] == want and "-" in fields and _under(
                        path, fields[4]) and (best is None or len(fields[4]) >= len(best[4])):
                    best = fields
    except OSError:
        return False
    if best is None:
        return False
    at = best.index("-")
    tail = best[at + 1:]
    return bool(tail) and tail[0] in _LOCAL_FS and _own_root(best[3], tail) and _plain_disk(dev)


def _unescaped(field: str) -> str:
    """A mountinfo path with its octal escapes (\\040 for a space, ...) read back."""
    if "\\" not in field:
        return field
    out, i = [], 0
    while i < len(field):
        code = field[i + 1:i + 4]
        if field[i] == "\\" and len(code) == 3 and all(c in "01234567" for c in code):
            out.append(chr(int(code, 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def _under(path: str, point: str) -> bool:
    return point == "/" or path == point or path.startswith(point + "/")


def _own_root(root: str, tail: list[str]) -> bool:
    """Mounted from the filesystem's root (a btrfs subvolume counts), not a bind mount."""
    return root == "/" or (tail[0] == "btrfs" and len(tail) > 2
                           and f"subvol={root}" in tail[2].split(","))


def _plain_disk(dev: int) -> bool:
    """Memory or anonymous devices (tmpfs, btrfs), or a local disk or its partition by name."""
    if os.major(dev) == 0:
        return True
    try:
        name = os.path.basename(os.readlink(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}"))
    except OSError:
        return False
    return is_local_disk(name)


def _entries_look_private(path: str, me: int) -> bool:
    try:
        with os.scandir(path) as entries:
            for count, e in enumerate(entries):
                if count >= _MAX_ENTRIES:
                    return False  # a big cache: the full audit judges it before the job starts
                st = e.stat(follow_symlinks=False)
                if (stat.S_ISLNK(st.st_mode) or st.st_uid not in (0, me)
                        or st.st_mode & 0o022
                        or (stat.S_ISREG(st.st_mode) and st.st_nlink > 1)):
                    return False
    except OSError:
        return False
    return True


def allowed(argv: list[str], exe: str, cache_dir: str, *, policy_in_use: bool,
            sealed: bool) -> bool:
    return (not policy_in_use and not sealed and loads_probe(exe, argv[1:])
            and looks_private(cache_dir))
