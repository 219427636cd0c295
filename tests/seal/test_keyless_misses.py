"""Issue 46's acceptance, end to end: "A bundle whose certificate expired before the log's
timestamp, a bundle for other bytes, a bundle copied from another entry, and an entry signed
by a revoked identity are all misses, reported." A real JAX job publishes keyless
(`run --sealed --identity ci`); one of its entries is then spoiled each way, and a sealed
reader with only the policy misses exactly that one (recompiling it: the job's numbers are its
own), hits the others, and its run record names the entry and the reason."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from support import paths
from support.jobs import clean_env, jaxcache
from support.sigstore_stack import GH, WF, trusting_policy

from jaxcache.seal.publishing import tier_names as names
from jaxcache.seal.signing.keyless import KeylessSigner

pytest.importorskip("jax")

JOB = str(paths.PROGRAMS / "two_jits.py")
REVOKED_RUN = "4242"


def merged_root(a: Path, b: Path, out: Path) -> Path:
    """One trusted root holding both deployments' CAs, logs and timestamp authorities: the
    late one's bundles verify but for their time."""
    one, two = json.loads(a.read_text()), json.loads(b.read_text())
    for part in ("tlogs", "certificateAuthorities", "ctlogs", "timestampAuthorities"):
        one[part] = [*one[part], *two[part]]
    out.write_text(json.dumps(one))
    out.chmod(0o600)
    return out


def policy(path: Path, root: Path, extra: str = "") -> Path:
    return trusting_policy(path, root, tail=extra)


def results(proc) -> dict:
    return json.loads(proc.stdout.strip().splitlines()[-1])


def resign(stack, name: str, data: bytes, **claims: str) -> bytes:
    signer = KeylessSigner(stack.mint("github", **claims), str(stack.trust_config))
    try:
        return signer.document(names.key_of(name), data)
    finally:
        signer.close()


@pytest.fixture(scope="module")
def world(sigstore_stack, tmp_path_factory):
    from support import sigstore_stack as stackmod

    root = tmp_path_factory.mktemp("keyless-misses")
    plain = jaxcache("run", "-q", "--cache-dir", str(root / "plain"), "--", sys.executable,
                     JOB, env=clean_env())
    assert plain.returncode == 0, plain.stderr
    late = stackmod.start(root / "late", skew_s=3600)  # its log an hour ahead of Fulcio
    try:
        trust = merged_root(sigstore_stack.trusted_root, late.trusted_root,
                            root / "trusted_root.json")
        pol = policy(root / "policy.toml", trust)
        pub = root / "published"
        proc = jaxcache("run", "--sealed", "--cache-dir", str(pub), "--policy", str(pol),
                        "--identity", "ci", "--sigstore-config",
                        str(sigstore_stack.trust_config), "--", sys.executable, JOB,
                        env=clean_env(**sigstore_stack.github_env()))
        assert proc.returncode == 0, proc.stderr[-3000:]
        entries = sorted(p.name for p in pub.glob("*-cache"))
        assert len(entries) >= 2, entries
        victim, other = entries[0], entries[1]
        data = (pub / victim).read_bytes()
        spoiled = {
            "expired": resign(late, victim, data),
            "revoked": resign(sigstore_stack, victim, data, run_id=REVOKED_RUN),
        }
    finally:
        late.stop()
    return {"root": root, "pub": pub, "policy": pol, "trust": trust, "victim": victim,
            "other": other, "spoiled": spoiled, "golden": results(plain)["results"],
            "entries": entries}


def spoil(world, case: str, cache: Path) -> Path:
    victim, other = cache / world["victim"], cache / world["other"]
    sig = Path(f"{victim}.sig")
    if case in ("expired", "revoked"):
        sig.write_bytes(world["spoiled"][case])
    elif case == "other-bytes":  # the entry's bytes changed under its bundle, same length
        data = bytearray(victim.read_bytes())
        data[len(data) // 2] ^= 0xFF
        victim.write_bytes(bytes(data))
    elif case == "copied-bundle":  # another entry's bundle, in a document naming this one
        doc = json.loads(sig.read_bytes())
        doc["sigstore_bundle"] = json.loads(Path(f"{other}.sig").read_bytes())["sigstore_bundle"]
        sig.write_text(json.dumps(doc))
    if case == "revoked":
        return policy(world["root"] / "revoking.toml", world["trust"],
                      f'[[revoked_identities]]\nissuer = "{GH}"\nrun = '
                      f'"https://github.com/org/repo/actions/runs/{REVOKED_RUN}/attempts/1"\n')
    return world["policy"]


@pytest.mark.parametrize(("case", "status", "said"), [
    ("expired", "bad-signature", "not valid at validation time"),
    ("other-bytes", "bad-signature", "differ from what was signed"),
    ("copied-bundle", "bad-signature", "its Sigstore bundle does not verify"),
    ("revoked", "revoked-key", "which the policy revokes"),
])
def test_each_spoiled_entry_is_a_miss_reported_with_its_reason(world, tmp_path, case, status,
                                                                said):
    cache = tmp_path / "cache"
    shutil.copytree(world["pub"], cache)
    pol = spoil(world, case, cache)
    record = tmp_path / "read.json"
    proc = jaxcache("run", "--sealed", "--cache-dir", str(cache), "--policy", str(pol),
                    "--record", str(record), "--", sys.executable, JOB, env=clean_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert results(proc)["results"] == world["golden"]  # the job's numbers are its own
    rec = json.loads(record.read_text())
    rejected = rec["seal"]["rejections"]
    key = names.key_of(world["victim"])
    assert [r["key"] for r in rejected] == [key], rejected
    (r,) = rejected
    assert r["status"] == status and said in r["reason"], r
    if case == "revoked":
        assert f"signed by identity https://github.com/{WF}" in r["reason"]
        assert f"run https://github.com/org/repo/actions/runs/{REVOKED_RUN}/attempts/1" \
            in r["reason"]
    by_key = {m.get("cache_key"): m["outcome"] for m in rec["modules"]}
    assert by_key[key] != "hit"
    others = {names.key_of(n) for n in world["entries"]} - {key}
    assert others and all(by_key.get(k) == "hit" for k in others & set(by_key)), by_key
    # explain names the rejection and its reason
    why = jaxcache("explain", str(record), "--format", "json")
    assert said in why.stdout, why.stdout[-2000:]
