"""An install is hashed once for all its users, not once per user: the digests its owner (or
root) kept beside the package folders (fingerprint/memo.py, the install's memo) are read by every
other user of that install, and a memo anyone else could have written is never read.

Real users (tests/support/users.py) run `jaxcache fingerprint` from the runtime they can reach,
on an install of their own making: a jaxlib folder of shared objects found first on
PYTHONPATH (the fingerprint hashes files; it never loads them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.fuse import bindfs
from support.users import as_user_argv, mkdir, needs_root, user_runtime

from jaxcache.fingerprint import memo

pytestmark = needs_root


def _install(top: Path, owner: str, mode: int = 0o755, group: str | None = None) -> Path:
    """site/jaxlib with two shared objects and its dist-info, owned by `owner`."""
    site = mkdir(top / "site", mode, owner, group)
    lib = site / "jaxlib"
    (lib / "mlir").mkdir(parents=True)
    (lib / "__init__.py").write_text("")
    (lib / "libjax_common.so").write_bytes(os.urandom(200_000))
    (lib / "mlir" / "_mlir.so.1").write_bytes(os.urandom(3000))
    (site / "jaxlib-0.10.2.dist-info").mkdir()
    for path in [lib, lib / "mlir", site / "jaxlib-0.10.2.dist-info", *lib.rglob("*")]:
        shutil.chown(path, owner, group)
        path.chmod(0o755 if path.is_dir() else 0o644)
    return site


def _fingerprint(user: str, site: Path, state: Path) -> tuple[dict, str]:
    """`jaxcache fingerprint --format json` as `user`, with a state folder of its own."""
    rt = user_runtime()
    if not state.exists():
        mkdir(state, 0o700, user)
    proc = subprocess.run([*as_user_argv(user), rt.python, "-m", "jaxcache", "fingerprint",
                           "--format", "json"], capture_output=True, text=True, cwd="/",
                          env=rt.env(PYTHONPATH=f"{site}:{rt.lib}", XDG_STATE_HOME=str(state)),
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr


def test_an_install_is_hashed_once_for_all_its_users(accounts, base):
    site = _install(base, accounts.a)
    doc_a, said_a = _fingerprint(accounts.a, site, base / "state-a")
    assert "hashing 2 shared objects" in said_a and said_a.rstrip().endswith("once per install")
    kept = site / memo.INSTALL_NAME
    st = kept.stat()
    assert st.st_uid == doc_uid(accounts.a) and st.st_mode & 0o777 == 0o644
    for user, state in ((accounts.b, base / "state-b"), (accounts.c, base / "state-c")):
        doc, said = _fingerprint(user, site, state)
        assert "hashing" not in said, said  # read from the install's memo
        assert doc["id"] == doc_a["id"] and doc["build"] == doc_a["build"]
        again, said = _fingerprint(user, site, state)  # and kept in the user's own memo
        assert "hashing" not in said and again["id"] == doc_a["id"]
    # the owner's own memo holds every digest (an install memo deleted, or an owner who ran
    # an older jaxcache): the owner's next run writes it again, hashing nothing
    kept.unlink()
    _, said = _fingerprint(accounts.a, site, base / "state-a")
    assert "hashing" not in said and memo.load_install(str(site)).keys() == {
        str(site / "jaxlib" / "libjax_common.so"), str(site / "jaxlib" / "mlir" / "_mlir.so.1")}


def test_the_install_memo_is_written_only_through_folders_no_one_else_may_write(base):
    """Written as the user's memo is: reached from / with no link, every folder above root's
    or yours and no one else's to write. A link on the way (a parent swapped for one while the
    binaries were hashed) or a folder others may write gets nothing."""
    real = mkdir(base / "real", 0o755)
    site = _install(real, "root")
    files = {str(site / "jaxlib" / "libjax_common.so"): (
        memo.identity((site / "jaxlib" / "libjax_common.so").stat()), "a" * 64)}
    (base / "link").symlink_to(real)
    memo.save_install(str(base / "link" / "site"), {
        p.replace(str(real), str(base / "link")): v for p, v in files.items()})
    assert not (site / memo.INSTALL_NAME).exists()
    real.chmod(0o777)  # anyone may replace the site folder: nothing kept there either
    memo.save_install(str(site), files)
    assert not (site / memo.INSTALL_NAME).exists()
    real.chmod(0o755)
    (site / memo.INSTALL_NAME).mkdir()  # a folder at its name: not read, and not replaced
    assert memo.load_install(str(site)) == {}
    memo.save_install(str(site), files)
    assert (site / memo.INSTALL_NAME).is_dir()
    (site / memo.INSTALL_NAME).rmdir()
    memo.save_install(str(site), files)
    assert memo.load_install(str(site)) == files


def test_no_install_memo_is_read_in_a_user_namespace_that_hides_owners(accounts, base):
    """In a user namespace that maps only root (`unshare -U -r`, as rootless containers do),
    the folder's owner and any other host user show as one overflow id: who wrote the memo
    cannot be told, so it is not read (the digests are hashed, and the build is the same)."""
    if shutil.which("unshare") is None or subprocess.run(
            ["unshare", "-U", "-r", "true"], capture_output=True).returncode != 0:
        pytest.skip("this kernel refuses a user namespace (unshare -U -r)")
    site = _install(base, accounts.a)
    doc_a, _ = _fingerprint(accounts.a, site, base / "state-a")
    assert (site / memo.INSTALL_NAME).exists()
    state = base / "state-ns"
    state.mkdir(mode=0o700)
    proc = subprocess.run(["unshare", "-U", "-r", sys.executable, "-m", "jaxcache",
                           "fingerprint", "--format", "json"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(site), "XDG_STATE_HOME":
                               str(state)}, cwd="/", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "hashing 2 shared objects" in proc.stderr, proc.stderr
    assert json.loads(proc.stdout)["build"] == doc_a["build"]


def test_a_memo_the_install_owner_did_not_keep_is_never_read(accounts, base):
    """Root's install, which the group may write: a member hashes for themselves alone (and
    says so); a memo a member plants there, or one the group could rewrite, is never read."""
    site = _install(base, "root", 0o775, accounts.group)
    doc_b, said_b = _fingerprint(accounts.b, site, base / "state-b")
    assert "once per install and user (the install is not yours" in said_b
    assert not (site / memo.INSTALL_NAME).exists()
    # b plants a memo naming the same files' identities with other digests
    lib = site / "jaxlib"
    forged = {"format": memo.FORMAT, "roots": {}, "derived": {}, "files": {
        str(p): [*memo.identity(p.stat()), "f" * 64]
        for p in (lib / "libjax_common.so", lib / "mlir" / "_mlir.so.1")}}
    planted = site / memo.INSTALL_NAME
    planted.write_text(json.dumps(forged))
    planted.chmod(0o644)
    shutil.chown(planted, accounts.b)
    assert memo.load_install(str(site)) == {}
    doc_a, said_a = _fingerprint(accounts.a, site, base / "state-a")
    assert "hashing 2 shared objects" in said_a  # not read: hashed
    assert doc_a["build"] == doc_b["build"]
    # root's file, but the group may write it: not read either
    shutil.chown(planted, "root", accounts.group)
    planted.chmod(0o664)
    assert memo.load_install(str(site)) == {}
    doc_c, said_c = _fingerprint(accounts.c, site, base / "state-c")
    assert "hashing 2 shared objects" in said_c and doc_c["build"] == doc_b["build"]
    # the same file, root's and 0644: read (root could rewrite the binaries anyway), and only
    # for files under the folder it sits in
    planted.chmod(0o644)
    forged["files"]["/etc/passwd"] = [*memo.identity(os.stat("/etc/passwd")), "e" * 64]
    planted.write_text(json.dumps(forged))
    vouched = memo.load_install(str(site))
    assert set(vouched) == {str(lib / "libjax_common.so"), str(lib / "mlir" / "_mlir.so.1")}


def doc_uid(user: str) -> int:
    import pwd

    return pwd.getpwnam(user).pw_uid


def test_no_install_memo_is_read_or_kept_on_a_fuse_mount(tmp_path):
    """Behind FUSE (or NFS, CIFS) the owners and modes shown are the daemon's or the server's
    word, and it enforces its own: a memo there could have been written by anyone the server
    lets write. An install served by bindfs is hashed, nothing is kept beside it, and a memo
    planted behind the mount (root's, 0644, naming the mount's own files) is not read."""
    top = mkdir(tmp_path / "top", 0o755)
    site = _install(top, "root")
    mnt = tmp_path / "mnt"
    mnt.mkdir(mode=0o755)
    with bindfs(site, mnt, tmp_path / "bindfs.log", "sshfs"):
        def fingerprint(state: str) -> tuple[dict, str]:
            proc = subprocess.run([sys.executable, "-m", "jaxcache", "fingerprint", "--format",
                                   "json"], capture_output=True, text=True, cwd="/",
                                  env={**os.environ, "PYTHONPATH": str(mnt),
                                       "XDG_STATE_HOME": str(tmp_path / state)}, timeout=120)
            assert proc.returncode == 0, proc.stderr
            return json.loads(proc.stdout), proc.stderr

        first, said = fingerprint("state-1")
        assert "hashing 2 shared objects" in said and "once per install and user" in said
        assert not (site / memo.INSTALL_NAME).exists()
        lib = mnt / "jaxlib"
        planted = site / memo.INSTALL_NAME
        planted.write_text(json.dumps({"format": memo.FORMAT, "roots": {}, "derived": {},
                                       "files": {str(p): [*memo.identity(p.stat()), "f" * 64]
                                                 for p in (lib / "libjax_common.so",
                                                           lib / "mlir" / "_mlir.so.1")}}))
        planted.chmod(0o644)
        again, said = fingerprint("state-2")
        assert "hashing 2 shared objects" in said and again["build"] == first["build"]
