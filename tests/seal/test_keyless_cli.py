"""Keyless signatures through the commands (issue 46): `verify`, `ls` and `explain` name the
CI identity of each keyless-signed entry (issuer, repository, workflow, ref) and of each
rejection; `seal --identity ci` and `seal --add-signature --identity ci` sign a directory
keyless, through the CLI. Signed against the loopback Sigstore (tests/support/sigstore_stack.py),
judged offline against its trusted root."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.jobs import jaxcache
from support.sigstore_stack import GH, WF, trusting_policy

from jaxcache.documents import schemas
from jaxcache.seal.signing.keyless import KeylessSigner

PR = "org/repo/.github/workflows/jax-cache.yml@refs/pull/7/merge"


def entry(i: int) -> str:
    return f"jit_f{i}-{i:064x}-cache"


def data(i: int) -> bytes:
    return f"compiled executable {i} ".encode() * 50


def policy(root: Path, stack, extra: str = "") -> Path:
    return trusting_policy(root / "policy.toml", stack.trusted_root, head=extra)


def private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700)
    return path


def put(cache: Path, i: int, sig: bytes | None = None) -> None:
    name = entry(i)
    (cache / name).write_bytes(data(i))
    os.chmod(cache / name, 0o600)
    if sig is not None:
        (cache / f"{name}.sig").write_bytes(sig)


def keyless_doc(stack, i: int, **claims: str) -> bytes:
    signer = KeylessSigner(stack.mint("github", **claims), str(stack.trust_config))
    try:
        return signer.document(entry(i)[:-len("-cache")], data(i))
    finally:
        signer.close()


@pytest.fixture(scope="module")
def mixed(sigstore_stack, tmp_path_factory):
    """Two entries signed by the trusted workflow on main, one by the same workflow on a PR."""
    root = tmp_path_factory.mktemp("keyless-cli")
    cache = private_dir(root / "cache")
    put(cache, 1, keyless_doc(sigstore_stack, 1))
    put(cache, 2, keyless_doc(sigstore_stack, 2))
    put(cache, 3, keyless_doc(sigstore_stack, 3, ref="refs/pull/7/merge"))
    return root, cache, policy(root, sigstore_stack)


def test_verify_json_names_each_entrys_identity_and_each_rejections(mixed):
    root, cache, pol = mixed
    proc = jaxcache("verify", str(cache), "--policy", str(pol), "--format", "json")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    pytest.importorskip("jsonschema").validate(doc, schemas.load("seal-scan"))
    by = {e["name"]: e for e in doc["entries"]}
    for i in (1, 2):
        e = by[entry(i)]
        assert e["status"] == "valid", e
        (seen,) = e["identities"]
        assert seen["issuer"] == GH and seen["workflow"] == f"https://github.com/{WF}"
        assert seen["repository"] == "https://github.com/org/repo"
        assert seen["ref"] == "refs/heads/main" and seen["run"]
    bad = by[entry(3)]
    assert bad["status"] == "unknown-key" and "which is not trusted" in bad["reason"]
    (seen,) = bad["identities"]
    assert seen["workflow"] == f"https://github.com/{PR}" and seen["ref"] == "refs/pull/7/merge"
    counts = {i["workflow"]: (i["valid"], i["rejected"]) for i in doc["identities"]}
    assert counts == {f"https://github.com/{WF}": (2, 0), f"https://github.com/{PR}": (0, 1)}


def test_verify_text_names_the_identities(mixed):
    root, cache, pol = mixed
    proc = jaxcache("verify", str(cache), "--policy", str(pol), "-v")
    assert proc.returncode == 1, proc.stderr
    out = " ".join(proc.stdout.split())  # wrapped lines joined
    assert (f"identity https://github.com/{WF} (issuer {GH}, repository "
            "https://github.com/org/repo, ref refs/heads/main, event push) signed keyless: 2 "
            "valid") in out
    assert f"identity https://github.com/{PR} (issuer {GH}" in out and "1 rejected" in out
    assert f"{entry(1)} (" in out and f"signed by identity {WF}" in out
    assert f"UNKNOWN KEY {entry(3)}" in out and f"signed by identity https://github.com/{PR}" \
        in out


def test_ls_names_the_identity_each_signature_claims(mixed):
    root, cache, pol = mixed
    proc = jaxcache("ls", str(cache), "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    signers = json.loads(proc.stdout)["signers"]
    assert signers[f"{entry(1)}.sig"].startswith(f"identity https://github.com/{WF} (issuer {GH}")
    assert f"identity https://github.com/{PR}" in signers[f"{entry(3)}.sig"]
    text = jaxcache("ls", str(cache), "--policy", str(pol)).stdout
    assert f"identity {WF}  " in text  # the policy's trusted identity, by its workflow
    assert f"identity https://github.com/{PR} (issuer {GH}" in text  # as its certificate says
