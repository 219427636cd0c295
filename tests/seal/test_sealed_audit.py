"""The audit of a sealed cache, and `jaxcache run --sealed` on a directory others can write."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from support import paths
from support.jobs import audit_json, codes, jaxcache
from support.users import mkdir, needs_root

pytest.importorskip("cryptography")


def keygen(path: Path) -> str:
    proc = jaxcache("keygen", str(path))
    assert proc.returncode == 0, proc.stderr
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    return (path.parent / (path.name + ".pub")).read_text().strip()


def policy(tmp_path: Path, cache: Path, pub: str, holder: str, users: list[str]) -> Path:
    p = tmp_path / "policy.toml"
    p.write_text(f'[[cache]]\npath = "{cache}"\ntrusted_users = {json.dumps(users)}\n'
                 f'trusted_keys = [{{ holder = "{holder}", key = "{pub}" }}]\n')
    p.chmod(0o600)
    return p


@needs_root
def test_world_writable_dir_is_sealed_when_the_key_holder_is_declared(base, tmp_path, accounts):
    cache = mkdir(base / "shared", 0o777)
    pub = keygen(tmp_path / "keys" / "ci.key")
    rc, plain = audit_json(cache)
    assert rc == 1 and plain["verdict"] == "UNSAFE"
    pol = str(policy(tmp_path, cache, pub, "root", []))
    rc, doc = audit_json(cache, "--sealed", "--policy", pol)
    assert rc == 0 and doc["verdict"] == "SEALED", doc["findings"]
    text = jaxcache("audit", "--sealed", "--policy", pol, str(cache))
    assert text.returncode == 0 and "verdict: SEALED" in text.stdout
    assert "seal.keys" in codes(doc)
    untrusted = [f for f in doc["findings"] if f["code"] == "writer.untrusted"]
    assert untrusted and all(f["effect"] == "warning" and "sealed" in f["message"]
                             for f in untrusted)
    # keys in the policy protect only readers that check them: a plain reader is UNSAFE
    rc, doc = audit_json(cache, "--policy", pol)
    assert rc == 1 and doc["verdict"] == "UNSAFE" and "seal.keys" not in codes(doc)
    plain = jaxcache("run", "--policy", pol, "--cache-dir", str(cache), "--", sys.executable,
                     "-c", "print('ran')")
    assert plain.returncode == 1 and "refusing cache" in plain.stderr and "ran" not in plain.stdout
    # a key held by someone who is not a declared writer keeps it UNSAFE
    rc, doc = audit_json(cache, "--sealed", "--policy",
                         str(policy(tmp_path, cache, pub, accounts.c, [])))
    assert rc == 1 and doc["verdict"] == "UNSAFE" and "seal.holder-undeclared" in codes(doc)
    rc, doc = audit_json(cache, "--sealed", "--policy",
                         str(policy(tmp_path, cache, pub, accounts.c, [accounts.c])))
    assert rc == 0 and doc["verdict"] == "SEALED"


def test_policy_rejects_malformed_keys(base, tmp_path):
    cache = mkdir(base / "c", 0o700)
    bad = policy(tmp_path, cache, "ed25519:AAAA", "root", [])
    proc = jaxcache("audit", "--policy", str(bad), str(cache))
    assert proc.returncode == 2 and "32 bytes" in proc.stderr and "Traceback" not in proc.stderr


def test_keygen_refuses_to_overwrite_or_to_live_in_a_cache(tmp_path):
    key = tmp_path / "k" / "ci.key"
    keygen(key)
    again = jaxcache("keygen", str(key))
    assert again.returncode == 2 and "already exists" in again.stderr
    for bad, said in (("", "give KEYFILE"), (str(tmp_path) + "/", "give a file name")):
        proc = jaxcache("keygen", bad)
        assert proc.returncode == 2 and said in proc.stderr, proc.stderr
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / ("jit_f-" + "ab" * 32 + "-cache")).write_bytes(b"x")
    inside = jaxcache("keygen", str(cache / "ci.key"))
    assert inside.returncode == 2 and "compilation cache" in inside.stderr
    assert not (cache / "ci.key").exists()


PROGRAM = """
import jax, jax.numpy as jnp
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
f = jax.jit(lambda x: jnp.tanh(x @ x.T).sum())
print(float(f(jnp.ones((8, 8)))))
"""


@needs_root
def test_run_sealed_on_a_dir_others_can_write(base, tmp_path):
    pytest.importorskip("jax")
    cache = mkdir(base / "shared", 0o777)
    key = tmp_path / "keys" / "ci.key"
    pub = keygen(key)
    job = tmp_path / "job.py"
    job.write_text(PROGRAM)
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    refused = jaxcache("run", "--cache-dir", str(cache), "--", sys.executable, str(job), env=env)
    assert refused.returncode == 1 and "UNSAFE" in refused.stderr
    rec = tmp_path / "publish.json"
    proc = jaxcache("run", "--sealed", "--signing-key", str(key), "--cache-dir", str(cache),
                    "--record", str(rec), "--", sys.executable, str(job), env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "64.0"
    doc = json.loads(rec.read_text())
    assert doc["seal"]["signing_key"] and doc["seal"]["rejections"] == []
    signed = [p for p in cache.iterdir() if p.name.endswith("-cache.sig")]
    assert signed
    # an attacker (anyone: the dir is 0777) replaces the main entry with another one
    (entry,) = [p for p in cache.iterdir() if p.name.startswith("jit__lambda-")
                and p.name.endswith("-cache")]
    other = next(p for p in cache.iterdir() if p.name.endswith("-cache") and p != entry)
    entry.write_bytes(other.read_bytes())
    rec2 = tmp_path / "consume.json"
    proc = jaxcache("run", "--sealed", "--trusted-key", pub, "--cache-dir", str(cache),
                    "--record", str(rec2), "--", sys.executable, str(job), env=env)
    assert proc.returncode == 0 and proc.stdout.strip() == "64.0", proc.stderr
    consumed = json.loads(rec2.read_text())
    seal = consumed["seal"]
    assert seal["signing_key"] is None and seal["writes"] == []
    (main,) = [m for m in consumed["modules"] if m["cache_key"] == entry.name[:-len("-cache")]]
    assert (main["outcome"], main["reason"]) == ("skipped", "sealed-rejected")
    assert [r["status"] for r in seal["rejections"]] == ["bad-signature"]
    assert "rejected" in proc.stderr and "sealed: read-only" in proc.stderr
    assert entry.exists()  # left in place
    # the publisher again: the planted file holds the name, and it says so
    rec3 = tmp_path / "republish.json"
    proc = jaxcache("run", "--sealed", "--signing-key", str(key), "--cache-dir", str(cache),
                    "--record", str(rec3), "--", sys.executable, str(job), env=env)
    assert proc.returncode == 0 and "cannot publish" in proc.stderr, proc.stderr
    (main,) = [m for m in json.loads(rec3.read_text())["modules"]
               if m["cache_key"] == entry.name[:-len("-cache")]]
    assert main["reason"] == "sealed-blocked"


def test_run_sealed_stops_a_job_whose_probe_cannot_seal(tmp_path):
    """A job under --sealed whose interpreter lacks jaxcache's dependencies must not run
    with a cache: the probe stops it, and JAX never had the cache dir."""
    pytest.importorskip("jax")
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    key = tmp_path / "keys" / "ci.key"
    keygen(key)
    job = tmp_path / "job.py"
    job.write_text("import sys; sys.modules['cryptography'] = None\n" + PROGRAM)
    proc = jaxcache("run", "--sealed", "--signing-key", str(key), "--cache-dir", str(cache),
                    "--", sys.executable, str(job), env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 1 and "stopping the job" in proc.stderr, proc.stderr
    assert "64.0" not in proc.stdout
    assert list(cache.iterdir()) == []


def test_bench_sealed_signs_every_trial_and_warm_runs_hit(tmp_path):
    pytest.importorskip("jax")
    work = tmp_path / "work"
    work.mkdir(mode=0o700)
    out = tmp_path / "bench.json"
    train = paths.CHECKOUT / "examples" / "train.py"
    proc = jaxcache("bench", "-t", "1", "-k", "1", "--no-prime", "--sealed", "--workdir",
                    str(work), "--json", str(out), "--", sys.executable, str(train),
                    "--steps", "40", env={**os.environ, "JAX_PLATFORMS": "cpu",
                                          "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"})
    assert proc.returncode in (0, 1), proc.stderr
    doc = json.loads(out.read_text())
    assert doc["config"]["sealed"] is True
    cache = work / "trial-1" / "cache"
    entries = [p for p in cache.iterdir() if p.name.endswith("-cache")]
    assert entries and all((cache / (p.name + ".sig")).exists() for p in entries)
    warm = json.loads((work / "trial-1" / "warm-1.json").read_text())
    assert warm["seal"]["rejections"] == [] and warm["counts"]["hits"] >= len(entries) - 1
    assert (work / "keys" / "bench.key").stat().st_mode & 0o777 == 0o600


@needs_root
def test_sealed_run_refusals_come_before_the_job(base, tmp_path):
    shared = mkdir(base / "shared", 0o777)
    marker = tmp_path / "ran"
    job = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    nokeys = jaxcache("run", "--sealed", "--cache-dir", str(shared), "--", *job)
    assert nokeys.returncode == 2 and "needs trusted keys" in nokeys.stderr
    key = tmp_path / "keys" / "ci.key"
    pub = keygen(key)
    open_local = mkdir(base / "open", 0o777) / "local"
    local = jaxcache("run", "--sealed", "--trusted-key", pub, "--local", str(open_local),
                     "--cache-dir", str(shared), "--", *job)
    assert local.returncode == 1 and "refusing cache" in local.stderr, local.stderr
    assert not marker.exists()  # neither job started


def test_key_files_are_checked(base, tmp_path):
    open_dir = mkdir(base / "open", 0o777)
    proc = jaxcache("keygen", str(open_dir / "ci.key"))
    assert proc.returncode == 2 and "anyone can write there" in proc.stderr
    assert list(open_dir.iterdir()) == []
    key = tmp_path / "k" / "ci.key"
    keygen(key)
    cache = mkdir(base / "cache", 0o700)
    proc = jaxcache("run", "--sealed", "--signing-key", str(key) + ".pub", "--cache-dir",
                    str(cache), "--", sys.executable, "-c", "pass")
    assert proc.returncode == 2 and "is a public key" in proc.stderr


THREE = """
import jax, jax.numpy as jnp
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
x = jnp.arange(8.0)
print(float(jax.jit(lambda v: v * 2)(x).sum() + jax.jit(lambda v: v + 3)(x).sum()
            + jax.jit(lambda v: v ** 2)(x).sum()))
"""


def test_run_record_lists_the_entries_evicted_under_max_size(tmp_path):
    """Room for one entry: each new write evicts the one before, and the record says which;
    what is left is still signed (never an entry without its signature)."""
    key = tmp_path / "keys" / "ci.key"
    keygen(key)
    job = tmp_path / "three.py"
    job.write_text(THREE)
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("JAX_COMPILATION_CACHE_MAX_SIZE", None)

    def run(cache: Path, **extra: str) -> dict:
        rec = tmp_path / f"{cache.name}.json"
        proc = jaxcache("run", "--sealed", "--signing-key", str(key), "--cache-dir", str(cache),
                        "--record", str(rec), "--", sys.executable, str(job),
                        env={**env, **extra})
        assert proc.returncode == 0, proc.stderr
        return json.loads(rec.read_text())["seal"]

    free = run(tmp_path / "free")
    assert len(free["writes"]) >= 3 and free["evictions"] == []
    sizes = [p.stat().st_size for p in (tmp_path / "free").iterdir()
             if p.name.endswith("-cache")]
    tight = tmp_path / "tight"
    limit = max(sizes) + 1
    seal = run(tight, JAX_COMPILATION_CACHE_MAX_SIZE=str(limit))
    assert len(seal["writes"]) == len(free["writes"]) and seal["evictions"]
    left = {p.name for p in tight.iterdir() if p.name.endswith("-cache")}
    assert sum((tight / n).stat().st_size for n in left) <= limit
    assert all((tight / (n + ".sig")).exists() for n in left)
    evicted = {e["entry"] for e in seal["evictions"]}
    assert evicted.isdisjoint(left)
    assert evicted <= {w["key"] + "-cache" for w in seal["writes"]}
