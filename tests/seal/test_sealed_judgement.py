"""One judgement for a sealed cache (issue 28, point 3): verify, audit --sealed and
run --sealed agree on whether a sealed reader loads the directory, every refusal says what to
do, and a key's holder can be declared a signer without becoming a writer plain readers trust
(trusted_signers). A real second user holds the key; a real job runs sealed."""

from __future__ import annotations

import json
import sys

import pytest
from support import paths
from support.jobs import clean_env, jaxcache
from support.users import mkdir, needs_root

pytest.importorskip("cryptography")
pytestmark = needs_root

JOB = str(paths.PROGRAMS / "two_jits.py")


@pytest.fixture
def shared(base, accounts, tmp_path):
    """A directory a real user, accounts.a, owns and writes, and a key that user holds."""
    cache = mkdir(base / "shared", 0o755, accounts.a)
    key = tmp_path / "keys" / "pub.key"
    assert jaxcache("keygen", str(key)).returncode == 0
    pub = (tmp_path / "keys" / "pub.key.pub").read_text().strip()

    def policy(extra: str) -> str:
        path = tmp_path / f"policy-{len(extra)}.toml"
        path.write_text(f'[[cache]]\npath = "{cache}"\n{extra}'
                        f'trusted_keys = [{{ holder = "{accounts.a}", key = "{pub}" }}]\n')
        path.chmod(0o600)
        return str(path)

    return cache, key, policy


def test_verify_audit_and_run_refuse_alike_with_the_remedy(shared, accounts):
    cache, key, policy = shared
    undeclared = policy("")
    verify = jaxcache("verify", "--policy", undeclared, str(cache))
    assert verify.returncode == 1, verify.stdout
    assert verify.stdout.startswith("REFUSED: every entry verifies")
    assert "what to do: declare" in verify.stdout and "trusted_signers" in verify.stdout
    doc = json.loads(jaxcache("verify", "--policy", undeclared, "--format", "json",
                              str(cache)).stdout)
    assert doc["ok"] is False and doc["reader_refused"]["verdict"] == "UNSAFE"
    audit = json.loads(jaxcache("audit", "--sealed", "--policy", undeclared, "--format", "json",
                                str(cache)).stdout)
    assert audit["verdict"] == doc["reader_refused"]["verdict"]
    assert "seal.holder-undeclared" in {f["code"] for f in audit["findings"]}
    run = jaxcache("run", "--sealed", "--signing-key", str(key), "--policy", undeclared,
                   "--cache-dir", str(cache), "--record", str(cache.parent / "r.json"), "--",
                   sys.executable, JOB, env=clean_env())
    assert run.returncode == 1
    lines = run.stderr.splitlines()
    assert lines[0].startswith(f"jaxcache: refusing cache {cache}: verdict UNSAFE")
    assert f"({accounts.a})" not in lines[0]  # refused for the key, not for who writes
    assert any(line.strip().startswith("what to do: declare") for line in lines), run.stderr


def test_a_declared_signer_seals_for_readers_and_stays_a_writer_for_plain_ones(shared,
                                                                               accounts):
    cache, key, policy = shared
    signer = policy(f'trusted_signers = ["{accounts.a}"]\n')
    run = jaxcache("run", "--sealed", "--signing-key", str(key), "--policy", signer,
                   "--cache-dir", str(cache), "--record", str(cache.parent / "r.json"), "--",
                   sys.executable, JOB, env=clean_env())
    assert run.returncode == 0, run.stderr
    verify = jaxcache("verify", "--policy", signer, str(cache))
    assert verify.returncode == 0 and verify.stdout.startswith("VALID: every entry verifies")
    sealed = json.loads(jaxcache("audit", "--sealed", "--policy", signer, "--format", "json",
                                 str(cache)).stdout)
    assert sealed["verdict"] == "SEALED"
    # the directory's writer, declared as a signer only: plain readers still count them as
    # an undeclared writer (trusted_users would have made it SHARED-BY-POLICY for them)
    plain = json.loads(jaxcache("audit", "--policy", signer, "--format", "json",
                                str(cache)).stdout)
    assert plain["verdict"] == "UNSAFE" and plain["untrusted_writers"] == [accounts.a]


def test_the_sealed_audit_lists_its_writers_by_the_sealed_rule(shared, accounts):
    """Issue 44, point 4: under "(sealed: without a trusted key they can only cause
    recompiles)" the declared signer is not "[untrusted] ... choose the code JAX runs", nor is
    a writer without a key; text and JSON say the same."""
    import os
    import shutil

    cache, key, policy = shared
    shutil.chown(cache, accounts.a, accounts.group)
    os.chmod(cache, 0o775)  # the group (accounts.b among its members) writes too, keyless
    signer = policy(f'trusted_signers = ["{accounts.a}"]\n')
    text = jaxcache("audit", "--sealed", "--no-processes", "--policy", signer, str(cache),
                    env={**os.environ, "NO_COLOR": "1"})
    assert text.returncode == 0, text.stdout + text.stderr
    assert text.stdout.startswith("verdict: SEALED")
    listed = text.stdout.split("who can write here (sealed:", 1)[1].split("\n\n", 1)[0]
    assert "[untrusted]" not in listed and "i.e. choose the code" not in listed, listed
    assert "not choose the code JAX runs" in listed, listed
    assert f"{accounts.a} [declared signer" in listed, listed
    assert f"{accounts.b} [can cause recompiles" in listed, listed  # a member of the group
    doc = json.loads(jaxcache("audit", "--sealed", "--no-processes", "--policy", signer,
                              "--format", "json", str(cache)).stdout)
    from jaxcache.documents import schemas

    pytest.importorskip("jsonschema").validate(doc, schemas.load("audit"))
    roles = {w["principal"]: w["sealed_as"] for w in doc["writers"]}
    assert roles[accounts.a] == "signer" and roles[accounts.b] == "recompiles"
    # a plain reader's audit of the same directory: no sealed view, the writers as they are
    plain = json.loads(jaxcache("audit", "--no-processes", "--policy", signer, "--format",
                                "json", str(cache)).stdout)
    assert {w["sealed_as"] for w in plain["writers"]} == {None}
    assert plain["verdict"] == "UNSAFE"
