"""The digest memo: each shared object's BLAKE3 digest, kept by its identity in the state folder.

Hashing jaxlib (350 MB on 0.10.2) costs a fraction of a second; a warm `jaxcache run` may add
only a millisecond or two. So a digest is computed once per install and kept under the file's
path, device, inode, size, mtime and ctime: a reinstall, an in-place rebuild or a single
appended byte changes one of them (ctime cannot be set back by anyone but the kernel), and the
file is hashed again. The listing of each package folder is kept too, under its folders' mtimes,
so a warm run stats a few dozen paths and reads no directory.

The memo lives in the user's state folder (`<state>/fingerprint.memo`), reached from `/` one
component at a time with O_NOFOLLOW, every folder on the way yours or root's and writable by
nobody else (or sticky): a memo that others could rewrite would let them name your build. Where
that does not hold, nothing is read or kept, and every run hashes (`Memo.usable` is False and
`Memo.why` says why). Writes go to a temporary name and are renamed into place, so a reader
never sees half a memo; two writers at once leave one whole memo, the last.
"""

from __future__ import annotations

import json
import os
import stat

from jaxcache.fingerprint.memo_file import FORMAT, FoundRoots, Identity, Listing, MemoFile

__all__ = ["FORMAT", "INSTALL_NAME", "MAX_BYTES", "NAME", "FoundRoots", "Identity", "Listing",
           "Memo", "folder", "has_install", "identity", "keeps_install", "load", "load_install",
           "save", "save_install"]

NAME = "fingerprint.memo"
MAX_BYTES = 4 << 20
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def identity(st: os.stat_result) -> Identity:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class Memo:
    """What the memo file held (empty when there was none or it was unreadable)."""

    def __init__(self, folder: str | None, why: str = "") -> None:
        self.folder = folder  # None: not usable
        self.why = why
        self.files: dict[str, tuple[Identity, str]] = {}
        self.roots: dict[str, Listing | FoundRoots] = {}
        self.derived: dict[str, str] = {}  # text -> its BLAKE3 digest (the build's, the id's)
        self.changed = False

    @property
    def usable(self) -> bool:
        return self.folder is not None

    def digest(self, path: str, ident: Identity) -> str | None:
        known = self.files.get(path)
        return known[1] if known is not None and known[0] == ident else None

    def remember(self, path: str, ident: Identity, digest: str) -> None:
        if self.files.get(path) != (ident, digest):
            self.files[path] = (ident, digest)
            self.changed = True

    def digest_of(self, text: str) -> str:
        """BLAKE3 of `text` (hex), kept: blake3 costs a warm run ~2 ms just to import."""
        found = self.derived.get(text)
        if found is None:
            import blake3

            found = blake3.blake3(text.encode("utf-8", "surrogateescape")).hexdigest()
            if len(self.derived) > 64:  # old builds' lines: keep the memo small
                self.derived.clear()
            self.derived[text] = found
            self.changed = True
        return found

    def listing(self, folder: str) -> Listing | None:
        kept = self.roots.get(folder)
        return kept if isinstance(kept, Listing) else None

    def found_roots(self, key: str) -> FoundRoots | None:
        kept = self.roots.get(key)
        return kept if isinstance(kept, FoundRoots) else None

    def remember_root(self, key: str, kept: Listing | FoundRoots) -> None:
        self.roots[key] = kept
        self.changed = True


def folder() -> str:
    from jaxcache.userdirs import user_dir

    return user_dir("state")


def _walk(path: str, create: bool) -> int:
    """An O_DIRECTORY descriptor of `path` (absolute, no links in it), reached one component
    at a time with O_NOFOLLOW, each folder yours or root's and not writable by others unless
    sticky; missing ones made 0700 when `create`. OSError or PermissionError (why) if not."""
    me = os.geteuid()
    fd = os.open("/", _DIR)
    try:
        for part in [p for p in path.split("/") if p]:
            try:
                nfd = os.open(part, _DIR, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:  # noqa: SIM105 (contextlib's import costs every `run` ~0.5 ms)
                    os.mkdir(part, 0o700, dir_fd=fd)
                except FileExistsError:
                    pass
                nfd = os.open(part, _DIR, dir_fd=fd)
            os.close(fd)
            fd = nfd
            st = os.fstat(fd)
            if st.st_uid not in (0, me):
                raise PermissionError(f"{part} belongs to uid {st.st_uid}")
            if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
                raise PermissionError(f"{part} can be written by others")
        st = os.fstat(fd)
        if st.st_uid != me or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise PermissionError("the state folder is not yours alone")
        return fd
    except BaseException:
        os.close(fd)
        raise


def load(where: str | None = None) -> Memo:
    """The memo of the state folder `where` (default: the user's), or an empty one."""
    path = os.path.realpath(where or folder())
    try:
        dfd = _walk(path, create=False)
    except FileNotFoundError:
        return Memo(path)  # made on the first save
    except OSError as exc:
        return Memo(None, f"{path}: {exc.strerror or exc}")
    memo = Memo(path)
    try:
        # only a file of ours (or root's) that no one else can write: another's digests would
        # name the build (ignored, as a link or special file is, and replaced on save)
        data = _read_kept(dfd, NAME, os.geteuid())
    finally:
        os.close(dfd)
    if data is not None:
        _parse(data, memo)
    return memo


def _read_kept(dfd: int, name: str, owner: int) -> bytes | None:
    """The bytes of `name` in the folder `dfd` where it is a regular file (no link followed) of
    root's or `owner`'s that no group or other may write, at most MAX_BYTES; else None."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dfd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)  # before any read: a folder there opens, and reading it fails
        if not stat.S_ISREG(st.st_mode) or st.st_uid not in (0, owner) or \
                st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return None
        data = b""
        while len(data) <= MAX_BYTES and (chunk := os.read(fd, MAX_BYTES + 1 - len(data))):
            data += chunk
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if len(data) <= MAX_BYTES else None


def _parse(data: bytes, memo: Memo) -> None:
    """Fill `memo` from the file's bytes; anything malformed is dropped (it is re-hashed)."""
    got = MemoFile.parse(data)
    if got is not None:
        memo.files, memo.roots, memo.derived = got.files, got.roots, got.derived


def save(memo: Memo) -> None:
    """Keep what changed; silently nothing where the folder is not usable or not writable
    (the next run hashes again: slower, never wrong)."""
    if not memo.usable or not memo.changed or memo.folder is None:
        return
    doc = MemoFile(memo.files, memo.roots, memo.derived).to_json()
    data = json.dumps(doc, sort_keys=True).encode()
    if len(data) > MAX_BYTES:
        return
    try:
        dfd = _walk(memo.folder, create=True)
    except OSError:
        return
    try:
        if _replace(dfd, NAME, data, 0o600):
            memo.changed = False
    finally:
        os.close(dfd)


def _replace(dfd: int, name: str, data: bytes, mode: int) -> bool:
    """Write `name` in the folder `dfd` whole: a temporary name of this process's, `mode`
    whatever the umask, renamed into place (a reader sees the old file or the new one)."""
    tmp = f".{name}.{os.getpid()}.tmp"
    made = False
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     mode, dir_fd=dfd)
        made = True
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(data)
        os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        return True
    except OSError:
        if made:  # only what this process created
            try:  # noqa: SIM105 (as above: no contextlib)
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
        return False


# The install's memo: the digests of an install's shared objects kept beside it, so that a
# second user of one install (a team's venv, a system Python) does not hash it again. It lives
# in the folder that holds the package folders (site-packages), `INSTALL_NAME`, and is read
# only where whoever could rewrite it could rewrite the files it vouches for anyway: a regular
# file no group or other may write, owned by root or by the folder's owner (who can rename the
# package folders away), naming only files under that folder. Anyone else who can write the
# folder or one above it can replace the package folders themselves. So it names no build a
# writer of it could not already have installed. It is written by the folder's owner only (root
# for root's), reached from / with no link and through folders no one else may write, 0644;
# every other user keeps the digests in their own memo. In a user namespace that
# hides owners (another host user and the folder's owner may show as one overflow id; the
# namespace's root may not write what it cannot map), or on a network or FUSE filesystem (its
# server states owners and modes), none is read or written.
INSTALL_NAME = ".jaxcache-fingerprint.memo"


def _open_site(site: str) -> tuple[int, os.stat_result] | None:
    try:
        fd = os.open(site, _DIR)
    except OSError:
        return None
    return fd, os.fstat(fd)


def _owners_shown(dev: int, site: str) -> bool:
    """Whether the owners and modes shown for the folder `site` (on device `dev`) are who may
    write there: every owner shows as itself in this user namespace (one that hides some shows
    another host user and the folder's owner as one overflow id: userns.py), and the folder is
    on no network or FUSE filesystem (where a server or daemon states owners and modes and
    enforces its own: mounts.py). Elsewhere no install's memo is read or written (each user
    hashes for themselves)."""
    from jaxcache.mounts import mount_of, read_mounts
    from jaxcache.userns import shows_every_owner

    if not shows_every_owner():
        return False
    found = mount_of(site, dev, read_mounts())
    return found is not None and found.category != "network"


def load_install(site: str) -> dict[str, tuple[Identity, str]]:
    """The digests the install's memo in `site` vouches for (empty where it may not be read)."""
    opened = _open_site(site)
    if opened is None:
        return {}
    dfd, dst = opened
    try:
        data = _read_kept(dfd, INSTALL_NAME, dst.st_uid) \
            if _owners_shown(dst.st_dev, site) else None
    finally:
        os.close(dfd)
    got = MemoFile.parse(data) if data is not None else None
    inside = site.rstrip("/") + "/"
    return {p: v for p, v in got.files.items() if p.startswith(inside) and "/../" not in p} \
        if got is not None else {}


def has_install(site: str) -> bool:
    """Whether `site` holds an install's memo (one stat: asked on every run)."""
    return os.path.lexists(os.path.join(site, INSTALL_NAME))


def keeps_install(site: str) -> bool:
    """Whether this user writes the install's memo in `site`: its owner (root for root's), who
    may write there."""
    try:
        st = os.stat(site)
    except OSError:
        return False
    return os.geteuid() == st.st_uid and os.access(site, os.W_OK) and \
        _owners_shown(st.st_dev, site)


def save_install(site: str, files: dict[str, tuple[Identity, str]]) -> None:
    """Keep `files` (those under `site`) in the install's memo; silently nothing where this user
    may not (the next user hashes for themselves: slower, never wrong)."""
    inside = site.rstrip("/") + "/"
    files = {p: v for p, v in files.items() if p.startswith(inside)}
    data = json.dumps(MemoFile(files, {}, {}).to_json(), sort_keys=True).encode()
    if not files or len(data) > MAX_BYTES:
        return
    try:  # reached as the user's memo is: from /, no link, every folder root's or yours and
        dfd = _walk(site, create=False)  # no one else's to write; the site yours alone
    except OSError:
        return
    try:
        _replace(dfd, INSTALL_NAME, data, 0o644)  # readable by the install's other users
    finally:
        os.close(dfd)
