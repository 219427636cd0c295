"""`jaxcache decide --sealed` on a SEALED directory: the writers test passes (only entries signed
by declared key holders are loaded) and the decision goes on to the saving, never "internal
error"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.jobs import jaxcache, no_state
from support.users import mkdir, needs_root

pytest.importorskip("cryptography")

pytestmark = needs_root


@pytest.fixture
def sealed_dir(base, tmp_path):
    """A directory anyone can write, sealed for readers that trust root's key."""
    cache = mkdir(base / "shared", 0o777)
    key = tmp_path / "keys" / "ci.key"
    assert jaxcache("keygen", str(key)).returncode == 0
    pub = Path(f"{key}.pub").read_text().strip()
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[[cache]]\npath = "{cache}"\ntrusted_users = []\n'
                      f'trusted_keys = [{{ holder = "root", key = "{pub}" }}]\n')
    policy.chmod(0o600)
    audit = jaxcache("audit", "--sealed", "--policy", str(policy), "--format", "json",
                     str(cache))
    assert json.loads(audit.stdout)["verdict"] == "SEALED", audit.stdout
    return cache, str(policy), audit.stdout


def writers_test(doc: dict) -> dict:
    [test] = [t for t in doc["tests"] if t["name"] == "writers"]
    return test


def test_decide_on_a_sealed_dir_asks_for_the_saving(sealed_dir, tmp_path):
    cache, policy, _ = sealed_dir
    out = jaxcache("decide", "--sealed", "--policy", policy, str(cache),
                   env=no_state(tmp_path))
    assert out.returncode == 1, out.stderr  # writers pass, saving unmeasured: a gate fails
    assert out.stdout.startswith("decision: INCONCLUSIVE") and "--bench B.json" in out.stdout
    assert "internal error" not in out.stderr


def test_decide_on_a_sealed_dir_benches_sealed_and_decides(sealed_dir):
    cache, policy, _ = sealed_dir
    out = jaxcache("decide", "--sealed", "--policy", policy, "--format", "json", "-t", "1",
                   "-k", "1", str(cache), "--", "/bin/sh", "-c", "true")
    assert "internal error" not in out.stderr and "Traceback" not in out.stderr
    doc = json.loads(out.stdout)
    assert writers_test(doc)["passed"] is True
    assert doc["verdict"] == "NOT-WORTH-IT" and out.returncode == 1  # nothing was compiled


def test_decide_from_a_sealed_audit_document(sealed_dir, tmp_path):
    _, _, audit_json = sealed_dir
    (tmp_path / "a.json").write_text(audit_json)
    bench = jaxcache("bench", "-t", "1", "-k", "1", "--no-prime", "--json",
                     str(tmp_path / "b.json"), "--", "/bin/sh", "-c", "true")
    assert bench.returncode == 1, bench.stderr
    out = jaxcache("decide", "--audit", str(tmp_path / "a.json"), "--bench",
                   str(tmp_path / "b.json"), "--format", "json")
    doc = json.loads(out.stdout)
    assert writers_test(doc)["passed"] is True and doc["verdict"] == "NOT-WORTH-IT"
    assert out.returncode == 1
