"""Clocks a day ahead or behind (issue 42), through libfaketime from Debian: only the process
under `faketime` sees the skewed time; the kernel stamps files with the true one, as a host
whose clock is wrong would see files other hosts (or the kernel) stamped.

- The orphan rule (seal/signing/orphan_signatures.py): a genuine signature of other bytes,
  written a moment ago, with no entry beside it, is a rival publish in progress: a publisher whose
  clock is a day ahead must wait, not replace it; one a day behind must still replace an orphan that
  is really two hours old (else that module recompiles on every run, for good).
- gc's temporary-file rule: a publisher's temporary file written a moment ago stays under a gc
  whose clock is a day ahead (it may be a publish in progress), called or as `jaxcache gc`.
- The same rules in a bucket (fake-gcs-server, SeaweedFS): ages are the server's Date against
  its stamp on the object, never the publisher's or gc's clock against the server's stamp.
- Validity windows: time is the reader's clock, as docs/reference/sealed-cache.md says: a reader
  a day ahead rejects a key whose not_after is twelve hours away; the same entries verify at the
  true time.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest
from support import bucket_faults, faults, paths
from support.jobs import clean_env, jaxcache

pytest.importorskip("cryptography")
FAKETIME = shutil.which("faketime")
if FAKETIME is None:
    pytest.skip("libfaketime is not installed (Debian: faketime)", allow_module_level=True)


def _skewed(offset: str, *argv: str, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    """argv under a clock `offset` from the true one ("+1d", "-1d")."""
    return subprocess.run([FAKETIME, "-f", offset, *argv],
                          env={**(env or os.environ), "PYTHONPATH": str(paths.SRC)},
                          capture_output=True, text=True, timeout=300)


def test_faketime_skews_only_the_process():
    """The fixture's premise: under faketime the process's clock is a day ahead, files are
    stamped by the kernel with the true time."""
    out = _skewed("+1d", sys.executable, "-c", "import time; print(time.time())")
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) - time.time() > 80000


def _orphan(world, cache, age_s: float) -> tuple[str, bytes]:
    """A genuine signature (the world's key) of other bytes than the entry's, `age_s` old by
    the file system, with no entry beside it: a rival's publish in progress, or a dead one."""
    from jaxcache.seal.signing import signature_file as sigfile
    from jaxcache.trust.inputs import signing_keys as keys

    key, data = world.entries[0]
    signer = keys.load_signing(str(world.key))
    sig = sigfile.sign(key, data + b"a rival compile's bytes", signer)
    path = cache / f"{key}-cache.sig"
    path.write_bytes(sig)
    os.chmod(path, 0o644)
    if age_s:
        then = time.time() - age_s
        os.utime(path, (then, then))
    return key, sig


def _publish(world, cache, offset: str, tmp_path):
    one = tmp_path / "one.json"
    key, data = world.entries[0]
    one.write_text(json.dumps([(key, data.hex())]))
    return _skewed(offset, sys.executable, "-c", faults.PUBLISH, str(cache), str(world.key),
                   str(one), env=faults.fresh_state(tmp_path / f"state{offset}"))


@pytest.mark.parametrize("offset", ["+1d", "-1d"])
def test_a_publisher_with_a_skewed_clock_waits_for_a_rival_in_progress(world, tmp_path,
                                                                       offset):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    key, sig = _orphan(world, cache, 0)
    proc = _publish(world, cache, offset, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (cache / f"{key}-cache.sig").read_bytes() == sig  # the rival's signature stands
    assert not (cache / f"{key}-cache").exists()  # first writer wins: this one wrote nothing


@pytest.mark.parametrize("offset", ["+1d", "-1d"])
def test_a_publisher_with_a_skewed_clock_replaces_a_real_orphan(world, tmp_path, offset):
    from jaxcache.seal.stores.sealed_cache import SealedCache
    from jaxcache.trust.inputs.public_keys import load_public

    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    key, sig = _orphan(world, cache, 2 * 3600)  # its publisher died two hours ago
    proc = _publish(world, cache, offset, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (cache / f"{key}-cache.sig").read_bytes() != sig
    reader = SealedCache(str(cache), trusted=[load_public(world.pub)])
    assert reader.get(key) == world.entries[0][1]
    reader.close()


def test_gc_with_a_clock_ahead_leaves_a_young_temporary_file(world, tmp_path):
    cache = tmp_path / "cache"
    shutil.copytree(world.sealed, cache)
    temp = cache / f".jaxcache-{os.getpid()}-0123456789abcdef.tmp"
    temp.write_bytes(world.entries[0][1][:100])  # a publish in progress, this very moment
    proc = _skewed("+1d", sys.executable, "-c", faults.COLLECT, str(cache), "0",
                   env=faults.fresh_state(tmp_path / "state"))
    assert proc.returncode == 0, proc.stderr
    assert temp.exists()
    old = time.time() - 2 * 3600  # and one two hours old by the file system: an orphan
    os.utime(temp, (old, old))
    proc = _skewed("-1d", sys.executable, "-c", faults.COLLECT, str(cache), "0",
                   env=faults.fresh_state(tmp_path / "state"))
    assert proc.returncode == 0, proc.stderr
    assert not temp.exists()


def test_validity_windows_follow_the_readers_clock_as_documented(world, tmp_path):
    soon = (datetime.now(UTC) + timedelta(hours=12)).strftime("%Y-%m-%dT%H:%M:%SZ")
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[[cache]]\npath = "{world.sealed}"\ntrusted_signers = ["nobody"]\n'
                      f'trusted_keys = [{{ holder = "nobody", key = "{world.pub}", '
                      f'not_after = {soon} }}]\n')
    policy.chmod(0o644)
    now = jaxcache("verify", str(world.sealed), "--policy", str(policy), "--format", "json")
    assert now.returncode == 0, now.stdout + now.stderr
    ahead = _skewed("+1d", sys.executable, "-m", "jaxcache", "verify", str(world.sealed),
                    "--policy", str(policy), "--format", "json")
    assert ahead.returncode == 1, ahead.stdout + ahead.stderr
    statuses = {e["status"] for e in json.loads(ahead.stdout)["entries"]}
    assert statuses == {"expired-key"}, statuses


def test_the_clock_files_temporary_name_is_one_gc_and_verify_know():
    """fsclock's fallback (where O_TMPFILE is missing) makes a publisher's temporary file for
    an instant: named as seal/publishing/tier_names.py names them, so a kill there leaves what gc
    removes."""
    from jaxcache.documents import fsclock
    from jaxcache.seal.publishing import tier_names as names

    name = fsclock.temporary()
    assert names.is_temporary(name)
    assert name.startswith(names.TEMP_PREFIX) and name.endswith(names.TEMP_SUFFIX)


def test_the_gc_command_with_a_clock_ahead_leaves_a_young_temporary_file(world, tmp_path):
    """`jaxcache gc` hands its own time to the plan (for --max-age); the orphan rule must still
    judge by the files' clock (it judged by the process's: found by this test)."""
    cache = tmp_path / "cache"
    shutil.copytree(world.sealed, cache)
    temp = cache / f".jaxcache-{os.getpid()}-0123456789abcdef.tmp"
    temp.write_bytes(world.entries[0][1][:100])
    proc = _skewed("+1d", sys.executable, "-m", "jaxcache", "gc", str(cache), "--max-size",
                   "0", env=faults.fresh_state(tmp_path / "state"))
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert temp.exists()
    assert not any(p.name.endswith("-cache") for p in cache.iterdir())  # gc itself ran


@pytest.fixture(scope="module", params=bucket_faults.available())
def backend(request, tmp_path_factory):
    s3 = request.getfixturevalue("s3_server") if request.param == "s3" else None
    b = bucket_faults.start(request.param, tmp_path_factory.mktemp(request.param), s3)
    yield b
    b.stop()


def _bucket_env(b) -> dict[str, str]:
    if b.name == "gcs":
        return clean_env(STORAGE_EMULATOR_HOST=f"http://127.0.0.1:{b.upstream[1]}")
    return clean_env(**b.server.env())


def _rival_signature(world, b, prefix: str) -> tuple[str, bytes]:
    """A genuine signature of other bytes than the entry's, uploaded now, no entry beside it:
    a rival publish in progress (its entry upload may take minutes)."""
    from jaxcache.seal.objects.object_store import OBJECT_NAME_MAX
    from jaxcache.seal.publishing import tier_names as names
    from jaxcache.seal.signing import signature_file as sigfile
    from jaxcache.trust.inputs import signing_keys as keys

    key, data = world.entries[0]
    sig = sigfile.sign(key, data + b"a rival compile's bytes", keys.load_signing(str(world.key)))
    name = names.sidecar(f"{key}-cache", names.SIGNATURE, OBJECT_NAME_MAX)
    b.upload(f"{prefix}/{name}", sig)
    return name, sig


def test_a_bucket_publisher_a_day_ahead_waits_for_a_rival_in_progress(world, backend, tmp_path):
    """It judged the rival's signature a day old by its own clock and replaced it: the rival's
    entry upload then lost its signature (found by this test)."""
    name, sig = _rival_signature(world, backend, "ahead")
    one = tmp_path / "one.json"
    key, data = world.entries[0]
    one.write_text(json.dumps([(key, data.hex())]))
    proc = _skewed("+1d", sys.executable, "-c", bucket_faults.PUBLISHER, backend.url("ahead"),
                   str(world.key), str(one), env=_bucket_env(backend))
    assert proc.returncode == 0, proc.stderr
    assert backend.download(f"ahead/{name}") == sig
    assert f"{key}-cache" not in backend.names("ahead")  # first writer wins: it wrote nothing


def test_bucket_gc_a_day_ahead_leaves_a_rival_signature_in_progress(world, backend, tmp_path):
    name, sig = _rival_signature(world, backend, "gc-ahead")
    proc = _skewed("+1d", sys.executable, "-m", "jaxcache", "gc", backend.url("gc-ahead"),
                   "--max-size", "0", env={**_bucket_env(backend),
                                           **faults.fresh_state(tmp_path / "state")})
    if backend.name == "s3":  # S3 refuses a request signed a day off: one line, exit 2
        assert proc.returncode == 2 and "RequestTimeTooSkewed" in proc.stderr, proc.stderr
    else:
        assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert backend.download(f"gc-ahead/{name}") == sig


def test_the_store_answers_with_its_own_clock(world, backend, tmp_path):
    """What the two tests above rest on, for both stores: a stat and a listing carry the
    server's Date, so an object written now is seconds old whatever this process's clock.
    SeaweedFS (as S3, whose signatures hold 15 minutes) answers 403 to a client a day off,
    so on S3 a publisher or gc that far off writes and deletes nothing; ten minutes it takes."""
    offset, off_s = ("+1d", 80000) if backend.name == "gcs" else ("+10m", 500)
    name, _ = _rival_signature(world, backend, "date")
    code = ("import sys, time\n"
            "from jaxcache.seal.objects import store_for_url as o\n"
            "from jaxcache.trust.rules import target\n"
            "s = o.open_store(target.parse_bucket(sys.argv[1]))\n"
            "i = s.stat(sys.argv[2]); listed = [x for x in s.list() if x.name == sys.argv[2]]\n"
            "print(time.time() - i.answered, i.age_s(), listed[0].age_s())\n")
    proc = _skewed(offset, sys.executable, "-c", code, backend.url("date"), name,
                   env=_bucket_env(backend))
    assert proc.returncode == 0, proc.stderr
    skew, stat_age, listed_age = map(float, proc.stdout.split())
    assert skew > off_s  # the process is ahead of the server's Date
    assert stat_age < 300 and listed_age < 300, proc.stdout
