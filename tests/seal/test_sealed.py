"""Sealed cache: every attack and fault in its own processes, with real JAX on the CPU.

A writer holding the signing key fills a sealed directory; each test copies it, tampers with
the copy as an attacker who can write the directory would, and runs a reader that trusts
only the writer's public key. The reader must reject, recompile and still compute the right
numbers; nothing it rejects may be deleted.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import builds, paths
from support.jobs import jaxcache
from support.users import IS_ROOT

pytest.importorskip("cryptography")
pytest.importorskip("jax")

JOB = str(paths.PROGRAMS / "sealed_job.py")
ENV = {**os.environ, "JAX_PLATFORMS": "cpu"}
ENV.pop("JAX_COMPILATION_CACHE_DIR", None)


def job(cache: Path, pub: str, *extra: str, check: bool = True) -> dict:
    proc = subprocess.run([sys.executable, JOB, str(cache), pub, *extra], env=ENV,
                          capture_output=True, text=True, timeout=300)
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def keygen(path: Path) -> str:
    proc = jaxcache("keygen", str(path))
    assert proc.returncode == 0, proc.stderr
    return (path.parent / (path.name + ".pub")).read_text().strip()


@pytest.fixture(scope="module")
def world(tmp_path_factory, unsealed_results):
    root = tmp_path_factory.mktemp("sealed")
    keys = root / "keys"
    pub = keygen(keys / "ci.key")
    other = keygen(keys / "mallory.key")
    template = root / "template"
    template.mkdir(mode=0o700)
    first = job(template, pub, "--key", str(keys / "ci.key"))
    assert first["results"] == unsealed_results and first["hits"] == 0
    return {"root": root, "pub": pub, "other": other, "key": keys / "ci.key",
            "mallory": keys / "mallory.key", "golden": unsealed_results,
            "template": template}


def copy(world, tmp_path, name: str = "cache") -> Path:
    dst = tmp_path / name
    shutil.copytree(world["template"], dst)
    dst.chmod(0o700)
    return dst


def entry(cache: Path, fun: str) -> Path:
    (found,) = [p for p in cache.iterdir() if p.name.startswith(f"jit_{fun}-")
                and p.name.endswith("-cache")]
    return found


def sig(p: Path) -> Path:
    return p.with_name(p.name + ".sig")


def read(world, cache: Path, n_rejected: int, status: str | None = None) -> dict:
    out = job(cache, world["pub"])
    assert out["results"] == world["golden"]
    assert len(out["rejections"]) == n_rejected, out
    if status:
        assert {r["status"] for r in out["rejections"]} == {status}, out
        assert all("rejected cache entry" in w for w in out["warnings"]
                   if "rejected" in w)
    return out


def test_valid_entries_hit_with_unsealed_results(world, tmp_path):
    cache = copy(world, tmp_path)
    out = read(world, cache, 0)
    assert out["xla_caches"] == "none"  # XLA's own sub-caches would be read unsigned
    entries = [p for p in cache.iterdir() if p.name.endswith("-cache")]
    assert out["hits"] == len(entries) >= 2


def test_swapped_entries_are_rejected_and_recompiled(world, tmp_path):
    cache = copy(world, tmp_path)
    f, g = entry(cache, "f"), entry(cache, "g")
    # swap two validly signed entries, signatures and all
    for a, b in ((f, g), (sig(f), sig(g))):
        tmp = a.read_bytes()
        a.write_bytes(b.read_bytes())
        b.write_bytes(tmp)
    out = read(world, cache, 2, "bad-signature")
    assert all("another entry" in r["reason"] for r in out["rejections"])
    assert f.exists() and g.exists()  # rejected, never deleted


def test_entry_replaced_by_an_unsigned_one(world, tmp_path):
    cache = copy(world, tmp_path)
    f, g = entry(cache, "f"), entry(cache, "g")
    f.write_bytes(g.read_bytes())  # an attacker's executable under f's key...
    sig(f).unlink()  # ...with no signature
    out = read(world, cache, 1, "unsigned")
    assert out["rejections"][0]["key"] == f.name[:-len("-cache")]
    assert "root" in out["rejections"][0]["owner"] or "uid" in out["rejections"][0]["owner"]


def test_signature_deleted_or_corrupted(world, tmp_path):
    cache = copy(world, tmp_path)
    sig(entry(cache, "f")).unlink()
    g_sig = sig(entry(cache, "g"))
    doc = json.loads(g_sig.read_text())
    doc["signature"] = doc["signature"][:-8] + "AAAAAAA="
    g_sig.write_text(json.dumps(doc))
    out = read(world, cache, 2)
    assert sorted(r["status"] for r in out["rejections"]) == ["bad-signature", "unsigned"]
    (cache / "garbage").write_text("x")
    g_sig.write_text("{not json")
    out = read(world, cache, 2)
    assert "unreadable signature" in " ".join(r["reason"] for r in out["rejections"])


def test_entry_signed_by_an_untrusted_key(world, tmp_path):
    cache = copy(world, tmp_path)
    f = entry(cache, "f")
    sig(f).unlink()
    proc = jaxcache("seal", str(cache), "--signing-key", str(world["mallory"]),
                    "--trusted-key", world["pub"], "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["counts"]["signed-now"] == 1
    read(world, cache, 1, "unknown-key")


def test_truncated_entry_does_not_crash_the_job(world, tmp_path):
    cache = copy(world, tmp_path)
    f = entry(cache, "f")
    f.write_bytes(f.read_bytes()[:100])
    out = read(world, cache, 1, "bad-signature")
    assert "truncated" in out["rejections"][0]["reason"]


def test_symlinked_entry_is_rejected_not_followed(world, tmp_path):
    cache = copy(world, tmp_path)
    f, g = entry(cache, "f"), entry(cache, "g")
    outside = tmp_path / "outside"
    outside.write_bytes(g.read_bytes())
    f.unlink()
    f.symlink_to(outside)
    read(world, cache, 1, "not-a-file")
    assert f.is_symlink()


def test_verify_reports_each_status(world, tmp_path):
    cache = copy(world, tmp_path)
    sig(entry(cache, "f")).unlink()
    g = entry(cache, "g")
    g.write_bytes(g.read_bytes()[:50])
    proc = jaxcache("verify", str(cache), "--trusted-key", world["pub"], "--format", "json")
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    status = {e["name"].split("-")[0]: e["status"] for e in doc["entries"]}
    assert status["jit_f"] == "unsigned" and status["jit_g"] == "bad-signature"
    assert doc["counts"]["valid"] == len(doc["entries"]) - 2
    clean = copy(world, tmp_path, "clean")
    assert jaxcache("verify", str(clean), "--trusted-key", world["pub"]).returncode == 0
    other = jaxcache("verify", str(clean), "--trusted-key", world["other"], "--format", "json")
    assert other.returncode == 1
    assert {e["status"] for e in json.loads(other.stdout)["entries"]} == {"unknown-key"}


def test_reader_without_key_writes_nothing_shared_but_keeps_misses_locally(world, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o700)
    local = tmp_path / "local"
    out = job(shared, world["pub"], "--local", str(local))
    assert out["results"] == world["golden"] and out["hits"] == 0
    assert list(shared.iterdir()) == []  # a read-only consumer
    kept = [p.name for p in builds.build_tier(local).iterdir() if p.name.endswith("-cache")]
    assert any(n.startswith("jit_f-") for n in kept)
    again = job(shared, world["pub"], "--local", str(local))
    assert again["hits"] == len(kept) and again["results"] == world["golden"]
    # tiers: CI's published entries are used, and local misses stay local
    published = copy(world, tmp_path, "published")
    local2 = tmp_path / "local2"
    third = job(published, world["pub"], "--local", str(local2))
    assert third["hits"] >= 2 and third["rejections"] == []


def test_eight_processes_at_once(world, tmp_path):
    cache = tmp_path / "busy"
    cache.mkdir(mode=0o700)
    procs = [subprocess.Popen([sys.executable, JOB, str(cache), world["pub"],
                               *(["--key", str(world["key"])] if i % 2 == 0 else [])],
                              env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for i in range(8)]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-2000:]
        assert json.loads(out.strip().splitlines()[-1])["results"] == world["golden"]
    proc = jaxcache("verify", str(cache), "--trusted-key", world["pub"], "--format", "json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0 and doc["entries"] and doc["leftovers"] == [], doc
    final = job(cache, world["pub"])
    assert final["results"] == world["golden"] and final["hits"] == len(doc["entries"])


KILLED_WRITER = """
import os, sys, time
from jaxcache.trust.inputs.signing_keys import load_signing
from jaxcache.trust.inputs.public_keys import load_public
from jaxcache.seal.stores.sealed_cache import SealedCache
key = load_signing(sys.argv[2])
cache = SealedCache(sys.argv[1], trusted=[key.public], signer=key)
data = os.urandom(1 << 20) * 16
def stalled(*args, **kwargs):  # the worst moment, reached on any machine: the temporary
    print("linking", flush=True)  # file is written and synced, nothing is linked yet
    time.sleep(3600)
os.link = stalled
print("writing", flush=True)
cache.put("jit_big-" + "ab" * 32, data)
"""


def test_writer_killed_mid_write_leaves_nothing_that_verifies(world, tmp_path):
    cache = tmp_path / "killed"
    cache.mkdir(mode=0o700)
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(cache), str(world["key"])],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    assert proc.stdout.readline().strip() == "linking"  # about to publish: killed now
    assert any(p.name.endswith(".tmp") and p.stat().st_size > 0 for p in cache.iterdir())
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    names = [p.name for p in cache.iterdir()]
    assert not any(n.endswith("-cache") for n in names), names  # nothing partial published
    out = jaxcache("verify", str(cache), "--trusted-key", world["pub"], "--format", "json")
    doc = json.loads(out.stdout)
    # the entry's temporary file and the signature's: named, never taken for entries
    assert doc["entries"] == [] and len(doc["leftovers"]) == 2, doc["leftovers"]


@pytest.mark.skipif(not IS_ROOT, reason="mounting a small tmpfs needs root")
def test_full_disk_job_finishes_uncached_with_a_warning(world, tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir(mode=0o700)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12k,mode=0700", "tmpfs", str(mnt)],
                   check=True)
    try:
        filler = mnt / "filler"
        with open(filler, "wb") as fh, contextlib.suppress(OSError):  # leave ~4 KB free
            fh.write(b"\0" * (8 << 10))
        out = job(mnt, world["pub"], "--key", str(world["key"]))
        assert out["results"] == world["golden"]
        assert out["write_errors"] and "No space left" in out["write_errors"][0]
        assert any("could not write cache entry" in w for w in out["warnings"])
        assert not [p for p in mnt.iterdir() if p.name.endswith(".tmp")]
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_xla_subcache_flags_are_refused(world, tmp_path):
    """XLA reads its autotune and kernel caches unsigned: a sealed cache will not run beside
    them."""
    cache = copy(world, tmp_path)
    env = {**ENV, "XLA_FLAGS": f"--xla_gpu_per_fusion_autotune_cache_dir={cache}/autotune"}
    proc = subprocess.run([sys.executable, JOB, str(cache), world["pub"]], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "refuses to run beside them" in proc.stderr


def test_a_planted_huge_file_costs_a_recompile_not_the_jobs_memory(world, tmp_path):
    cache = copy(world, tmp_path)
    f = entry(cache, "f")
    os.truncate(f, 64 << 30)  # 64 GiB, sparse: read whole, it would exhaust the machine
    out = read(world, cache, 1, "bad-signature")
    assert "longer than the" in out["rejections"][0]["reason"]


PLANTED_READ = """
import json, resource, sys
from jaxcache.trust.inputs.public_keys import load_public
from jaxcache.seal.stores.sealed_cache import SealedCache
cache = SealedCache(sys.argv[1], trusted=[load_public(sys.argv[2])])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
got = cache.get(sys.argv[3])
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"got": got is not None, "grew_kb": after - before,
                  "rejections": [r.status for r in cache.rejections]}))
"""


@pytest.mark.parametrize("forged", ["foreign-key", "trusted-key-bad-signature", "none"])
def test_a_planted_huge_entry_costs_the_reader_no_memory(world, tmp_path, forged):
    """Issue 22: a planted signature's claimed size decided how much a sealed reader read.
    A 1.5 GB (sparse) entry beside a signature claiming exactly that: the reader judges the
    signature first and reads at most a byte of the entry; its peak memory grows < 50 MB."""
    cache = tmp_path / "planted"
    cache.mkdir(mode=0o700)
    key = "jit_big-" + "cd" * 32
    size = 1_500_000_000
    with open(cache / f"{key}-cache", "wb") as fh:
        fh.truncate(size)  # sparse: no disk used
    doc = {"format": "jaxcache.seal/1", "key": key, "digest": "00" * 32, "size": size,
           "public_key": world["other"] if forged == "foreign-key" else world["pub"],
           "signature": "A" * 86 + "=="}
    if forged != "none":
        (cache / f"{key}-cache.sig").write_text(json.dumps(doc))
    proc = subprocess.run([sys.executable, "-c", PLANTED_READ, str(cache), world["pub"], key],
                          capture_output=True, text=True, timeout=300, env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["got"] is False and out["rejections"], out
    assert out["grew_kb"] < 50_000, out


def test_verify_of_a_planted_huge_entry_stays_small(world, tmp_path):
    """verify read every entry whole before its signature: a multi-GB sparse file ended it
    with MemoryError. Now the signature is judged first and the entry is not read."""
    cache = tmp_path / "planted"
    cache.mkdir(mode=0o700)
    key = "jit_big-" + "ef" * 32
    with open(cache / f"{key}-cache", "wb") as fh:
        fh.truncate(3_000_000_000)
    # verify's own peak memory, measured by a parent that runs nothing else
    peak = ("import json, resource, subprocess, sys; p = subprocess.run(sys.argv[1:], "
            "capture_output=True, text=True); print(json.dumps([p.returncode, p.stdout, "
            "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))")
    proc = subprocess.run([sys.executable, "-c", peak, sys.executable, "-m", "jaxcache",
                           "verify", str(cache), "--trusted-key", world["pub"], "--format",
                           "json"], capture_output=True, text=True, timeout=300)
    rc, out, peak_kb = json.loads(proc.stdout)
    assert rc == 1, proc.stderr
    [entry] = json.loads(out)["entries"]
    assert entry["status"] == "unsigned" and entry["size"] == 3_000_000_000, entry
    assert peak_kb < 150_000, peak_kb  # KB: tens of MB, not the file's 3 GB


def test_a_signature_naming_no_key_is_one_bad_entry_not_the_end(world, tmp_path):
    """A planted .sig whose public_key is no key text aborted verify (and seal) of the whole
    directory with the key parser's error. It is that entry's bad signature; the others are
    judged, and a sealed reader rejects it as a miss."""
    cache = copy(world, tmp_path)
    victim = next(p for p in sorted(cache.iterdir()) if p.name.endswith("-cache"))
    doc = json.loads(sig(victim).read_text())
    doc["public_key"] = "nope"
    sig(victim).write_text(json.dumps(doc))
    proc = jaxcache("verify", str(cache), "--trusted-key", world["pub"], "--format", "json")
    assert proc.returncode == 1, proc.stderr
    statuses = {e["name"]: e["status"] for e in json.loads(proc.stdout)["entries"]}
    assert statuses[victim.name] == "bad-signature"
    assert [s for n, s in statuses.items() if n != victim.name] and all(
        s == "valid" for n, s in statuses.items() if n != victim.name), statuses


@pytest.mark.parametrize("left", ["garbage", "aged"])
def test_a_publisher_killed_between_signature_and_entry_blocks_nothing(world, tmp_path, left):
    """A signature with no entry (its publisher killed between the two links): the next
    publisher replaces it, at once when it is no signature at all, or once it is older than
    an upload can take; the reader after it hits every module and rejects nothing."""
    cache = copy(world, tmp_path)
    gone = entry(cache, "f")
    gone.unlink()  # what the killed publisher never linked
    if left == "garbage":
        sig(gone).write_bytes(b"\x00 half a signature")
    else:  # its own genuine signature, two hours old (perhaps of other bytes: not trusted)
        old = time.time() - 7200
        os.utime(sig(gone), (old, old))
    published = job(cache, world["pub"], "--key", str(world["key"]))
    assert published["write_errors"] == [] and gone.exists(), published
    out = read(world, cache, 0)
    assert out["hits"] == published["hits"] + 1, (out, published)  # f hits now too


def test_a_fresh_rival_signature_is_left_for_its_entry_and_a_stale_one_is_swapped(tmp_path):
    """In-process, on real files: the rule of seal/signing/orphan_signatures.py for the sealed
    directory."""
    from jaxcache.seal.signing import signature_file as sigmod
    from jaxcache.seal.stores.sealed_cache import SealedCache
    from jaxcache.trust.inputs.signing_keys import generate

    a, b = generate(), generate()
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o700)
    key = "jit_x-" + "ab" * 32
    rival = sigmod.sign(key, b"rival bytes", b)
    (shared / f"{key}-cache.sig").write_bytes(rival)
    publisher = SealedCache(str(shared), trusted=[a.public, b.public], signer=a)
    publisher.put(key, b"our bytes")
    assert publisher.writes == [] and not (shared / f"{key}-cache").exists()
    assert (shared / f"{key}-cache.sig").read_bytes() == rival  # fresh: its entry may follow
    old = time.time() - 7200
    os.utime(shared / f"{key}-cache.sig", (old, old))
    publisher.put(key, b"our bytes")
    assert [(w.key, w.directory, w.bytes, w.tier.value) for w in publisher.writes] == \
        [(key, str(shared), len(b"our bytes"), "shared")]
    reader = SealedCache(str(shared), trusted=[a.public])
    assert reader.get(key) == b"our bytes" and reader.rejections == []
    from jaxcache.seal.publishing import locks  # this account's lock, taken to settle a signature

    assert sorted(p.name for p in shared.iterdir()) == [  # kept in the state folder, not here
        f"{key}-cache", f"{key}-cache.sig", f"{key}-cache.used"]
    fd = os.open(shared, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert os.path.isfile(locks.path_of(fd))
    finally:
        os.close(fd)
    publisher.close()
    reader.close()
