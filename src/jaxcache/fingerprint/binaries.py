"""The build: BLAKE3 digests of the shared objects of jaxlib and the installed plugins.

Which files: every shared object (`*.so`, `*.so.N`) under the folders of the packages that
hold XLA's code: jaxlib, the PJRT plugins (the `jax_plugins` namespace, the CUDA/ROCm plugin
packages) and libtpu. They are found without importing them (importlib's finders; a package a
process already imported is taken from `sys.modules`, so a job is judged by what it loaded).
Links are followed, as the dynamic loader does. Not covered: the CUDA libraries of the `nvidia`
wheels and the driver (the platform version in JAX's key names the CUDA and driver versions),
and FFI libraries a job loads itself.

Each digest comes from the memo (memo.py) while the file's identity is unchanged, or from the
install's memo beside the package folders where its owner kept one; a new or changed
file is hashed, and `on_hashing(bytes, files, for_all)` is told first, so a person sees why the
first run after an install takes longer, and whether the next user of the install will too.
"""

from __future__ import annotations

import os
import stat
import sys

from jaxcache.fingerprint.memo import (
    FoundRoots,
    Listing,
    Memo,
    has_install,
    identity,
    keeps_install,
    load_install,
    save_install,
)
from jaxcache.fingerprint.memo_file import FOUND_KEY, Identity
from jaxcache.fingerprint.model import Binary, Build

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from importlib.machinery import ModuleSpec

# the top-level packages whose shared objects compile or run XLA programs
PACKAGES = ("jaxlib", "jax_plugins", "libtpu", "libtpu_nightly", "jax_cuda12_plugin",
            "jax_cuda13_plugin", "jax_rocm60_plugin", "jax_rocm7_plugin")
_CHUNK = 16 << 20
_MAX_FILES = 4096  # a package folder with more shared objects than this is not a jaxlib


def roots(memo: Memo | None = None, packages: tuple[str, ...] = PACKAGES
          ) -> list[tuple[str, str]]:
    """(package, folder) of each package this Python has loaded (its `__path__`: a job is
    judged by what it runs) or would load. Where it would load them from is kept in the memo
    under sys.path and the mtime of each of its folders (installing or removing a package adds
    or removes a name in one of them): asking importlib's finders for eight packages costs a
    warm run ~1 ms."""
    loaded = {n: _folders(getattr(sys.modules[n], "__path__", None))
              for n in packages if sys.modules.get(n) is not None}
    rest = tuple(n for n in packages if n not in loaded)
    key = FOUND_KEY + "\0".join(sys.path) + "\0\0" + ",".join(rest)
    stamp = _stamp()
    kept = memo.found_roots(key) if memo is not None else None
    if kept is not None and kept.stamp == stamp:
        found = list(kept.roots)
    else:
        found = _find(rest)
        if memo is not None:
            memo.remember_root(key, FoundRoots(stamp, tuple(found)))
    mine = [(n, f) for n, folders in loaded.items() for f in folders]
    return sorted(mine + found, key=lambda r: packages.index(r[0]))


def _folders(paths: object) -> list[str]:
    """The existing folders of a package's search path (a list, or a namespace package's
    _NamespacePath), resolved."""
    from collections.abc import Iterable

    if not isinstance(paths, Iterable) or isinstance(paths, (str, bytes)):
        return []
    return [os.path.realpath(f) for f in paths if isinstance(f, str) and os.path.isdir(f)]


def _stamp() -> tuple[int, ...]:
    out = []
    for entry in sys.path:
        try:
            out.append(os.stat(entry or ".").st_mtime_ns)
        except OSError:
            out.append(-1)
    return tuple(out)


def _find(packages: tuple[str, ...]) -> list[tuple[str, str]]:
    """Where importlib's finders would load these packages from (none is imported)."""
    found: list[tuple[str, str]] = []
    for name in packages:
        spec = _spec_of(name)
        found.extend((name, f) for f in _folders(
            spec.submodule_search_locations if spec is not None else None))
    return found


def _spec_of(name: str) -> ModuleSpec | None:
    """importlib.util.find_spec(name) for a top-level name, without importing importlib.util
    (it brings warnings and contextlib: ~4 ms of every `jaxcache run`): the module's own spec
    if it is imported, else the first finder on sys.meta_path that knows it (the finder
    protocol every import uses, PEP 451)."""
    if name in sys.modules:  # imported, or blocked (None: importing it fails)
        module = sys.modules[name]
        return None if module is None else getattr(module, "__spec__", None)
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        try:
            spec: ModuleSpec | None = find(name, None)
        except (ImportError, ValueError):
            return None
        if spec is not None:
            return spec
    return None


def _is_shared_object(name: str) -> bool:
    return name.endswith(".so") or ".so." in name


def _listing(folder: str) -> Listing:
    """The shared objects under `folder` (relative paths) and each folder's mtime, walked
    without following links to folders; the version of the distribution beside it."""
    files: list[str] = []
    dirs: dict[str, int] = {}
    stack = [""]
    while stack and len(files) < _MAX_FILES:
        rel = stack.pop()
        here = os.path.join(folder, rel) if rel else folder
        try:
            dirs[rel] = os.stat(here).st_mtime_ns
            entries = list(os.scandir(here))
        except OSError:
            continue
        for e in entries:
            sub = os.path.join(rel, e.name) if rel else e.name
            try:
                if e.is_dir(follow_symlinks=False):
                    stack.append(sub)
                elif _is_shared_object(e.name) and e.is_file():
                    files.append(sub)
            except OSError:
                continue
    return Listing(tuple(dirs.items()), tuple(sorted(files)), _version(folder))


def _version(folder: str) -> str:
    """The version of the distribution installed beside a package folder, from the name of
    its `.dist-info` folder (reading metadata costs milliseconds; this costs one listing)."""
    parent, name = os.path.split(folder.rstrip("/"))
    want = name.replace("_", "-").lower()
    try:
        for entry in os.listdir(parent):
            if entry.endswith(".dist-info"):
                dist, _, version = entry[:-len(".dist-info")].rpartition("-")
                if dist.replace("_", "-").lower() == want:
                    return version
    except OSError:
        pass
    return ""


def _fresh(listing: Listing | None, folder: str) -> bool:
    if listing is None or all(rel for rel, _ in listing.dirs):
        return False  # the package folder itself is always among the folders listed
    for rel, mtime in listing.dirs:
        try:
            if os.stat(os.path.join(folder, rel) if rel else folder).st_mtime_ns != mtime:
                return False
        except OSError:
            return False
    return True


def hash_file(path: str) -> tuple[str, os.stat_result] | None:
    """The BLAKE3 digest of a file's bytes and its identity when read (None: unreadable or
    changed while it was read)."""
    import blake3

    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)  # a FIFO never blocks
    except OSError:
        return None
    try:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode):
            return None
        h = blake3.blake3(max_threads=blake3.blake3.AUTO)
        while True:
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                break
            h.update(chunk)
        after = os.fstat(fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    if identity(before) != identity(after):
        return None
    return h.hexdigest(), after


def build(found: list[tuple[str, str]], memo: Memo,
          on_hashing: Callable[[int, int, bool], None] | None = None) -> Build | None:
    """The build of these package folders (None: no jaxlib among them). on_hashing(bytes,
    files, for_all): for_all when what is hashed is kept for every user of the install."""
    if not any(name == "jaxlib" for name, _ in found):
        return None
    wanted: list[tuple[str, str, str]] = []  # (package, relative path, absolute path)
    versions: dict[str, str] = {}
    site_of: dict[str, str] = {}  # absolute path -> the folder holding its package folder
    for name, folder in found:
        listing = memo.listing(folder)
        if listing is None or not _fresh(listing, folder):
            listing = _listing(folder)
            memo.remember_root(folder, listing)
        if listing.version:
            versions[name] = listing.version
        for rel in listing.files:
            wanted.append((name, rel, os.path.join(folder, rel)))
            site_of[wanted[-1][2]] = os.path.dirname(folder)
    known: dict[str, tuple[str, int]] = {}
    todo: list[tuple[str, os.stat_result]] = []
    installs: dict[str, dict[str, tuple[Identity, str]]] = {}  # site -> its install memo
    for _, _, path in wanted:
        try:
            st = os.stat(path)
        except OSError:
            continue
        ident = identity(st)
        digest = memo.digest(path, ident)
        if digest is None:  # not yours yet: the install's memo, where its owner kept one
            site = site_of[path]
            if site not in installs:
                installs[site] = load_install(site)
            vouched = installs[site].get(path)
            if vouched is not None and vouched[0] == ident:
                digest = vouched[1]
                memo.remember(path, ident, digest)
        if digest is not None:
            known[path] = (digest, st.st_size)
        else:
            todo.append((path, st))
    sites = sorted({site_of[path] for path, _ in todo})
    if todo and on_hashing is not None:
        on_hashing(sum(st.st_size for _, st in todo), len(todo),
                   all(keeps_install(s) for s in sites))
    for path, _ in todo:
        got = hash_file(path)
        if got is not None:
            known[path] = (got[0], got[1].st_size)
            memo.remember(path, identity(got[1]), got[0])
    for site in sorted(set(site_of.values())):  # its owner keeps the install's memo, whole
        if (site in sites or not has_install(site)) and keeps_install(site):
            save_install(site, {**installs.get(site, {}), **{
                p: v for p, v in memo.files.items() if site_of.get(p) == site}})
    parts = tuple(sorted((Binary(name, rel, known[path][1], known[path][0])
                          for name, rel, path in wanted if path in known),
                         key=lambda b: (b.package, b.path)))
    if not parts:  # no shared object read: nothing to tell one build from another by
        return None
    return Build(memo.digest_of(over(parts)), tuple(sorted(versions.items())), parts)


def over(parts: tuple[Binary, ...]) -> str:
    """The text the build's digest is taken over: a line per shared object."""
    return "\n".join(f"{p.package}\t{p.path}\t{p.digest}" for p in parts)
