"""A GCSFuse-style mount, for real: bindfs (FUSE) over a directory a publisher filled with
sealed entries, mounted with `subtype=gcsfuse` so that /proc/mounts says `fuse.gcsfuse`, as a
Cloud Storage FUSE mount does. A plain reader cannot know who writes behind a FUSE daemon
(UNVERIFIABLE, refused); a sealed reader uses the mount as any local path: it hits signed
entries and rejects one changed behind the mount.

Skipped, saying why, only where bindfs is missing (`make test` installs it as root) or the
kernel refuses FUSE (/dev/fuse missing, mount denied). The mount is taken down in the fixture
whatever the test did.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support import paths
from support.fuse import bindfs, mounted
from support.jobs import clean_env, jaxcache

pytest.importorskip("jax")

JOB = str(paths.PROGRAMS / "two_jits.py")


@pytest.fixture
def fuse(tmp_path):
    """(backing directory, FUSE mount of it)."""
    backing, mnt = tmp_path / "bucket", tmp_path / "mnt"
    backing.mkdir(mode=0o700)
    mnt.mkdir(mode=0o700)
    with bindfs(backing, mnt, tmp_path / "bindfs.log", "gcsfuse"):
        yield backing, mnt


def _keygen(path: Path) -> str:
    proc = jaxcache("keygen", str(path))
    assert proc.returncode == 0, proc.stderr
    return (path.parent / (path.name + ".pub")).read_text().strip()


def _run(env: dict, rec: Path, *opts: str) -> tuple[dict, dict, str]:
    proc = jaxcache("run", "--sealed", *opts, "--record", str(rec), "--", sys.executable, JOB,
                    env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), json.loads(rec.read_text()), \
        proc.stderr


def test_gcsfuse_style_mount_plain_unverifiable_sealed_hits_and_rejects(fuse, tmp_path):
    backing, mnt = fuse
    assert mounted(mnt) == "fuse.gcsfuse"
    env = clean_env()
    key = tmp_path / "keys" / "ci.key"
    pub = _keygen(key)
    # CI publishes into what the mount serves (the bucket, for gcsfuse)
    golden, doc, _ = _run(env, tmp_path / "ci.json", "--signing-key", str(key),
                          "--cache-dir", str(backing))
    assert doc["seal"]["writes"] and doc["seal"]["write_errors"] == []
    entries = sorted(p.name for p in mnt.iterdir() if p.name.endswith("-cache"))
    assert len(entries) >= 2 and all((mnt / f"{n}.sig").is_file() for n in entries)

    plain = jaxcache("audit", str(mnt), env=env)
    assert plain.returncode == 1, plain.stdout + plain.stderr
    assert "verdict: UNVERIFIABLE" in plain.stdout and "fuse.gcsfuse" in plain.stdout
    refused = jaxcache("run", "--cache-dir", str(mnt), "--", sys.executable, JOB, env=env)
    assert refused.returncode == 1 and "UNVERIFIABLE" in refused.stderr

    out, doc, _ = _run(env, tmp_path / "hit.json", "--trusted-key", pub, "--cache-dir", str(mnt))
    assert out["results"] == golden["results"] and out["hits"] >= 2
    assert doc["seal"]["rejections"] == [] and doc["seal"]["writes"] == []
    assert {m["outcome"] for m in doc["modules"] if m["cache_key"] + "-cache" in entries} \
        == {"hit"}

    # someone who can write behind the mount swaps f's executable for g's (validly signed,
    # for another key): f would silently compute g
    f = next(n for n in entries if n.startswith("jit_f-"))
    g = next(n for n in entries if n.startswith("jit_g-"))
    (backing / f).write_bytes((backing / g).read_bytes())
    assert (mnt / f).read_bytes() == (mnt / g).read_bytes()  # the mount serves the swap
    out, doc, err = _run(env, tmp_path / "swap.json", "--trusted-key", pub,
                         "--cache-dir", str(mnt))
    assert out["results"] == golden["results"]
    assert [(r["key"], r["status"]) for r in doc["seal"]["rejections"]] == \
        [(f[:-len("-cache")], "bad-signature")]
    assert "rejected" in err
    assert (backing / f).read_bytes() == (backing / g).read_bytes()  # left in place


def test_a_sealed_directory_on_a_network_mount_is_fetched_ahead(fuse, tmp_path):
    """A reader of a sealed directory on a FUSE mount (network-like: each read a round trip)
    fetches ahead what the last run hit, each entry verified as its own load would; the
    numbers are the job's own. A local directory is not a network one."""
    from jaxcache.lifecycle.prefetching import on_network

    backing, mnt = fuse
    assert on_network(str(mnt)) and not on_network(str(backing))
    env = clean_env()
    key = tmp_path / "keys" / "ci.key"
    pub = _keygen(key)
    golden, _, _ = _run(env, tmp_path / "ci.json", "--signing-key", str(key),
                        "--cache-dir", str(backing))
    _, first, _ = _run(env, tmp_path / "r1.json", "--trusted-key", pub, "--cache-dir", str(mnt))
    hits = sum(1 for m in first["modules"] if m["outcome"] == "hit")
    assert hits >= 2 and first["seal"]["prefetch"] is None
    out, second, err = _run(env, tmp_path / "r2.json", "--trusted-key", pub,
                            "--cache-dir", str(mnt), "--prefetch-from", str(tmp_path / "r1.json"))
    assert out["results"] == golden["results"]
    p = second["seal"]["prefetch"]
    assert (p["planned"], p["used"], p["wasted"], p["early_error"]) == (hits, hits, 0, None), p
    assert second["seal"]["rejections"] == []
    # f's executable swapped behind the mount before the next run: its fetch ahead is
    # rejected, then read as ever and reported with its owner; the job computes its own
    entries = sorted(p.name for p in mnt.iterdir() if p.name.endswith("-cache"))
    f = next(n for n in entries if n.startswith("jit_f-"))
    g = next(n for n in entries if n.startswith("jit_g-"))
    (backing / f).write_bytes((backing / g).read_bytes())
    out, third, _ = _run(env, tmp_path / "r3.json", "--trusted-key", pub,
                         "--cache-dir", str(mnt), "--prefetch-from", str(tmp_path / "r1.json"))
    assert out["results"] == golden["results"]
    assert [(r["key"], r["status"]) for r in third["seal"]["rejections"]] == \
        [(f[:-len("-cache")], "bad-signature")]
    assert third["seal"]["prefetch"]["used"] == hits - 1
