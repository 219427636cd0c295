"""`jaxcache seal --identity ci` and `seal --add-signature --identity ci` end to end (issue 46):
a real JAX job fills a directory, the CI job seals it keyless (its token fetched as GitHub
Actions hands it out, from the loopback issuer); a reader holding only the policy hits; one key
and one identity meet `signatures_needed = 2` through the CLI, and the same identity twice does
not count twice."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support import paths
from support.jobs import clean_env, jaxcache
from support.sigstore_stack import WF, trusting_policy

from jaxcache.trust.inputs import signing_keys

pytest.importorskip("jax")

JOB = str(paths.PROGRAMS / "two_jits.py")
NO_XLA_CACHES = {"JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES": "none"}  # as sealed readers run


def policy(path: Path, stack, extra: str = "") -> Path:
    return trusting_policy(path, stack.trusted_root, head=extra)


def results(proc) -> dict:
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fill(cache: Path) -> None:
    """A watched job fills `cache` (its origin ledger: every entry is this user's job's)."""
    proc = jaxcache("run", "-q", "--cache-dir", str(cache), "--", sys.executable, JOB,
                    env=clean_env(**NO_XLA_CACHES))
    assert proc.returncode == 0, proc.stderr[-3000:]


def read(cache: Path, pol: Path, record: Path):
    """A sealed reader with only the policy: no key, no token."""
    proc = jaxcache("run", "--sealed", "--cache-dir", str(cache), "--policy", str(pol),
                    "--record", str(record), "--", sys.executable, JOB, env=clean_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, json.loads(record.read_text())


def outcomes(rec: dict) -> list[str]:
    return sorted(m["outcome"] for m in rec["modules"] if m["name"].startswith("jit_"))


def entries(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.glob("*-cache"))


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    proc = jaxcache("run", "-q", "--cache-dir", str(tmp_path_factory.mktemp("g") / "c"), "--",
                    sys.executable, JOB, env=clean_env())
    assert proc.returncode == 0, proc.stderr
    return results(proc)["results"]


def seal(stack, cache: Path, pol: Path, *extra: str, **claims: str):
    return jaxcache("seal", str(cache), "--identity", "ci", "--sigstore-config",
                    str(stack.trust_config), "--policy", str(pol), "--format", "json", *extra,
                    env=clean_env(**stack.github_env(**claims)))


def test_seal_identity_ci_seals_what_a_job_filled_and_a_reader_with_the_policy_hits(
        sigstore_stack, golden, tmp_path):
    cache = tmp_path / "filled"
    fill(cache)
    pol = policy(tmp_path / "policy.toml", sigstore_stack)
    proc = seal(sigstore_stack, cache, pol)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["counts"]["signed-now"] == len(entries(cache)) > 0
    assert doc["signing_key"] == f"identity {WF}"
    assert "warning" not in proc.stderr  # its own identity is trusted: nothing to say
    sigs = [json.loads(p.read_bytes()) for p in cache.glob("*.sig")]
    assert sigs and all("sigstore_bundle" in s and "public_key" not in s for s in sigs)
    reader, rec = read(cache, pol, tmp_path / "read.json")
    assert results(reader)["results"] == golden
    assert outcomes(rec) and set(outcomes(rec)) == {"hit"}, rec["seal"]["rejections"]
    # verify names the identity of every entry
    ver = jaxcache("verify", str(cache), "--policy", str(pol), "--format", "json")
    assert ver.returncode == 0, ver.stdout
    assert all(e["identities"][0]["workflow"] == f"https://github.com/{WF}"
               for e in json.loads(ver.stdout)["entries"])


def test_seal_as_an_untrusted_identity_warns_once_and_its_entries_are_misses(
        sigstore_stack, golden, tmp_path):
    cache = tmp_path / "pr"
    fill(cache)
    pol = policy(tmp_path / "policy.toml", sigstore_stack)
    proc = seal(sigstore_stack, cache, pol, ref="refs/pull/3/merge")
    assert proc.returncode == 0, proc.stdout + proc.stderr  # sealed: its exit status stands
    warned = [line for line in proc.stderr.splitlines() if "warning" in line]
    assert len(warned) == 1, proc.stderr
    assert "jax-cache.yml@refs/pull/3/merge" in warned[0]
    assert "not among the policy's trusted identities" in warned[0]
    reader, rec = read(cache, pol, tmp_path / "read.json")
    assert results(reader)["results"] == golden
    assert "hit" not in outcomes(rec)
    assert all("refs/pull/3/merge" in r["reason"] for r in rec["seal"]["rejections"])


def test_one_key_and_one_identity_meet_a_threshold_of_two_through_the_cli(
        sigstore_stack, golden, tmp_path):
    """The publisher signs with a key; the CI job co-signs keyless what its own build made
    byte for byte (--from); readers needing 2 hit those; the same identity again (another
    job, another certificate) adds nothing, and one identity alone is never two."""
    priv = tmp_path / "ci.key"
    made = jaxcache("keygen", "--name", "ci-key", str(priv))
    assert made.returncode == 0, made.stderr
    pub = Path(f"{priv}.pub").read_text().strip()
    pol = policy(tmp_path / "policy.toml", sigstore_stack,
                 f'signatures_needed = 2\ntrusted_keys = [{{ holder = "root", key = "{pub}" }}]\n')
    shared = tmp_path / "shared"
    fill(shared)
    first = jaxcache("seal", str(shared), "--signing-key", str(priv), "--policy", str(pol))
    assert first.returncode == 0, first.stdout + first.stderr
    _, rec = read(shared, pol, tmp_path / "one.json")
    assert "hit" not in outcomes(rec)
    assert {r["status"] for r in rec["seal"]["rejections"]} == {"too-few-signatures"}
    own = tmp_path / "own"
    fill(own)  # the CI job's own build of the same job
    same = {n for n in entries(shared)
            if (own / n).is_file() and (own / n).read_bytes() == (shared / n).read_bytes()}
    assert same, "no entry of the job compiled to the same bytes twice"
    co = seal(sigstore_stack, shared, pol, "--add-signature", "--from", str(own))
    doc = json.loads(co.stdout)
    status = {e["name"]: e["status"] for e in doc["entries"]}
    assert {n for n, st in status.items() if st == "co-signed"} == same, co.stdout + co.stderr
    assert co.returncode == (0 if same == set(entries(shared)) else 1)
    reader, rec = read(shared, pol, tmp_path / "two.json")
    assert results(reader)["results"] == golden
    hits = [m for m in rec["modules"] if m["name"].startswith("jit_") and m["outcome"] == "hit"]
    assert len(hits) == len(same)
    ver = json.loads(jaxcache("verify", str(shared), "--policy", str(pol), "--format",
                              "json").stdout)
    valid = {e["name"]: e for e in ver["entries"] if e["status"] == "valid"}
    assert set(valid) == same
    assert all("ci-key" in e["reason"] and f"identity {WF}" in e["reason"]
               for e in valid.values())
    # the same identity again, from another job (another run, another certificate): nothing
    before = sorted(p.name for p in shared.iterdir())
    again = seal(sigstore_stack, shared, pol, "--add-signature", "--from", str(own),
                 run_id="777")
    assert sorted(p.name for p in shared.iterdir()) == before, again.stdout
    assert all(e["reason"].startswith("already signed by identity")
               for e in json.loads(again.stdout)["entries"] if e["name"] in same)


def test_one_identity_twice_is_one_signature(sigstore_stack, tmp_path):
    """Sealed keyless and then co-signed by the same identity: one signer, too few for 2."""
    key = signing_keys.generate("other")
    pol = policy(tmp_path / "policy.toml", sigstore_stack,
                 f'signatures_needed = 2\ntrusted_keys = [{{ holder = "root", key = '
                 f'"{key.public.named_text}" }}]\n')
    cache = tmp_path / "c"
    fill(cache)
    proc = seal(sigstore_stack, cache, pol)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # signed (one signer of two)
    doc = json.loads(proc.stdout)
    assert doc["counts"]["signed-now"] == len(entries(cache))
    again = seal(sigstore_stack, cache, pol, "--add-signature", "--from", str(cache),
                 run_id="778")
    assert again.returncode == 2, again.stdout + again.stderr  # --from: not the same place
    again = seal(sigstore_stack, cache, pol, "--add-signature", run_id="778")
    assert not list(cache.glob("*.*.sig")), again.stdout  # no co-signature by itself
    ver = json.loads(jaxcache("verify", str(cache), "--policy", str(pol), "--format",
                              "json").stdout)
    assert {e["status"] for e in ver["entries"]} == {"too-few-signatures"}
