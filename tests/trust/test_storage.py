"""How the storage model reads what the kernel reports: overlay options, policy keys, /dev.

The attacks themselves, on real mounts, are in test_attacks_storage.py.
"""

from __future__ import annotations

import os

import pytest

from jaxcache.errors import PolicyError
from jaxcache.mounts import parse_mountinfo
from jaxcache.trust.inputs import policy_toml
from jaxcache.trust.kernel import overlay, sysfs
from jaxcache.trust.kernel.principals import Accounts


def overlay_mount(options: str):
    line = f"68 46 0:40 / /m rw,relatime - overlay overlay {options}"
    (m,) = parse_mountinfo(line)
    return m


def test_lowerdir_escapes_and_order():
    # mountinfo shows a backslash as \134 and a comma as \054; `\:` escapes a colon
    m = overlay_mount(r"rw,lowerdir=/l/a\134:b:/l/c,upperdir=/u\054x,workdir=/w")
    layers, problem = overlay.overlay_layers(m)
    assert problem is None
    assert layers == [("lower layer", "/l/a:b"), ("lower layer", "/l/c"),
                      ("upper layer", "/u,x"), ("workdir", "/w")]


def test_new_lowerdir_plus_form():
    m = overlay_mount("rw,lowerdir+=/l1,lowerdir+=/l2,upperdir=/u,workdir=/w")
    layers, problem = overlay.overlay_layers(m)
    assert problem is None
    assert [d for r, d in layers if r == "lower layer"] == ["/l1", "/l2"]


@pytest.mark.parametrize("options", [
    "rw,lowerdir=/l1::/data",                       # data-only layers
    "rw,lowerdir+=/l1,datadir+=/data",
    "rw,lowerdir=/l1:/l2,redirect_dir=on",           # files served from other paths
    "rw,lowerdir=/l1:/l2,metacopy=on",
    "rw,upperdir=/u,workdir=/w",                     # no lower layer listed
])
def test_layers_that_cannot_be_judged(options):
    layers, problem = overlay.overlay_layers(overlay_mount(options))
    assert layers == [] and problem


def test_policy_accepted_storage():
    pol = policy_toml.policy_of("/p.toml", {"cache": [
        {"path": "/c", "accepted_storage": ["/mnt/vol/", "/"]}]}, Accounts())
    assert pol.rule_for("/c").accepted_storage == {"/mnt/vol", "/"}
    assert pol.rule_for("/other").accepted_storage == frozenset()  # per cache path
    with pytest.raises(PolicyError, match="absolute"):
        policy_toml.policy_of("/p.toml", {"cache": [{"path": "/c", "accepted_storage": ["v"]}]},
                         Accounts())
    with pytest.raises(PolicyError, match="list of strings"):
        policy_toml.policy_of("/p.toml", {"cache": [{"path": "/c", "accepted_storage": "/mnt/v"}]},
                         Accounts())
    with pytest.raises(PolicyError, match=r"\[\[cache\]\] table"):  # never for every path
        policy_toml.policy_of("/p.toml", {"accepted_storage": ["/mnt/vol"]}, Accounts())


def test_dev_scan_finds_the_root_filesystem_device():
    """The node behind / (when it is a block device here) is found without following links."""
    index: dict = {}
    unreadable: list = []
    sysfs.scan_dev("/dev", index, unreadable, [0])
    dev = os.stat("/").st_dev
    if os.major(dev) == 0 or not os.path.isdir(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}"):
        pytest.skip("/ is not on a block device here")
    assert dev in index, sorted(index)
    assert all(not os.path.islink(p) for nodes in index.values() for p, _ in nodes)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to create users")
def test_what_another_user_puts_in_dev_shm_does_not_decide_an_audit(base, accounts):
    """Issue 22: one 0700 folder another user makes under /dev/shm, or 20,000 files there (a
    data loader's shared memory), made every audit by every other user UNVERIFIABLE, for any
    path. /dev/shm is another filesystem than /dev's, where no user can put a block device
    node: it is not searched, and b's private cache is PRIVATE for b."""
    import pwd
    import shutil
    import tempfile
    from pathlib import Path

    from support.jobs import audit_json
    from support.users import mkdir

    if not os.path.ismount("/dev/shm"):
        pytest.skip("/dev/shm is no mount of its own here")
    cache = mkdir(base / "cache", 0o700, accounts.b)
    shm = Path(tempfile.mkdtemp(prefix="jaxcache-test-", dir="/dev/shm"))
    try:
        a = pwd.getpwnam(accounts.a)
        hidden = shm / "hidden"
        hidden.mkdir(mode=0o700)
        os.chown(hidden, a.pw_uid, a.pw_gid)  # a's, unreadable for b
        many = shm / "many"
        many.mkdir()
        for i in range(20_001):
            (many / str(i)).touch()
        shm.chmod(0o755)
        rc, doc = audit_json(cache, "--no-processes", user=accounts.b)
        assert (rc, doc["verdict"]) == (0, "PRIVATE"), doc["findings"]
        assert not any("/dev" in f["message"] and "could not be read" in f["message"]
                       for f in doc["findings"])
    finally:
        shutil.rmtree(shm, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a mount namespace in /dev")
def test_a_block_device_node_bound_into_dev_is_still_found(tmp_path):
    """Containers (LXC, Proxmox) pass disks as device nodes bind-mounted into /dev from
    another filesystem: the scan skips other filesystems' folders below /dev, never a block
    node, wherever it lives. Here the node is made on a tmpfs and bound into /dev."""
    import stat
    import subprocess
    import sys

    dev = os.stat("/").st_dev
    source = next((e.path for e in os.scandir("/dev") if stat.S_ISBLK(
        e.stat(follow_symlinks=False).st_mode) and e.stat(follow_symlinks=False).st_rdev == dev),
        None)
    if os.major(dev) == 0 or source is None:
        pytest.skip("/ is not on a block device node directly in /dev here")
    node = f"/dev/jaxcache-test-{os.getpid()}"
    open(node, "w").close()  # a mount point on /dev's own filesystem, removed below
    try:
        code = ("import json, os, sys; from jaxcache.trust.kernel import sysfs\n"
                "index, bad = {}, []; "
                "sysfs.scan_dev('/dev', index, bad, [0]); "
                "print(json.dumps([p for nodes in index.values() for p, _ in nodes]))")
        other = tmp_path / "other-fs"
        other.mkdir()
        script = (f"mount -t tmpfs tmpfs {other} && mknod {other}/n b {os.major(dev)} "
                  f"{os.minor(dev)} && mount --bind {other}/n {node} && "
                  f"exec {sys.executable} -c \"{code}\"")
        proc = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                              capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            pytest.skip(f"the kernel refused the bind mount here: {proc.stderr.strip()}")
        assert node in proc.stdout, proc.stdout
    finally:
        os.unlink(node)
