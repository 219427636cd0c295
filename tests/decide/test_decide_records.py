"""`decide PATH --records A/ B/` (issue 40): the jobs that would share a cache, each team's or
host's run records, judged by their fingerprints. Real jobs under `jaxcache run`: build A is
the venv's jaxlib, build B the same version with bytes appended to its main shared object
(tests/support/builds.py), which JAX's key cannot tell apart."""

from __future__ import annotations

import json
import sys

import pytest
from support import builds, paths
from support.jobs import clean_env, jaxcache, no_state
from support.users import mkdir

pytest.importorskip("jax")

JOB = [sys.executable, str(paths.EXAMPLES / "train.py"), "--steps", "2"]


def record(folder, name: str, env: dict, cache) -> dict:
    """Run the example job under `env` (build A or B), its record into `folder`."""
    folder.mkdir(exist_ok=True)
    out = folder / f"{name}.json"
    proc = jaxcache("run", "--quiet", "--cache-dir", str(cache), "--record", str(out), "--",
                    *JOB, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """Records of build A in a/ and a2/, of build B in b/ (one cache, as a fleet would)."""
    root = tmp_path_factory.mktemp("fleet")
    site = builds.other_build(root)
    cache = mkdir(root / "cache", 0o700)
    env_a = builds.build_env(None, clean_env())
    env_b = builds.build_env(site, clean_env())
    docs = {"a": record(root / "a", "r", env_a, cache),
            "a2": record(root / "a2", "r", env_a, cache),
            "b": record(root / "b", "r", env_b, cache)}
    return root, cache, docs


def decide(root, cache, *sources: str, fmt: str = "json"):
    env = no_state(root / "state")  # no bench kept from another test
    return jaxcache("decide", str(cache), "--format", fmt, "--records",
                    *(str(root / s) for s in sources), env=env)


def test_each_record_carries_its_build(fleet):
    _, _, docs = fleet
    a, a2, b = (docs[k]["fingerprint"] for k in ("a", "a2", "b"))
    assert a and b, (docs["a"]["fingerprint_unknown"], docs["b"]["fingerprint_unknown"])
    assert a["build"]["digest"] == a2["build"]["digest"] != b["build"]["digest"]
    assert a["build"]["versions"] == b["build"]["versions"]  # the same version: JAX's key agrees
    assert a["accelerator"]["platform"] == "cpu"
    assert docs["a"]["fingerprint_unknown"] is None


def test_two_builds_are_not_compatible_with_the_evidence(fleet):
    root, cache, docs = fleet
    proc = decide(root, cache, "a", "b")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["verdict"] == "BLOCKED"
    assert doc["summary"] == ("not compatible: 2 jaxlib builds differ; share one cache per "
                              "fingerprint (a prefix per fingerprint) or none")
    [compatible] = [t for t in doc["tests"] if t["name"] == "compatible"]
    assert compatible["passed"] is False
    evidence = "\n".join(compatible["evidence"])
    for key in ("a", "b"):
        assert docs[key]["fingerprint"]["build"]["digest"][:16] in evidence
        assert f"{root / key}/r.json" in evidence  # which record
    assert "another jaxlib build" in evidence
    assert any("fingerprint" in a for a in doc["advice"])
    text = decide(root, cache, "a", "b", fmt="text")
    assert text.returncode == 1
    assert text.stdout.startswith("decision: BLOCKED - not compatible: 2 jaxlib builds differ")
    assert "2. compatible jobs: FAIL" in text.stdout


def test_one_build_passes_the_compatible_test(fleet):
    root, cache, docs = fleet
    proc = decide(root, cache, "a", "a2")
    doc = json.loads(proc.stdout)
    [compatible] = [t for t in doc["tests"] if t["name"] == "compatible"]
    assert compatible["passed"] is True, compatible["evidence"]
    assert doc["verdict"] == "INCONCLUSIVE"  # no bench measured the saving: a gate never passes
    assert proc.returncode == 1
    fid = docs["a"]["fingerprint"]["id"]
    assert sum(fid in e for e in compatible["evidence"]) == 2  # each folder's, the same


def test_a_malformed_fingerprint_is_one_line(fleet, tmp_path):
    root, cache, docs = fleet
    bad = tmp_path / "bad"
    bad.mkdir()
    doc = dict(docs["a"], fingerprint={**docs["a"]["fingerprint"], "build": {"digest": "xyz"}})
    (bad / "r.json").write_text(json.dumps(doc))
    (bad / "r.json").chmod(0o600)
    proc = jaxcache("decide", str(cache), "--records", str(root / "a"), str(bad / "r.json"),
                    env=no_state(tmp_path))
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert "fingerprint.build.digest" in line and "hex digest" in line


def test_a_record_without_a_fingerprint_is_not_compatible(fleet, tmp_path):
    root, cache, docs = fleet
    old = tmp_path / "old"
    old.mkdir()
    doc = {k: v for k, v in docs["a2"].items() if not k.startswith("fingerprint")}
    (old / "r.json").write_text(json.dumps(doc))
    (old / "r.json").chmod(0o600)
    proc = jaxcache("decide", str(cache), "--format", "json", "--records", str(root / "a"),
                    str(old), env=no_state(tmp_path))
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert out["verdict"] == "BLOCKED"
    assert out["summary"].startswith("cannot tell whether the jobs run one build")
    assert any("an older jaxcache" in e for t in out["tests"] for e in t["evidence"])
