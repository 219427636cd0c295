"""`jaxcache ls`, the output formats, the policy, and other processes using a cache."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
from support.jobs import audit_json, codes, jaxcache, untrusted
from support.users import as_user_argv, mkdir, needs_root

KEY = "0123456789abcdef" * 4


def fill(cache):
    (cache / f"jit_train_step-{KEY}-cache").write_bytes(b"\0" * 1234)
    (cache / f"jit_train_step-{KEY}-atime").write_bytes(b"\0" * 8)
    (cache / ".lockfile").write_bytes(b"")
    (cache / "notes.txt").write_text("hello")
    (cache / "xla_gpu_per_fusion_autotune_cache_dir").mkdir()
    (cache / "xla_gpu_per_fusion_autotune_cache_dir" / "fusion.textproto").write_text("x")


def test_ls_inventory(base):
    cache = mkdir(base / "cache", 0o700)
    fill(cache)
    proc = jaxcache("ls", "--format", "json", str(cache))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    by = {e["name"]: e for e in doc["entries"]}
    entry = by[f"jit_train_step-{KEY}-cache"]
    assert (entry["kind"], entry["module"], entry["key"], entry["size"]) == (
        "cache", "jit_train_step", KEY, 1234)
    assert by[".lockfile"]["kind"] == "lockfile"
    assert by["notes.txt"]["flags"] == ["unexpected-name"]
    assert by["xla_gpu_per_fusion_autotune_cache_dir/fusion.textproto"]["kind"] == "xla-subcache"
    text = jaxcache("ls", str(cache)).stdout
    assert "jit_train_step" in text and "; 6 files," in text
    assert text.splitlines()[-1].startswith("1 compiled entry, 1 access-time file")


def test_ls_exit_code_flags_attention(base):
    cache = mkdir(base / "cache", 0o700)
    entry = cache / f"jit_f-{KEY}-cache"
    entry.write_bytes(b"x")
    entry.chmod(0o666)
    proc = jaxcache("ls", str(cache))
    assert proc.returncode == 1 and "group+other-writable" in proc.stdout


def test_json_schema_fields(base):
    cache = mkdir(base / "cache", 0o700)
    _, doc = audit_json(cache)
    assert doc["schema"] == "jaxcache.audit/1"
    for key in ("requested", "path", "resolved", "exists", "verdict", "judged_for", "writers",
                "untrusted_writers", "components", "entries", "processes", "findings"):
        assert key in doc
    assert doc["components"][0]["path"] == "/"


def test_sarif_output(base):
    world = mkdir(base / "world", 0o777)
    cache = mkdir(world / "cache", 0o700)
    proc = jaxcache("audit", "--format", "sarif", str(cache))
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert doc["version"] == "2.1.0"
    run = doc["runs"][0]
    assert run["tool"]["driver"]["name"] == "jaxcache"
    rule_ids = {r["id"] for r in run["tool"]["driver"]["rules"]}
    results = run["results"]
    assert {r["ruleId"] for r in results} <= rule_ids
    [unsafe] = [r for r in results if r["ruleId"] == "writer.untrusted"]
    assert unsafe["level"] == "error"
    uri = unsafe["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == f"file://{cache}"


def test_text_report_names_writer_and_chain(base):
    world = mkdir(base / "world", 0o777)
    cache = mkdir(world / "cache", 0o700)
    out = jaxcache("audit", str(cache)).stdout
    assert "verdict: UNSAFE" in out
    assert f"other has write+search on {world} (mode 0777)" in out
    assert f"can rename or replace {cache}" in out
    assert "chmod" not in out.lower().replace("change its mode", "")


@needs_root
def test_policy_makes_declared_writers_shared_by_policy(base, accounts, tmp_path):
    cache = mkdir(base / "cache", 0o770, accounts.c, accounts.group)
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[[cache]]\npath = "{cache}"\ntrusted_groups = ["{accounts.group}"]\n')
    policy.chmod(0o600)
    rc, doc = audit_json(cache, "--user", accounts.c, "--policy", str(policy))
    assert (rc, doc["verdict"]) == (0, "SHARED-BY-POLICY")
    assert {w["principal"] for w in doc["writers"] if w["trust"] == "policy"} == {
        accounts.a, accounts.b}
    # trusting only one member leaves the other undeclared
    policy.write_text(f'trusted_users = ["{accounts.a}"]\n')
    rc, doc = audit_json(cache, "--user", accounts.c, "--policy", str(policy))
    assert (rc, doc["verdict"], untrusted(doc)) == (1, "UNSAFE", {accounts.b})
    # the rule for another path does not apply here
    policy.write_text(f'[[cache]]\npath = "{base}/other"\ntrusted_users = ["{accounts.a}", '
                      f'"{accounts.b}"]\n')
    rc, doc = audit_json(cache, "--user", accounts.c, "--policy", str(policy))
    assert doc["verdict"] == "UNSAFE"


def test_policy_from_the_user_config_dir(base, tmp_path):
    world = mkdir(base / "world", 0o777)
    cache = mkdir(world / "cache", 0o700)
    conf = tmp_path / "conf" / "jaxcache"
    conf.mkdir(parents=True)
    (conf / "policy.toml").write_text("trusted_users = ['nobody']\n")
    (conf / "policy.toml").chmod(0o600)
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "conf")}
    rc, doc = audit_json(cache, env=env)
    assert doc["policy"] == str(conf / "policy.toml")
    assert doc["verdict"] == "UNSAFE"  # 'everyone' can never be declared trusted


@needs_root
def test_other_users_processes_are_listed(base, accounts):
    cache = mkdir(base / "cache", 0o777)
    sleeper = subprocess.Popen([*as_user_argv(accounts.b), "sleep", "30"], cwd=cache)
    env_user = subprocess.Popen(["sleep", "30"], cwd="/",
                                env={"JAX_COMPILATION_CACHE_DIR": str(cache)})
    try:
        deadline = time.time() + 60  # generous: a loaded machine starts processes late
        while time.time() < deadline:
            _, doc = audit_json(cache)
            hows = {(u["user"], u["how"]) for u in doc["processes"]["uses"]}
            if (accounts.b, "cwd") in hows and ("root", "JAX_COMPILATION_CACHE_DIR") in hows:
                break
            time.sleep(0.1)
        assert (accounts.b, "cwd") in hows
        assert ("root", "JAX_COMPILATION_CACHE_DIR") in hows
        assert "users.process" in codes(doc)
    finally:
        for p in (sleeper, env_user):
            p.kill()
            p.wait()


@pytest.mark.parametrize("given,why", [("gs://b/p", "'b' is not a valid bucket name"),
                                       ("s3://b/p", "'b' is not a valid bucket name"),
                                       ("az://b/p", "supports gs://, s3:// only")])
def test_ls_refuses_urls_it_cannot_list(given, why):
    """ls lists gs:// and s3:// buckets (test_sealed_bucket.py, test_sealed_s3.py); a
    malformed bucket or another scheme is one line and exit 2, before any network access."""
    proc = jaxcache("ls", given)
    assert proc.returncode == 2 and why in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
