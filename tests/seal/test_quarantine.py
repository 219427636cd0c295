"""`verify --quarantine` (issue 28, point 6): a bad entry that sits at its key is moved aside
with its sidecars into a private directory jaxcache makes, never deleted; the next publish
writes that key again, and verify then passes. Real JAX jobs in separate processes."""

from __future__ import annotations

import os
import sys

import pytest
from support import paths
from support.jobs import clean_env, jaxcache

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
    assert f"quarantined {bad} (bad-signature" in proc.stderr
    assert proc.stdout.startswith("VALID: every entry verifies")
    assert (qdir / bad).read_bytes() == planted  # moved, not deleted
    assert any(n.startswith(bad + ".") for n in os.listdir(qdir))  # its signature came along
    assert oct(qdir.stat().st_mode & 0o777) == "0o700"
    assert not (cache / bad).exists()
    _publish(cache, key, tmp_path / "third.json")  # the key is free again: written anew
    assert (cache / bad).exists() and (cache / bad).read_bytes() != planted
    assert jaxcache(*verify).returncode == 0
    again = jaxcache(*verify, "--quarantine", str(qdir))  # nothing bad: nothing moved
    assert again.returncode == 0 and "quarantined" not in again.stderr
