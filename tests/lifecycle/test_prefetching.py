"""The fetch ahead's plan under `run --sealed --local` (lifecycle/prefetching.py absent_from):
what this build's folder of the local tier holds is loaded from there, so it is not fetched."""

from __future__ import annotations

import os

import pytest
from support.jobs import forked_exit_code
from support.users import isolation

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
    """The early start keeps the failure, which the enable's pool reports (its keys all not
    fetched); an enable's own start that fails the same way hands back no pool: JAX then
    asks for each entry itself (and misses), as without."""
    pytest.importorskip("boto3")
    from jaxcache.lifecycle import prefetching
    from jaxcache.lifecycle.seal_spec import PrefetchSpec, SealSpec
    from jaxcache.seal.objects import store_for_url as objects
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
    ring = keyring.of([public])
    pool = prefetching.for_enable(url, lambda: store, ring, plan)
    assert pool is not None and pool.counts().not_fetched == len(KEYS)  # not tried again
    assert pool.counts().early_error and "ValueError" in pool.counts().early_error
    assert prefetching.for_enable(url, lambda: store, ring, plan) is None  # tried: no pool


def test_a_keyless_publisher_fetches_nothing_ahead(tmp_path):
    """`--identity ci` publishes (its misses are compiled and signed): like a key's
    publisher, nothing is planned for it and no early fetch starts."""
    from jaxcache.lifecycle import prefetching
    from jaxcache.lifecycle.seal_spec import PrefetchSpec, SealSpec
    from jaxcache.lifecycle.sealing import SealOptions
    from jaxcache.run.command import _prefetch_env
    from jaxcache.trust.inputs import signing_keys
    from jaxcache.trust.rules import keyring

    record = tmp_path / "r.json"
    record.write_text("{}")
    url = "gs://bucket/prefix"
    assert _prefetch_env(["python", "job.py"], url,
                         SealOptions(identity="ci", prefetch_from=str(record))) == {}
    public = signing_keys.generate().public
    prefetching.start_early(
        SealSpec(url, None, (public.text,), None, None, identity="ci").to_env(),
        PrefetchSpec(KEYS, "a record", 2, 1 << 20).to_env())
    assert prefetching.adopt(url, keyring.of([public])) is None  # none started, none failed


def test_a_forked_child_never_blocks_on_a_lock_a_pool_held_at_the_fork(tmp_path):
    """A lock of the pool held (by one of its threads) when the job forks stays held in the
    child for good: the child's pools get new locks and fetch nothing more."""

    from jaxcache.seal.objects.directory_objects import DirectoryObjects
    from jaxcache.seal.stores.prefetch import Prefetcher
    from jaxcache.trust.inputs import signing_keys
    from jaxcache.trust.rules import keyring

    pool = Prefetcher(DirectoryObjects(str(tmp_path)), keyring.of(
        [signing_keys.generate().public]), KEYS)
    with pool._lock:  # as a worker holds it, at the moment of the fork
        pid = os.fork()
        if pid == 0:
            c = pool.counts()  # blocked for good before
            os._exit(0 if c.planned == len(KEYS) and c.not_fetched == len(KEYS) else 1)
    assert forked_exit_code(pid) == 0


HANGING_CLIENT = r"""
import sys
from jaxcache.lifecycle import prefetching
from jaxcache.lifecycle.seal_spec import PrefetchSpec, SealSpec
from jaxcache.seal.stores import prefetch as ahead
from jaxcache.trust.inputs import signing_keys
from jaxcache.trust.rules import keyring

public = signing_keys.generate().public
url = "s3://bucket/prefix"
keys = tuple(f"jit_f{i}-{i:064x}" for i in range(4))
prefetching.start_early(SealSpec(url, None, (public.text,), None, None).to_env(),
                        PrefetchSpec(keys, "a record", 2, 1 << 20).to_env())
found = prefetching.adopt(url, keyring.of([public]))
print("early error:", found)
"""


def test_a_client_that_never_answers_holds_the_job_for_its_deadline_only(tmp_path):
    """Making the S3 client runs the profile's credential_process, which may never answer (a
    prompt, a dead helper): the early start waits for it the bucket's deadline, then lets
    the job import JAX, keeping why."""
    import subprocess
    import sys

    pytest.importorskip("boto3")
    config = tmp_path / "aws-config"
    config.write_text("[default]\ncredential_process = sleep 30\n")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "AWS_CONFIG_FILE": str(config),
           "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
           "JAXCACHE_BUCKET_DEADLINE_S": "1", "PYTHONPATH": os.pathsep.join(sys.path),
           **isolation()}
    t = subprocess.run([sys.executable, "-c", HANGING_CLIENT], env=env, capture_output=True,
                       text=True, timeout=25)  # a hang would wait out the 30 s helper
    assert t.returncode == 0, t.stderr[-2000:]
    assert "early error: StoreError" in t.stdout and "deadline" in t.stdout, t.stdout


def test_a_directory_fetch_names_signatures_as_its_filesystem_does(tmp_path):
    """A sealed directory on a filesystem whose names stop at 255 bytes: an entry of a module
    name 182 characters long has its signature at `<key>.sig` (`<entry>.sig` does not fit),
    and the fetch ahead reads it there, as the reader's own load does (it looked for the
    bucket's name, which no filesystem holds, and the entry was never fetched ahead)."""
    from jaxcache.seal.objects.directory_objects import DirectoryObjects
    from jaxcache.seal.stores.prefetch import Outcome, Prefetcher
    from jaxcache.seal.stores.sealed_cache import SealedCache
    from jaxcache.trust.inputs import signing_keys
    from jaxcache.trust.rules import keyring

    signer = signing_keys.generate()
    shared = tmp_path / "sealed"
    shared.mkdir()
    short, long_ = f"jit_f-{'1' * 64}", f"jit_{'x' * 178}-{'2' * 64}"
    publisher = SealedCache(str(shared), trusted=[signer.public], signer=signer)
    for key in (short, long_):
        publisher.put(key, b"an executable of " + key.encode())
    publisher.close()
    assert f"{long_}.sig" in os.listdir(shared)  # the name that fits
    pool = Prefetcher(DirectoryObjects(str(shared)), keyring.of([signer.public]),
                      [short, long_]).start()
    assert pool.wait_idle(120)
    for key in (short, long_):
        taken = pool.take(key)
        assert taken is not None and taken.fetched is not None
        assert taken.fetched.outcome is Outcome.LOADED, taken.fetched
        assert taken.fetched.data == b"an executable of " + key.encode()
    pool.close()
