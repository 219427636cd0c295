"""Paths, umasks and where a policy may live: '..' after a missing name, the default ACL's
group of new files, the job's umask, a policy inside the cache or in a world-writable folder,
and refusals that change nothing (each once a hole a review found)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support.jobs import audit_json, jaxcache, untrusted
from support.users import mkdir, needs_root, needs_setfacl

from jaxcache.text import safe


def test_dotdot_after_a_missing_component_is_refused(base):
    priv = mkdir(base / "priv", 0o700)
    mkdir(base / "shared", 0o777)
    proc = jaxcache("audit", f"{priv}/nope/../../shared")
    assert proc.returncode == 2 and "'..' after" in proc.stderr
    assert not (priv / "nope").exists()


@needs_root
@needs_setfacl
def test_default_acl_owning_group_is_the_writers_primary_group(base, accounts):
    # b's primary group is the shared group (a is in it too); the directory's group is root
    d = mkdir(base / "dg", 0o711, accounts.b, "root")
    subprocess.run(["setfacl", "-d", "-m", "u::rwx,g::rw-,o::---", str(d)], check=True)
    rc, doc = audit_json(d, "--user", accounts.b)
    assert (rc, doc["verdict"]) == (1, "UNSAFE")
    assert accounts.a in untrusted(doc)
    # with the setgid bit, new files take the directory's group (root): nobody else
    d.chmod(0o2711)
    rc, doc = audit_json(d, "--user", accounts.b)
    assert (rc, doc["verdict"]) == (0, "PRIVATE")


def test_permissive_umask_makes_future_entries_writable(base):
    cache = mkdir(base / "cache", 0o755)
    proc = subprocess.run(["sh", "-c", 'umask 000 && exec "$@"', "sh", sys.executable, "-m",
                           "jaxcache", "audit", "--format", "json", str(cache)],
                          capture_output=True, text=True)
    doc = json.loads(proc.stdout)
    assert (proc.returncode, doc["verdict"]) == (1, "UNSAFE")
    [w] = [w for w in doc["writers"] if w["principal"] == "everyone"]
    assert w["action"] == "inherit" and "umask 0000" in w["chain"][0]
    # the same directory with the usual umask is private
    rc, doc = audit_json(cache)
    assert doc["verdict"] == "PRIVATE"


def test_policy_inside_the_cache_is_refused_by_run_too(base, tmp_path):
    cache = mkdir(base / "cache", 0o700)
    policy = cache / "policy.toml"
    policy.write_text("")
    policy.chmod(0o600)
    proc = jaxcache("run", "--policy", str(policy), "--cache-dir", str(cache), "--record",
                    str(tmp_path / "r.json"), "--", "true")
    assert proc.returncode == 2 and "inside the audited tree" in proc.stderr


@needs_root
def test_policy_paths_match_as_the_kernel_resolves_them(base, accounts, tmp_path):
    g770 = mkdir(base / "g770", 0o770, accounts.c, accounts.group)
    other = mkdir(base / "other", 0o755)
    mkdir(other / "sub", 0o755)
    mkdir(other / "g770", 0o770, accounts.c, accounts.group)
    (base / "lnk").symlink_to(other / "sub")
    policy = tmp_path / "p.toml"
    policy.write_text(f'[[cache]]\npath = "{g770}"\ntrusted_groups = ["{accounts.group}"]\n')
    policy.chmod(0o600)
    _, direct = audit_json(g770, "--user", accounts.c, "--policy", str(policy))
    _, tricky = audit_json(f"{base}/lnk/../g770", "--user", accounts.c, "--policy",
                           str(policy))
    assert direct["verdict"] == "SHARED-BY-POLICY"
    assert tricky["resolved"] == str(other / "g770") and tricky["verdict"] == "UNSAFE"


def test_policy_in_a_world_writable_directory_is_refused(base):
    w = mkdir(base / "w777", 0o777)
    policy = w / "policy.toml"
    policy.write_text("")
    policy.chmod(0o644)
    cache = mkdir(base / "cache", 0o700)
    proc = jaxcache("audit", "--policy", str(policy), str(cache))
    assert proc.returncode == 2 and "others can modify or replace" in proc.stderr


def test_refused_run_creates_nothing(base):
    priv = mkdir(base / "priv", 0o700)
    (priv / "notes.txt").write_text("mine")
    proc = jaxcache("run", "--cache-dir", str(priv / "newcache"), "--record",
                    str(priv / "notes.txt"), "--", "true")
    assert proc.returncode == 2 and "refusing to overwrite" in proc.stderr
    assert sorted(os.listdir(priv)) == ["notes.txt"]
    assert (priv / "notes.txt").read_text() == "mine"


def test_run_never_overwrites_other_jaxcache_json(base):
    priv = mkdir(base / "priv", 0o700)
    audit_out = priv / "audit.json"
    audit_out.write_text(jaxcache("audit", "--format", "json", str(priv)).stdout)
    before = audit_out.read_text()
    proc = jaxcache("run", "--cache-dir", str(priv / "c"), "--record", str(audit_out), "--",
                    "true")
    assert proc.returncode == 2 and audit_out.read_text() == before


@pytest.mark.parametrize("a,b", [("bs\\x0aname", "bs\nname"), ("x\\\\", "x\\")])
def test_escaped_names_never_collide(a, b):
    assert safe(a) != safe(b)
    assert "\n" not in safe(b)


def test_numeric_uid_is_accepted(base):
    cache = mkdir(base / "cache", 0o700)
    rc, doc = audit_json(cache, "--user", str(os.geteuid()))
    assert doc["judged_for"]["uid"] == os.geteuid()


def test_permissive_umask_counts_for_a_cache_jax_would_create(base):
    parent = mkdir(base / "home", 0o755)
    proc = subprocess.run(["sh", "-c", 'umask 000 && exec "$@"', "sh", sys.executable, "-m",
                           "jaxcache", "audit", "--format", "json", str(parent / "cache")],
                          capture_output=True, text=True)
    doc = json.loads(proc.stdout)
    # JAX's mkdir would make the cache 0777 under this umask: anyone could then write it
    assert (proc.returncode, doc["verdict"]) == (1, "UNSAFE")
    [w] = [w for w in doc["writers"] if w["principal"] == "everyone"]
    assert w["action"] == "inherit" and w["target"] == str(parent / "cache")
    rc, doc = audit_json(parent / "cache")
    assert doc["verdict"] == "PRIVATE"
