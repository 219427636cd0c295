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



def test_a_store_whose_client_cannot_be_made_never_stops_the_job(monkeypatch):
    """The early start keeps the failure; the enable's start from the plan fails the same way
    and hands back no pool: JAX then asks for each entry itself (and misses), as without."""
    pytest.importorskip("boto3")
    from jaxcache.lifecycle import prefetching
    from jaxcache.lifecycle.seal_spec import PrefetchSpec, SealSpec
    from jaxcache.seal.stores import store_for_url as objects
    from jaxcache.trust.inputs import signing_keys
    from jaxcache.trust.rules import keyring, target

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://[bad")  # the client refuses it when made
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")
    url = "s3://bucket/prefix"
    public = signing_keys.generate().public
    plan = PrefetchSpec(KEYS, "a record", 2, 1 << 20)
    prefetching.start_early(SealSpec(url, None, (public.text,), None, None).to_env(),
                            plan.to_env())  # raises nothing
    store = objects.open_store(target.parse_bucket(url))
    assert prefetching.for_enable(url, lambda: store, keyring.of([public]), plan) is None
