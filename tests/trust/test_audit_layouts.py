"""The acceptance layouts: real users, groups, ACLs and mounts; exact writer sets and verdicts."""

from __future__ import annotations

import os
import pwd
import subprocess

import pytest
from support.jobs import audit_json, codes, untrusted, writers
from support.users import mkdir, needs_root, needs_setfacl

pytestmark = needs_root

HEX = "ab" * 32


def test_private_0700_dir(base, accounts):
    cache = mkdir(base / "cache", 0o700, accounts.a)
    rc, doc = audit_json(cache, "--user", accounts.a)
    assert (rc, doc["verdict"]) == (0, "PRIVATE")
    assert writers(doc) == {accounts.a, "root"}
    assert untrusted(doc) == set()


def test_group_writable_dir_expands_both_members(base, accounts):
    cache = mkdir(base / "cache", 0o770, accounts.c, accounts.group)
    rc, doc = audit_json(cache, "--user", accounts.c)
    assert (rc, doc["verdict"]) == (1, "UNSAFE")
    # a is a supplementary member, b has the group as its primary group
    assert untrusted(doc) == {accounts.a, accounts.b}
    assert writers(doc) == {accounts.a, accounts.b, accounts.c, "root"}


def test_mode_0707_denies_group_members_first_match(base, accounts):
    cache = mkdir(base / "cache", 0o707, accounts.c, accounts.group)
    _, doc = audit_json(cache, "--user", accounts.c)
    assert untrusted(doc) == {"everyone"}
    reasons = " ".join(w["chain"][0] for w in doc["writers"] if w["principal"] == "everyone")
    assert f"members of group {accounts.group} are denied" in reasons


def test_world_writable_parent_without_sticky(base, accounts):
    parent = mkdir(base / "scratch", 0o777)
    cache = mkdir(parent / "cache", 0o700, accounts.a)
    rc, doc = audit_json(cache, "--user", accounts.a)
    assert (rc, doc["verdict"]) == (1, "UNSAFE")
    assert untrusted(doc) == {"everyone"}
    [w] = [w for w in doc["writers"] if w["principal"] == "everyone"]
    assert w["action"] == "replace" and w["target"] == str(cache)


def test_sticky_parent_protects_an_existing_private_dir(base, accounts):
    parent = mkdir(base / "tmp", 0o1777)
    cache = mkdir(parent / "cache", 0o700, accounts.a)
    rc, doc = audit_json(cache, "--user", accounts.a)
    assert (rc, doc["verdict"]) == (0, "PRIVATE")
    assert writers(doc) == {accounts.a, "root"}


def test_sticky_parent_missing_dir_can_be_precreated(base, accounts):
    parent = mkdir(base / "tmp", 0o1777)
    rc, doc = audit_json(parent / "cache", "--user", accounts.a)
    assert (rc, doc["verdict"]) == (1, "UNSAFE")
    assert untrusted(doc) == {"everyone"}
    assert {w["action"] for w in doc["writers"] if w["principal"] == "everyone"} == {
        "create-dir"}
    assert "dir.precreate" in codes(doc)


def test_sticky_world_writable_cache_reports_preseeding(base, accounts):
    cache = mkdir(base / "cache", 0o1777, accounts.a)
    rc, doc = audit_json(cache, "--user", accounts.a)
    assert (rc, doc["verdict"]) == (1, "UNSAFE")
    assert untrusted(doc) == {"everyone"}
    assert {w["action"] for w in doc["writers"] if w["principal"] == "everyone"} == {
        "create-entries"}
    # one cause (the 1777 bit), one finding (issue 44, point 6): the sticky finding names who
    # can plant, and no second UNSAFE finding says the same of everyone
    unsafe = [f for f in doc["findings"] if f["effect"] == "unsafe"]
    assert [f["code"] for f in unsafe] == ["dir.sticky-preseed"], unsafe
    assert "everyone can create names" in unsafe[0]["message"]


def test_a_planter_with_another_way_in_keeps_its_own_finding(base, accounts):
    """Sticky and world-writable, and a file in it owned by b: b can change that file (its own
    finding, naming the file) besides planting (the sticky finding, naming everyone)."""
    cache = mkdir(base / "cache", 0o1777, accounts.a)
    (cache / "stray").write_text("x")
    os.chown(cache / "stray", pwd.getpwnam(accounts.b).pw_uid, -1)
    rc, doc = audit_json(cache, "--user", accounts.a)
    assert (rc, doc["verdict"]) == (1, "UNSAFE")
    by_code = {}
    for f in doc["findings"]:
        by_code.setdefault(f["code"], []).append(f["message"])
    assert len(by_code["dir.sticky-preseed"]) == 1
    [mine] = by_code["writer.untrusted"]
    assert mine.startswith(f"{accounts.b} can change what JAX loads") and "stray" in mine


def test_ancestor_owned_by_another_user(base, accounts):
    home = mkdir(base / "home-b", 0o755, accounts.b, accounts.b and "root")
    cache = mkdir(home / "cache", 0o700, accounts.a)
    rc, doc = audit_json(cache, "--user", accounts.a)
    assert (rc, doc["verdict"]) == (1, "UNSAFE")
    assert untrusted(doc) == {accounts.b}
    chain = [w["chain"][0] for w in doc["writers"] if w["principal"] == accounts.b]
    assert chain == [f"owns {home} and can change its mode"]


def test_symlink_into_world_writable_place(base, accounts):
    home = mkdir(base / "home", 0o755, accounts.a)
    world = mkdir(base / "world", 0o777)
    real = mkdir(world / "real", 0o700, accounts.a)
    link = home / "cache"
    link.symlink_to(real)
    os.lchown(link, accounts_uid(accounts.a), -1)
    rc, doc = audit_json(link, "--user", accounts.a)
    assert (rc, doc["verdict"]) == (1, "UNSAFE")
    assert doc["resolved"] == str(real)
    assert untrusted(doc) == {"everyone"}
    kinds = [(c["path"], c["kind"]) for c in doc["components"]]
    assert (str(link), "symlink") in kinds and (str(real), "dir") in kinds
    assert "path.symlink" in codes(doc)


def test_relative_symlink_and_dotdot_are_followed_like_the_kernel(base, accounts):
    home = mkdir(base / "home", 0o755, accounts.a)
    mkdir(home / "real", 0o700, accounts.a)
    (home / "cache").symlink_to("sub/../real")
    mkdir(home / "sub", 0o777)
    _, doc = audit_json(home / "cache", "--user", accounts.a)
    assert doc["resolved"] == str(home / "real")
    # sub/ is traversed, but writing inside it cannot change where sub/.. leads: only who can
    # replace sub itself (home's writers) matters, so the verdict stays PRIVATE
    assert str(home / "sub") in [c["path"] for c in doc["components"]]
    assert doc["verdict"] == "PRIVATE"


@needs_setfacl
def test_acl_grants_write_although_mode_bits_look_private(base, accounts):
    cache = mkdir(base / "cache", 0o700, accounts.a)
    subprocess.run(["setfacl", "-m", f"u:{accounts.b}:rwx", str(cache)], check=True)
    rc, doc = audit_json(cache, "--user", accounts.a)
    assert (rc, doc["verdict"]) == (1, "UNSAFE")
    assert untrusted(doc) == {accounts.b}
    [component] = [c for c in doc["components"] if c["path"] == str(cache)]
    assert f"user:{accounts.b}:rwx" in component["acl"]


@needs_setfacl
def test_acl_mask_limits_named_entries(base, accounts):
    cache = mkdir(base / "cache", 0o700, accounts.a)
    subprocess.run(["setfacl", "-m", f"u:{accounts.b}:rwx,g:{accounts.group}:rwx,m::r-x",
                    str(cache)], check=True)
    rc, doc = audit_json(cache, "--user", accounts.a)
    assert (rc, doc["verdict"]) == (0, "PRIVATE")


@needs_setfacl
def test_acl_named_group_expands_members(base, accounts):
    cache = mkdir(base / "cache", 0o700, accounts.c)
    subprocess.run(["setfacl", "-m", f"g:{accounts.group}:rwx", str(cache)], check=True)
    _, doc = audit_json(cache, "--user", accounts.c)
    assert untrusted(doc) == {accounts.a, accounts.b}


@needs_setfacl
def test_default_acl_decides_future_entries(base, accounts):
    cache = mkdir(base / "cache", 0o700, accounts.a)
    subprocess.run(["setfacl", "-d", "-m", f"u:{accounts.c}:rw", str(cache)], check=True)
    rc, doc = audit_json(cache, "--user", accounts.a)
    assert (rc, doc["verdict"]) == (1, "UNSAFE")
    assert untrusted(doc) == {accounts.c}
    assert {w["action"] for w in doc["writers"] if w["principal"] == accounts.c} == {"inherit"}


def test_entry_owned_by_another_user(base, accounts):
    cache = mkdir(base / "cache", 0o700, accounts.a)
    entry = cache / f"jit_step-{HEX}-cache"
    entry.write_bytes(b"x")
    os.chown(entry, accounts_uid(accounts.b), -1)
    rc, doc = audit_json(cache, "--user", accounts.a)
    assert (rc, doc["verdict"]) == (1, "UNSAFE")
    assert untrusted(doc) == {accounts.b}
    [e] = doc["entries"]["entries"]
    assert e["module"] == "jit_step" and "foreign-owner" in e["flags"]
    assert {w["action"] for w in doc["writers"] if w["principal"] == accounts.b} == {
        "rewrite-entry"}


def test_group_writable_entry(base, accounts):
    cache = mkdir(base / "cache", 0o700, accounts.c, accounts.group)
    entry = cache / f"jit_f-{HEX}-cache"
    entry.write_bytes(b"x")
    os.chown(entry, accounts_uid(accounts.c), grp_gid(accounts.group))
    entry.chmod(0o664)
    _, doc = audit_json(cache, "--user", accounts.c)
    assert untrusted(doc) == {accounts.a, accounts.b}


def test_hard_linked_entry_is_flagged(base, accounts):
    cache = mkdir(base / "cache", 0o700, accounts.a)
    entry = cache / f"jit_step-{HEX}-cache"
    entry.write_bytes(b"x")
    os.chown(entry, accounts_uid(accounts.a), -1)
    os.link(entry, base / "elsewhere")
    rc, doc = audit_json(cache, "--user", accounts.a)
    [e] = doc["entries"]["entries"]
    assert e["nlink"] == 2 and "hard-link" in e["flags"]
    assert "entry.hard-link" in codes(doc)
    # the inode's owner and mode still bound who can write it
    assert writers(doc) == {accounts.a, "root"} and (rc, doc["verdict"]) == (0, "PRIVATE")


def test_symlinked_entry_is_unsafe(base, accounts):
    cache = mkdir(base / "cache", 0o700, accounts.a)
    (cache / f"jit_step-{HEX}-cache").symlink_to(base / "planted")
    rc, doc = audit_json(cache, "--user", accounts.a)
    assert (rc, doc["verdict"]) == (1, "UNSAFE")
    assert "entry.symlink" in codes(doc)


def test_nonexistent_path_under_writable_ancestor(base, accounts):
    world = mkdir(base / "world", 0o777)
    rc, doc = audit_json(world / "a" / "b" / "cache", "--user", accounts.a)
    assert (rc, doc["verdict"]) == (1, "UNSAFE")
    assert doc["exists"] is False and doc["missing"] == ["a", "b", "cache"]
    assert untrusted(doc) == {"everyone"}
    assert {"path.missing", "dir.precreate"} <= codes(doc)


def test_nonexistent_path_under_private_ancestor(base, accounts):
    home = mkdir(base / "home", 0o700, accounts.a)
    rc, doc = audit_json(home / "cache", "--user", accounts.a)
    assert (rc, doc["verdict"]) == (0, "PRIVATE")
    assert "path.missing" in codes(doc)


def test_tmpfs_mount_in_a_mount_namespace(base, accounts):
    point = mkdir(base / "mnt", 0o755)
    doc = in_namespace(f"mount -t tmpfs -o mode=0700,uid={accounts_uid(accounts.a)} none {point}",
                       point, accounts.a)
    [c] = [c for c in doc["components"] if c["path"] == str(point)]
    assert c["filesystem"]["type"] == "tmpfs" and c["filesystem"]["category"] == "tmpfs"
    assert c["filesystem"]["mount_point"] == str(point)
    assert doc["verdict"] == "PRIVATE" and "fs.tmpfs" in codes(doc)


def test_bind_mount_in_a_mount_namespace(base, accounts):
    src = mkdir(base / "src", 0o700, accounts.a)
    point = mkdir(base / "dst", 0o755)
    doc = in_namespace(f"mount --bind {src} {point}", point, accounts.a)
    [c] = [c for c in doc["components"] if c["path"] == str(point)]
    top = str(src)  # bind_of names src within its filesystem: from / if /tmp is on /,
    while not os.path.ismount(top):  # from the tmpfs root if /tmp is a tmpfs of its own
        top = os.path.dirname(top)
    assert c["filesystem"]["bind_of"].endswith(os.path.join("/", os.path.relpath(src, top)))
    assert c["owner"] == accounts.a  # the bound directory itself, not the covered one
    assert "fs.bind" in codes(doc) and doc["verdict"] == "PRIVATE"


def in_namespace(mount_cmd: str, path, user: str) -> dict:
    import json
    import shlex
    import sys

    script = (f"{mount_cmd} && {shlex.quote(sys.executable)} -m jaxcache audit --format json "
              f"--user {user} {shlex.quote(str(path))}; true")
    proc = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                          capture_output=True, text=True)
    if proc.returncode != 0 or not proc.stdout.strip():
        pytest.skip(f"the kernel refused a mount namespace here: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def accounts_uid(name: str) -> int:
    import pwd

    return pwd.getpwnam(name).pw_uid


def grp_gid(name: str) -> int:
    import grp

    return grp.getgrnam(name).gr_gid


@needs_setfacl
def test_acl_on_an_entry_grants_rewrite(base, accounts):
    cache = mkdir(base / "cache", 0o700, accounts.a)
    entry = cache / f"jit_step-{HEX}-cache"
    entry.write_bytes(b"x")
    os.chown(entry, accounts_uid(accounts.a), -1)
    entry.chmod(0o600)
    subprocess.run(["setfacl", "-m", f"u:{accounts.c}:rw", str(entry)], check=True)
    rc, doc = audit_json(cache, "--user", accounts.a)
    assert (rc, doc["verdict"]) == (1, "UNSAFE") and untrusted(doc) == {accounts.c}
    [e] = doc["entries"]["entries"]
    assert e["acl"] is True and "acl" in e["flags"]


def test_entries_flagged_alike_are_one_finding_with_a_count(base, accounts):
    """Five planted symlinks are one entry.symlink finding naming the first three and counting
    the rest (issue 44, point 6), not five findings with one remedy; one alone keeps its name."""
    cache = mkdir(base / "cache", 0o700, accounts.a)
    for i in range(5):
        (cache / f"jit_f{i}-{HEX}-cache").symlink_to("/etc/hostname")
    rc, doc = audit_json(cache, "--user", accounts.a)
    assert (rc, doc["verdict"]) == (1, "UNSAFE")
    [found] = [f for f in doc["findings"] if f["code"] == "entry.symlink"]
    assert found["message"].startswith(f"5 entries (jit_f0-{HEX}-cache, "), found
    assert "and 2 more): each is a symlink" in found["message"]
    for i in range(1, 5):
        (cache / f"jit_f{i}-{HEX}-cache").unlink()
    _, doc = audit_json(cache, "--user", accounts.a)
    [found] = [f for f in doc["findings"] if f["code"] == "entry.symlink"]
    assert found["message"].startswith(f"entry jit_f0-{HEX}-cache is a symlink"), found
