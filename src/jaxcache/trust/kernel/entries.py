"""Inventory of a cache directory: what JAX would read, who owns it, and what looks wrong.

JAX names entries `<module>-<64 hex>-cache`, keeps `<key>-atime` and `.lockfile` when a size limit
is set, and on GPU writes `xla_gpu_per_fusion_autotune_cache_dir/`; a sealed cache adds
`<entry>.sig` (or `<key>.sig` where that would not fit), co-signatures `<entry>.<key id>.sig`
by further keys and a `.used` marker beside each entry jaxcache wrote (the same two forms);
earlier versions also left lock files there (`.jaxcache-lock-<uid>`, `.jaxcache-lock`). Anything
else is unexpected. Only `<module>-<64 hex>-cache` is a compiled entry; the rest is JAX's,
XLA's or jaxcache's bookkeeping beside them, counted as such (KINDS), never as entries. The
sealed cache's names are these (seal/publishing/tier_names.py takes them from here).
"""

from __future__ import annotations

import os
import stat
import time
from typing import NamedTuple

from jaxcache.trust.kernel import acl as aclmod
from jaxcache.trust.kernel import principals
from jaxcache.trust.kernel.acl import AclFormatError
from jaxcache.trust.kernel.principals import Accounts, Grant

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

XLA_SUBCACHE = "xla_gpu_per_fusion_autotune_cache_dir"
_HEX = frozenset("0123456789abcdef")
_SUFFIXES = {"-cache": "cache", "-atime": "atime"}
SIGNATURE_SUFFIX = ".sig"  # jaxcache's sealed cache (seal/signing/signature_rule.py)
USED_SUFFIX = ".used"  # jaxcache wrote the entry; its mtime is the last use (publishing/lru.py)
_SIDECARS = {SIGNATURE_SUFFIX: "signature", USED_SUFFIX: "used"}


class KindWords(NamedTuple):
    """What one kind of file is called, one and many, and whose bookkeeping it is (None: a
    compiled entry, or a file nobody's rules name)."""

    one: str
    many: str
    whose: str | None = None

    def phrase(self, n: int) -> str:
        return f"{n} {self.one if n == 1 else self.many}" + \
            (f" ({self.whose})" if self.whose else "")


# every kind classify() gives, in the order a count lists them; "cache" is the compiled entry
COMPILED = KindWords("compiled entry", "compiled entries")
KINDS = {"cache": COMPILED,
         "signature": KindWords("signature", "signatures", "jaxcache's"),
         "used": KindWords("last-use mark", "last-use marks", "jaxcache's"),
         "atime": KindWords("access-time file", "access-time files", "JAX's"),
         "lockfile": KindWords("lock file", "lock files"),
         "xla-subcache": KindWords("XLA sub-cache file", "XLA sub-cache files", "XLA's"),
         "unexpected": KindWords("other file", "other files")}
# JAX's (max_size), and the sealed cache's of earlier versions: `.jaxcache-lock-<uid>`, one per
# account, and `.jaxcache-lock`, one shared (its locks are in each account's state folder now:
# seal/publishing/locks.py; verify still judges these names)
_LOCKS = (".lockfile", ".jaxcache-lock")
_ACCOUNT_LOCK = ".jaxcache-lock-"


class Entry(NamedTuple):
    name: str  # relative to the cache directory
    kind: str  # cache | atime | signature | used | lockfile | xla-subcache | unexpected
    module: str | None
    key: str | None
    type: str  # file | dir | symlink | other
    size: int
    uid: int
    owner: str
    mode: int
    age_s: float
    nlink: int
    has_acl: bool
    flags: tuple[str, ...]
    writers: tuple[Grant, ...]  # who can rewrite it; computed only when something is off
    identity: tuple[int, int, int, int] = (0, 0, 0, 0)  # dev, ino, mtime_ns, ctime_ns (origin.py)
    atime_ns: int = 0  # its last read as the filesystem keeps it (gc's listing only; 0: not read)


class Elided(NamedTuple):
    """Entries an inventory stands for without listing them: a directory the audit found
    unchanged since it judged every entry (trust/judgement/shortcut.py), whose plain entries
    (regular files of yours, nothing flagged, compiled entries of yours by this build, JAX's
    access-time and lock files) are counted, not listed. `names()` lists every file of the
    directory with its size when asked (None: what was remembered is gone)."""

    compiled: int
    atimes: int
    locks: int
    bytes: int
    names: Callable[[], dict[str, int] | None]
    stamp: tuple[int, ...]  # the directory as it was judged: dev, ino, mtime, ctime (ns), nlink

    def count(self, kind: object, /) -> int:  # tuple's count, as the kinds' counter
        counted = {"cache": self.compiled, "atime": self.atimes, "lockfile": self.locks}
        return counted.get(kind, 0) if isinstance(kind, str) else 0

    @property
    def files(self) -> int:
        return self.compiled + self.atimes + self.locks


class Inventory(NamedTuple):
    entries: tuple[Entry, ...]
    unreadable: str | None = None
    elided: Elided | None = None  # what it stands for without listing (Elided)

    @property
    def total_bytes(self) -> int:
        return sum(e.size for e in self.entries if e.type == "file") + (
            self.elided.bytes if self.elided is not None else 0)

    def count(self, kind: object, /) -> int:  # tuple's count, as the kinds' counter
        return sum(1 for e in self.entries if e.kind == kind) + (
            self.elided.count(kind) if self.elided is not None else 0)

    def kinds(self) -> dict[str, int]:
        """How many of each kind, those present, in KINDS' order."""
        found = {k: self.count(k) for k in KINDS}
        return {k: n for k, n in found.items() if n}

    def described(self) -> str:
        """'3 compiled entries, 3 signatures (jaxcache's), ...': the compiled entries always
        named first, each other kind present after them."""
        found = self.kinds()
        return ", ".join([COMPILED.phrase(found.pop("cache", 0)),
                          *(KINDS[k].phrase(n) for k, n in found.items())])


def classify(name: str) -> tuple[str, str | None, str | None]:
    # <module>-<64 hex>-cache|atime first, by slicing: nearly every name of a big cache, and
    # no lock file, sub-cache or sidecar name has that shape
    suffix_kind = _SUFFIXES.get(name[-6:])
    hexkey = name[-70:-6]
    if suffix_kind and len(name) > 71 and name[-71] == "-" and _HEX.issuperset(hexkey):
        return suffix_kind, name[:-71], hexkey
    uid = name[len(_ACCOUNT_LOCK):] if name.startswith(_ACCOUNT_LOCK) else ""
    if name in _LOCKS or (uid.isdigit() and uid.isascii()):
        return "lockfile", None, None
    if name == XLA_SUBCACHE:
        return "xla-subcache", None, None
    for suffix, sidecar in _SIDECARS.items():  # <entry><suffix>, or <key><suffix>
        if name.endswith(suffix):
            stem = name[:-len(suffix)]
            if sidecar == "signature" and len(stem) > 17 and stem[-17] == "." and \
                    _HEX.issuperset(stem[-16:]):
                stem = stem[:-17]  # a co-signature: <entry>.<16 hex key id>.sig
            kind, module, key = classify(stem if stem.endswith("-cache") else stem + "-cache")
            return (sidecar, module, key) if kind == "cache" else ("unexpected", None, None)
    return "unexpected", None, None


def _type(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def inventory(dir_fd: int, path: str, me: frozenset[int], accounts: Accounts,
              now: float | None = None, prefix: str = "") -> Inventory:
    """List a directory through its descriptor. `me` are the uids that count as ours (we, root)."""
    now = time.time() if now is None else now
    out: list[Entry] = []
    try:
        scan = list(os.scandir(dir_fd))
    except PermissionError:
        return Inventory((), unreadable="no permission to list the cache directory")
    base = acl_base(dir_fd, path, prefix)
    for item in scan:
        try:
            st = item.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue  # removed since the listing (JAX's eviction, a cleanup): nothing to load
        e = entry(item.name, st, base, path, me, accounts, now, prefix)
        if e is None:
            continue  # removed meanwhile, as above
        out.append(e)
        if e.type == "dir" and not prefix and e.kind == "xla-subcache":
            out.extend(_subcache(dir_fd, path, item.name, me, accounts, now))
    out.sort(key=lambda e: e.name)
    return Inventory(tuple(out))


def acl_base(dir_fd: int, path: str, prefix: str = "") -> str:
    """Where entry() reads ACLs by name: under the resolved directory path, half the cost of
    going through /proc/self/fd. If the directory were swapped meanwhile, the audit's second
    walk reports the path as changed; paths near PATH_MAX go through the descriptor."""
    by_path = path.rstrip("/") + "/" + prefix
    return by_path if len(by_path) < 3000 else f"/proc/self/fd/{dir_fd}/"


def entry(item: str, st: os.stat_result, base: str, path: str, me: frozenset[int],
          accounts: Accounts, now: float, prefix: str = "", acl_read: bool = True
          ) -> Entry | None:
    """One listed name judged from its lstat: kind, flags and, where something is off, who can
    rewrite it. `base` is where its ACL is read by name (inventory()); `acl_read=False`: its ACL
    is known to be none (trust/judgement/shortcut.py: an inode whose change time is the one
    judged before). None: removed meanwhile."""
    name = prefix + item
    kind, module, key = classify(item) if not prefix else ("xla-subcache", None, None)
    ftype = _type(st.st_mode)
    flags = []
    acl = None
    if ftype != "symlink" and acl_read:
        try:
            acl = aclmod.read(base + item, aclmod.ACCESS)
        except FileNotFoundError:
            return None
        except (AclFormatError, OSError):
            flags.append("acl-unreadable")
    has_acl = acl is not None and acl.is_extended
    if st.st_uid not in me:
        flags.append("foreign-owner")
    if ftype != "symlink" and st.st_mode & 0o022:
        flags.append("group-writable" if st.st_mode & 0o020 else "other-writable")
        if st.st_mode & 0o022 == 0o022:
            flags[-1] = "group+other-writable"
    if has_acl:
        flags.append("acl")
    if ftype == "file" and st.st_nlink > 1:
        flags.append("hard-link")
    if ftype == "symlink":
        flags.append("symlink")
    elif ftype == "other":
        flags.append("not-regular")
    elif ftype == "dir" and kind != "xla-subcache":
        flags.append("unexpected-dir")
    if kind == "unexpected":
        flags.append("unexpected-name")
    grants: tuple[Grant, ...] = ()
    reads = ftype == "file" or kind == "xla-subcache"  # what JAX or XLA would read
    if reads and (st.st_uid not in me or st.st_mode & 0o022 or has_acl):
        want = principals.WX if ftype == "dir" else aclmod.WRITE
        grants = principals.writers(f"{path.rstrip('/')}/{name}", st.st_uid, st.st_gid,
                                    st.st_mode, acl, accounts, want)
    return Entry(name, kind, module, key, ftype, st.st_size, st.st_uid,
                 accounts.user_name(st.st_uid), st.st_mode, max(0.0, now - st.st_mtime),
                 st.st_nlink, has_acl, tuple(flags), grants,
                 (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns))


def inventory_at(path_fd: int, path: str, me: frozenset[int],
                 accounts: Accounts) -> Inventory:
    """Inventory of the directory behind an O_PATH descriptor (as the walk leaves it)."""
    try:
        rd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=path_fd)
    except PermissionError:
        return Inventory((), unreadable="no permission to list the cache directory")
    try:
        return inventory(rd, path, me, accounts)
    finally:
        os.close(rd)


def _subcache(dir_fd: int, path: str, name: str, me: frozenset[int], accounts: Accounts,
              now: float) -> tuple[Entry, ...]:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
    try:
        sub = os.open(name, flags, dir_fd=dir_fd)
    except OSError:
        return ()
    try:
        return inventory(sub, path, me, accounts, now, prefix=name + "/").entries
    finally:
        os.close(sub)
