"""Parsers and the permission model against what the real tools and kernel produce."""

from __future__ import annotations

import os
import struct
import subprocess

import pytest
from support.users import mkdir, needs_setfacl

from jaxcache import mounts
from jaxcache.trust.findings import Component
from jaxcache.trust.inputs.policy import Rule
from jaxcache.trust.kernel import acl


@needs_setfacl
def test_acl_parser_reads_what_setfacl_wrote(base):
    d = mkdir(base / "d", 0o750)
    subprocess.run(["setfacl", "-m", "u:nobody:rwx,g:daemon:r-x,m::rwx", str(d)], check=True)
    subprocess.run(["setfacl", "-d", "-m", "u:nobody:rw", str(d)], check=True)
    access = acl.read(str(d), acl.ACCESS)
    default = acl.read(str(d), acl.DEFAULT)
    assert access is not None and access.is_extended and access.mask == 7
    [named] = access.named(acl.USER)
    assert named.id == 65534 and named.perm == 7
    assert default is not None and any(e.id == 65534 for e in default.named(acl.USER))
    getfacl = subprocess.run(["getfacl", "-n", "-p", "-a", str(d)], capture_output=True,
                             text=True, check=True).stdout
    assert "user:65534:rwx" in getfacl


def test_acl_parser_rejects_garbage():
    with pytest.raises(acl.AclFormatError):
        acl.parse(b"\x01\x00\x00\x00")
    with pytest.raises(acl.AclFormatError):
        acl.parse(struct.pack("<I", 2) + b"\x00" * 5)
    with pytest.raises(acl.AclFormatError):
        acl.parse(struct.pack("<IHHI", 2, 0x40, 7, 0))


def test_mountinfo_parser_and_classification():
    text = (
        "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
        "60 27 0:50 / /mnt/nfs\\040share rw,relatime shared:1 - nfs4 srv:/export rw,vers=4.2\n"
        "61 27 254:0 /srv/data /data ro,relatime - ext4 /dev/vda rw\n"
        "62 27 0:51 / /fuse rw - fuse.sshfs me@host:/x rw\n"
    )
    ms = mounts.parse_mountinfo(text)
    assert ms[1].point == "/mnt/nfs share" and ms[1].category == "network"
    assert ms[2].is_bind and ms[2].read_only and ms[2].category == "local"
    assert ms[3].category == "network"
    assert mounts.mount_of("/mnt/nfs share/c", os.makedev(0, 50), ms) is ms[1]
    assert mounts.mount_of("/data/c", os.makedev(254, 0), ms) is ms[2]
    assert mounts.mount_of("/home", os.makedev(254, 0), ms) is ms[0]


def test_real_mountinfo_has_root():
    ms = mounts.read_mounts()
    assert any(m.point == "/" for m in ms)
    st = os.stat("/")
    assert mounts.mount_of("/", st.st_dev, ms) is not None


def _component(fstype, category):
    return Component("/mnt/c", "dir", "root", "root", 0o40700, (), (), None, fstype, category,
                     "/mnt", None, False)


def test_network_filesystem_is_unverifiable_unless_accepted():
    from jaxcache.trust.judgement.verdict import fs_findings as _fs_findings

    [f] = _fs_findings((_component("nfs4", "network"),), Rule())
    assert (f.code, f.effect) == ("fs.network", "unverifiable")
    [f] = _fs_findings((_component("nfs4", "network"),), Rule(accepted_filesystems={"nfs4"}))
    assert f.effect == "note"


def test_entry_name_classification_matches_jaxs_naming():
    import random
    import re

    from jaxcache.trust.kernel.entries import classify

    pattern = re.compile(r"^(?P<module>.+)-(?P<key>[0-9a-f]{64})-(?P<kind>cache|atime)$", re.S)
    rng = random.Random(7)
    alphabet = "ab-_\n0123456789abcdefABCDEF."
    names = [".lockfile", "xla_gpu_per_fusion_autotune_cache_dir", "-" + "a" * 64 + "-cache"]
    for _ in range(3000):
        key = "".join(rng.choice("0123456789abcdef" + "xX"[: rng.randint(0, 1)])
                      for _ in range(rng.choice((63, 64, 65))))
        module = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 5)))
        names.append(f"{module}-{key}-{rng.choice(('cache', 'atime', 'cachex', 'lock'))}")
    for name in names:
        m = pattern.match(name)
        expected = (m["kind"], m["module"], m["key"]) if m else None
        kind, module, key = classify(name)
        if expected:
            assert (kind, module, key) == expected, name
        else:
            assert kind in ("unexpected", "lockfile", "xla-subcache"), name


def test_entry_removed_while_the_cache_is_listed(tmp_path, monkeypatch):
    """JAX's LRU eviction (jax_compilation_cache_max_size) or a cleanup removes entries while
    the audit lists them: one gone between the listing and its stat is no longer there to be
    loaded, and must not end the audit ("No such file or directory", exit 2)."""
    from jaxcache.trust.kernel import entries
    from jaxcache.trust.kernel.principals import Accounts

    cache = mkdir(tmp_path / "cache", 0o700)
    for name in ("a", "b"):
        (cache / f"jit_{name}-{'ab' * 32}-cache").write_bytes(b"x")
    real = os.scandir

    def scandir(fd):
        found = list(real(fd))
        os.unlink(found[0].name, dir_fd=fd)  # evicted right after the listing
        return iter(found)

    monkeypatch.setattr(entries.os, "scandir", scandir)
    fd = os.open(cache, os.O_RDONLY | os.O_DIRECTORY)
    try:
        inv = entries.inventory(fd, str(cache), frozenset({0, os.geteuid()}), Accounts())
    finally:
        os.close(fd)
    monkeypatch.undo()  # os.scandir is the module's: Path.iterdir (3.13) calls it too
    assert [e.name for e in inv.entries] == [p.name for p in cache.iterdir()]


@pytest.mark.parametrize("text,url", [
    ("gs://bucket/p", True), ("s3://b", True), ("a+b.c-d://x", True), ("Gs://x", True),
    ("A9://", True), ("a://b://c", True), ("1s://x", False), ("+a://x", False),
    ("://x", False), ("a/b://x", False), ("a_b://x", False), ("a b://x", False),
    ("\u00e9://x", False), ("gs:/x", False), ("/tmp/gs://x", False), ("ab:/c://d", False),
    ("", False), ("cache", False)])
def test_a_url_is_a_scheme_then_colon_slash_slash(text, url):
    """is_url without a pattern (rules/target.py): what `^[A-Za-z][A-Za-z0-9+.-]*://` says."""
    from jaxcache.trust.rules.target import is_url

    assert is_url(text) is url
