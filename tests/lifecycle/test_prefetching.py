"""The fetch ahead's plan under `run --sealed --local` (lifecycle/prefetching.py absent_from):
what this build's folder of the local tier holds is loaded from there, so it is not fetched."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("jax")

KEYS = tuple(f"jit_f{i}-{i:064x}" for i in range(4))


def test_keys_the_local_tier_holds_are_not_fetched_ahead(tmp_path):
    from jaxcache.lifecycle.local_tier import build_tier, local_path
    from jaxcache.lifecycle.prefetching import absent_from
    from jaxcache.trust.rules import target

    local = tmp_path / "local"
    assert absent_from(KEYS, str(local)) == KEYS  # no tier yet: nothing to filter
    tier = build_tier(local_path(target.resolve(str(local)), str(local)))
    os.makedirs(tier, mode=0o700)
    (tmp_path / "elsewhere").write_bytes(b"x")
    with open(os.path.join(tier, f"{KEYS[0]}-cache"), "wb") as f:
        f.write(b"an entry")
    os.symlink(tmp_path / "elsewhere", os.path.join(tier, f"{KEYS[1]}-cache"))  # not held
    os.mkdir(os.path.join(tier, f"{KEYS[2]}-cache"))  # nor is a directory
    assert absent_from(KEYS, str(local)) == KEYS[1:]

