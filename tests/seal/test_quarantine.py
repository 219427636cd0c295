"""`verify --quarantine` (issue 28, point 6): a bad entry that sits at its key is moved aside
with its sidecars into a private directory jaxcache makes, never deleted; the next publish
writes that key again, and verify then passes. Real JAX jobs in separate processes."""

from __future__ import annotations

import json
import os
import pwd
import sys

import pytest
from support import paths
from support.jobs import clean_env, jaxcache
from support.users import mkdir, needs_root

from jaxcache.documents import schemas

pytest.importorskip("cryptography")
pytest.importorskip("jax")

JOB = str(paths.PROGRAMS / "two_jits.py")
ZERO = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}


def _publish(cache, key, record):
    proc = jaxcache("run", "-q", "--sealed", "--signing-key", str(key), "--trusted-key",
                    f"{key}.pub", "--cache-dir", str(cache), "--record", str(record), "--",
                    sys.executable, JOB, env=clean_env(**ZERO))
    assert proc.returncode == 0, proc.stderr


def test_a_bad_entry_is_moved_aside_and_its_key_published_again(tmp_path):
    cache, key = tmp_path / "shared", tmp_path / "keys" / "ci.key"
    cache.mkdir(mode=0o700)
    assert jaxcache("keygen", str(key)).returncode == 0
    _publish(cache, key, tmp_path / "first.json")
    entries = sorted(n for n in os.listdir(cache) if n.endswith("-cache"))
    assert entries
    bad = entries[0]
    with open(cache / bad, "ab") as f:
        f.write(b"planted")
    planted = (cache / bad).read_bytes()
    verify = ["verify", "--trusted-key", f"{key}.pub", str(cache)]
    assert jaxcache(*verify).returncode == 1
    _publish(cache, key, tmp_path / "again.json")  # first writer wins: the bad one stays
    assert (cache / bad).read_bytes() == planted
    qdir = tmp_path / "quarantine"
    proc = jaxcache(*verify, "--quarantine", str(qdir))
    assert proc.returncode == 0, proc.stdout + proc.stderr  # what is left verifies
    [run] = qdir.iterdir()  # this run's own folder
    # issue 44: the move is part of the answer (its first line), not a note printed beside it
    first, *rest = proc.stdout.splitlines()
    assert first.startswith("VALID: every entry verifies") and \
        first.endswith(f", after 1 rejected entry was quarantined to {run}"), first
    assert any(ln.startswith(f"  QUARANTINED    {bad} (bad-signature") for ln in rest)
    assert "quarantined" not in proc.stderr
    assert (run / bad).read_bytes() == planted  # moved, not deleted
    assert any(n.startswith(bad + ".") for n in os.listdir(run))  # its signature came along
    assert oct(qdir.stat().st_mode & 0o777) == oct(run.stat().st_mode & 0o777) == "0o700"
    assert not (cache / bad).exists()
    _publish(cache, key, tmp_path / "third.json")  # the key is free again: written anew
    assert (cache / bad).exists() and (cache / bad).read_bytes() != planted
    assert jaxcache(*verify).returncode == 0
    again = jaxcache(*verify, "--quarantine", str(qdir), "--format", "json")  # nothing bad:
    assert again.returncode == 0 and "quarantined" not in again.stderr  # nothing moved
    doc = json.loads(again.stdout)
    pytest.importorskip("jsonschema").validate(doc, schemas.load("seal-scan"))
    assert doc["quarantine"]["moved"] == [] and doc["quarantine"]["not_moved"] == []
    assert list(qdir.iterdir()) == [run]  # nor any folder made


@needs_root
def test_each_run_moves_into_a_fresh_folder_so_others_files_never_block_it(base, accounts):
    """Root quarantines another user's bad entries (they keep their owner when moved): the
    next run is not refused for what the last one moved, and each run has a folder of its
    own, 0700 and root's, in QDIR (still judged private)."""
    from jaxcache.seal.stores.sealed_cache import SealedCache
    from jaxcache.trust.inputs.signing_keys import generate

    key = generate()
    cache = mkdir(base / "shared", 0o755)
    store = SealedCache(str(cache), trusted=[key.public], signer=key)
    keys = ["jit_f-" + "ab" * 32, "jit_g-" + "cd" * 32]
    for k in keys:
        store.put(k, b"compiled " + k.encode())
    store.close()
    uid = pwd.getpwnam(accounts.a).pw_uid
    qdir = base / "quarantine"
    verify = ["verify", "--trusted-key", key.public.text, str(cache), "--quarantine", str(qdir)]
    for k in keys:  # accounts.a swaps one entry at a time; root moves it aside each time
        entry = cache / f"{k}-cache"
        entry.unlink()
        entry.write_bytes(b"planted by " + accounts.a.encode())
        os.chown(entry, uid, -1)
        proc = jaxcache(*verify)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"  QUARANTINED    {k}-cache (bad-signature" in proc.stdout
    first, second = sorted(qdir.iterdir())  # a folder per run, named by its time first
    assert (first / f"{keys[0]}-cache").stat().st_uid == uid  # moved, owner kept
    assert (second / f"{keys[1]}-cache").stat().st_uid == uid
    for folder in (qdir, first, second):
        st = folder.stat()
        assert st.st_uid == 0 and st.st_mode & 0o777 == 0o700, folder
    os.chmod(qdir, 0o777)  # QDIR itself is still judged: others could replace a folder
    refused = jaxcache(*verify[:-2], "--quarantine", str(qdir))
    assert refused.returncode == 2 and f"--quarantine {qdir}" in refused.stderr
