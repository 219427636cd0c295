"""`jaxcache gc` on a sealed bucket prefix, the same checks against both servers (the Cloud
Storage emulator and SeaweedFS), called from tests/seal/test_sealed_bucket.py and
test_sealed_s3.py, whose module fixtures publish real entries from a real JAX job.

`server` is the test's handle on the bucket (names, upload, download: support/gcs_emulator.py
and support/seaweedfs.py agree); `copy(world, prefix)` copies the published objects;
`job(world, url)` runs a reader that holds only the public key.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from support.jobs import jaxcache

UNSIGNED = "jit_unsigned-" + "1" * 64 + "-cache"  # JAX's own, or a hand upload: no .sig


def _gc(url: str, env: dict[str, str], *args: str) -> dict[str, Any]:
    proc = jaxcache("gc", url, *args, "--format", "json", env=env)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def gc_then_warm_run(world: dict[str, Any], server: Any, bucket: str,
                     copy: Callable[[dict[str, Any], str], str],
                     job: Callable[..., dict[str, Any]]) -> None:
    """Fill a prefix, gc it by size (one unit goes, whole) and by age (every signed unit), a
    warm reader hits every kept entry and recompiles the evicted one with the same results;
    --dry-run changes nothing and plans the same; an unsigned entry and a foreign object are
    reported and left; `verify` after gc is clean."""
    url = copy(world, "gc")
    env = world["env"]
    full = job(world, url)
    assert full["results"] == world["golden"] and full["rejections"] == []
    server.upload(bucket, f"gc/{UNSIGNED}", b"not a sealed entry")
    server.upload(bucket, "gc/notes.txt", b"someone's notes")
    before = server.names(bucket, "gc")
    entries = sorted(n for n in before if n.endswith("-cache") and n != UNSIGNED)
    assert len(entries) == full["hits"] >= 2
    total = sum(len(server.download(bucket, f"gc/{n}")) for n in before)

    dry = _gc(url, env, "--max-size", str(total - 1), "--dry-run")
    assert server.names(bucket, "gc") == before  # nothing changed, not even a generation
    assert dry["dry_run"] and len(dry["evicted"]) == 1
    left = {f["name"] for f in dry["left"]}
    assert {UNSIGNED, "notes.txt"} <= left

    done = _gc(url, env, "--max-size", str(total - 1))
    assert [e["entry"] for e in done["evicted"]] == [e["entry"] for e in dry["evicted"]]
    gone = done["evicted"][0]
    assert gone["files"] == [gone["entry"], gone["entry"] + ".sig"]  # the entry first
    now = server.names(bucket, "gc")
    assert set(before) - set(now) == set(gone["files"])
    assert all(now[n] == before[n] for n in now)  # the rest untouched
    assert done["freed_bytes"] == total - done["after_bytes"] > 0

    warm = job(world, url)
    assert warm["results"] == world["golden"] and warm["rejections"] == []
    assert warm["hits"] == full["hits"] - 1  # every kept entry hits; the evicted recompiles
    assert server.names(bucket, "gc") == now  # a reader writes nothing

    aged = _gc(url, env, "--max-age", "0")
    assert sorted(e["entry"] for e in aged["evicted"]) == sorted(set(entries) - {gone["entry"]})
    assert set(server.names(bucket, "gc")) == {UNSIGNED, "notes.txt"}
    cold = job(world, url)
    assert cold["results"] == world["golden"] and cold["hits"] == 0


def verify_after_gc_is_clean(world: dict[str, Any], server: Any, bucket: str,
                             copy: Callable[[dict[str, Any], str], str]) -> None:
    url = copy(world, "gcv")
    objects = server.names(bucket, "gcv")
    total = sum(len(server.download(bucket, f"gcv/{n}")) for n in objects)
    done = _gc(url, world["env"], "--max-size", str(total - 1))
    assert len(done["evicted"]) == 1
    proc = jaxcache("verify", url, "--trusted-key", world["pub"], env=world["env"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not [n for n in server.names(bucket, "gcv")
                if n.endswith(".sig") and n[:-4] not in server.names(bucket, "gcv")]
