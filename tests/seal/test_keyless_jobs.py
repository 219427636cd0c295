"""Keyless sealing end to end (issue 46): real JAX jobs under `jaxcache run --sealed`, a
publisher signing as its CI identity (its token fetched as GitHub Actions hands it out, from
the loopback issuer), readers holding only the policy: no key anywhere."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support import paths
from support.jobs import clean_env, jaxcache
from support.sigstore_stack import WF, trusting_policy

from jaxcache.documents import schemas

pytest.importorskip("jax")

JOB = str(paths.PROGRAMS / "two_jits.py")


def policy(root: Path, stack) -> Path:
    return trusting_policy(root / "policy.toml", stack.trusted_root)


def run(cache: Path, pol: Path, record: Path, *extra: str, env: dict | None = None):
    proc = jaxcache("run", "--sealed", "--cache-dir", str(cache), "--policy", str(pol),
                    "--record", str(record), *extra, "--", sys.executable, JOB,
                    env=clean_env(**(env or {})))
    return proc, json.loads(record.read_text())


def outcomes(rec: dict) -> list[str]:
    return sorted(m["outcome"] for m in rec["modules"] if m["name"].startswith("jit_"))


@pytest.fixture(scope="module")
def world(sigstore_stack, tmp_path_factory):
    root = tmp_path_factory.mktemp("keyless")
    pol = policy(root, sigstore_stack)
    plain = jaxcache("run", "--cache-dir", str(root / "plain"), "--", sys.executable, JOB,
                     env=clean_env())
    assert plain.returncode == 0, plain.stderr
    return {"root": root, "policy": pol, "golden": results(plain)}


def results(proc) -> dict:
    """The job's own output: its numbers (and hits, which the cache decides)."""
    return json.loads(proc.stdout.strip().splitlines()[-1])["results"]


def publish(world, stack, name: str, **claims: str):
    cache = world["root"] / name
    env = stack.github_env(**claims)
    proc, rec = run(cache, world["policy"], world["root"] / f"{name}-pub.json",
                    "--identity", "ci", "--sigstore-config", str(stack.trust_config), env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert results(proc) == world["golden"]  # the job's output is its own
    return cache, rec, proc


def test_the_trusted_workflow_publishes_and_a_reader_with_only_the_policy_hits(
        sigstore_stack, world):
    cache, rec, proc = publish(world, sigstore_stack, "main")
    assert "written" in outcomes(rec), rec["seal"]
    assert rec["seal"]["signing_identity"]["identity"] == f"https://github.com/{WF}"
    assert "signing keyless as identity https://github.com/" + WF in proc.stderr
    assert rec["seal"]["signing_identity"]["rejected_by_readers"] is None
    assert "WARNING" not in proc.stderr
    assert [i["identity"] for i in rec["seal"]["trusted_identities"]] == [WF]  # the policy's
    pytest.importorskip("jsonschema").validate(rec, schemas.load("run"))
    sigs = [json.loads(p.read_bytes()) for p in cache.glob("*.sig")]
    assert sigs and all("sigstore_bundle" in s and "public_key" not in s for s in sigs)
    env = {k: "" for k in ("ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN")}
    reader, rec2 = run(cache, world["policy"], world["root"] / "main-read.json", env=env)
    assert reader.returncode == 0, reader.stderr[-3000:]
    assert results(reader) == world["golden"]
    assert json.loads(reader.stdout.strip().splitlines()[-1])["hits"] == len(outcomes(rec2))
    assert outcomes(rec2) and set(outcomes(rec2)) == {"hit"}, rec2["seal"]["rejections"]
    assert not rec2["seal"]["rejections"]


@pytest.mark.parametrize(("name", "claims", "seen"), [
    ("pr", {"ref": "refs/pull/7/merge"}, "jax-cache.yml@refs/pull/7/merge"),
    ("other-workflow", {"workflow_path": ".github/workflows/other.yml"}, "workflows/other.yml@"),
    ("other-repo", {"repository": "evil/repo"}, "https://github.com/evil/repo/"),
    ("other-issuer", {"iss": "LOCAL"}, "(issuer http://127.0.0.1:"),
])
def test_other_identities_sign_entries_the_reader_rejects(sigstore_stack, world, name, claims,
                                                          seen):
    if claims.get("iss") == "LOCAL":
        claims = {"iss": sigstore_stack.oidc}
    cache, rec, proc = publish(world, sigstore_stack, name, **claims)
    assert "written" in outcomes(rec)
    # the publisher is told once, first, that every reader will reject what it writes
    # (its exit status stands: the job's)
    warned = [line for line in proc.stderr.splitlines() if line.startswith("WARNING")]
    assert len(warned) == 1 and seen in warned[0], proc.stderr[-3000:]
    assert "every reader with this policy rejects what it signs" in warned[0]
    assert proc.stderr.index(warned[0]) < proc.stderr.index("jaxcache run:")
    assert seen in rec["seal"]["signing_identity"]["rejected_by_readers"]
    pytest.importorskip("jsonschema").validate(rec, schemas.load("run"))
    reader, rec2 = run(cache, world["policy"], world["root"] / f"{name}-read.json")
    assert reader.returncode == 0, reader.stderr[-3000:]
    assert results(reader) == world["golden"]  # recompiled, the same numbers
    assert "hit" not in outcomes(rec2)
    rejected = rec2["seal"]["rejections"]
    assert rejected and all(r["status"] == "unknown-key" and seen in r["reason"]
                            and "which is not trusted" in r["reason"] for r in rejected), rejected
