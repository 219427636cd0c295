"""Prefetch for a sealed bucket reader (issue 45, seal/stores/prefetch.py), against real stores
(fake-gcs-server, SeaweedFS) behind the loopback proxy, which counts every request.

Every entry handed over is the signed bytes (an entry swapped after its prefetch is never
seen; one swapped before it is rejected, reported once, on the reader's thread); an entry asked
for while its fetch is in flight is waited for, never downloaded twice; a record of 1,000 keys,
hostile names and a bucket failing mid-prefetch keep memory and requests bounded and the counts
honest. Counts and bytes are asserted, never times.
"""

from __future__ import annotations

import pytest
from support import bucket_faults, faultproxy
from support.faultproxy import Fault
from support.jobs import forked_exit_code

pytest.importorskip("cryptography")
pytest.importorskip("jax")

BACKENDS = bucket_faults.available()
if not BACKENDS:
    pytest.skip("neither fake-gcs-server nor SeaweedFS is installed", allow_module_level=True)


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request, tmp_path_factory):
    s3 = request.getfixturevalue("s3_server") if request.param == "s3" else None
    b = bucket_faults.start(request.param, tmp_path_factory.mktemp(request.param), s3)
    yield b
    b.stop()


def _published(world, backend, prefix: str) -> str:
    """The world's entries, signed, under a prefix of this test's own (no proxy)."""
    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.seal.stores.bucket_backend import BucketSealedCache
    from jaxcache.trust.inputs import signing_keys as keys
    from jaxcache.trust.rules import target

    with faultproxy.Proxy(backend.upstream) as proxy, \
            bucket_faults.environment(backend.env(proxy)):
        signer = keys.load_signing(str(world.key))
        cache = BucketSealedCache(objects.open_store(target.parse_bucket(backend.url(prefix))),
                                  trusted=[signer.public], signer=signer)
        for key, data in world.entries:
            cache.put(key, data)
        cache.close()
    return backend.url(prefix)


def _published_swapped(world, backend, prefix: str) -> str:
    """The world's entries published under `prefix`, then the second key's object overwritten
    with the first's bytes (a swap before any fetch: its signature no longer vouches)."""
    url = _published(world, backend, prefix)
    (_, d1), (k2, _) = world.entries[0], world.entries[1]
    backend.upload(f"{url.split('/', 3)[3]}/{k2}-cache", d1)
    return url


def _reader(world, url: str, keys, **options):
    """A reader of `url` with a prefetch of `keys` started (in the proxy's environment)."""
    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.seal.stores.bucket_backend import BucketSealedCache
    from jaxcache.seal.stores.prefetch import Prefetcher
    from jaxcache.trust.inputs.public_keys import load_public
    from jaxcache.trust.rules import keyring, target

    ring = keyring.of([load_public(world.pub)])
    store = objects.open_store(target.parse_bucket(url))
    pre = Prefetcher(store, ring, keys, **options).start()
    return BucketSealedCache(store, trusted=ring, prefetch=pre), pre


def _entry_gets(proxy, key: str) -> int:
    """Downloads of `key`'s entry (not its signature, not a stat) the proxy saw."""
    return sum(1 for r, _ in proxy.seen if bucket_faults.is_download(r, f"{key}-cache"))


def _all_accounted(c) -> bool:
    return c.planned == c.used + c.wasted + c.not_fetched + c.not_found + c.failed + c.rejected


def test_prefetched_entries_are_the_signed_bytes_and_counted(world, backend):
    url = _published(world, backend, "pre-hit")
    keys = [k for k, _ in world.entries]
    with faultproxy.Proxy(backend.upstream) as proxy, \
            bucket_faults.environment(backend.env(proxy)):
        reader, pre = _reader(world, url, keys)
        assert pre.wait_idle(120)
        for key, data in world.entries[:-1]:  # the job no longer asks for the last one
            assert reader.get(key) == data
        reader.close()
        c = pre.counts()
    assert (c.planned, c.prefetched, c.used, c.wasted) == (len(keys), len(keys),
                                                           len(keys) - 1, 1)
    assert reader.rejections == [] and reader.misses == [] and _all_accounted(c)
    assert pre.held_bytes == 0  # dropped at close


def test_an_entry_swapped_after_its_prefetch_is_never_seen(world, backend):
    """The prefetch holds the verified bytes: what the bucket holds by the time JAX asks does
    not reach JAX; a swap before the prefetch is rejected, reported once, at get time."""
    url = _published_swapped(world, backend, "pre-swap")  # k2's entry: k1's bytes
    prefix = url.split("/", 3)[3]
    (k1, d1), (k2, d2) = world.entries[0], world.entries[1]
    with faultproxy.Proxy(backend.upstream) as proxy, \
            bucket_faults.environment(backend.env(proxy)):
        reader, pre = _reader(world, url, [k1, k2])
        assert pre.wait_idle(120)
        assert reader.rejections == []  # nothing reported from the workers
        # k1's entry swapped for k2's bytes after its prefetch, before JAX asks
        backend.upload(f"{prefix}/{k1}-cache", d2)
        assert reader.get(k1) == d1
        assert reader.get(k2) is None
        (r,) = reader.rejections
        assert (r.key, r.status) == (k2, "bad-signature")
        c = pre.counts()
        assert (c.used, c.rejected) == (1, 1) and _all_accounted(c)
        reader.close()


def test_an_entry_asked_for_in_flight_is_waited_for_never_fetched_twice(world, backend):
    url = _published(world, backend, "pre-wait")
    key, data = max(world.entries, key=lambda e: len(e[1]))
    with faultproxy.Proxy(backend.upstream, delay_s=0.2) as proxy, \
            bucket_faults.environment(backend.env(proxy)):
        reader, pre = _reader(world, url, [key])
        assert reader.get(key) == data  # at once: queued, in flight or done, one download
        assert pre.wait_idle(120)
        assert _entry_gets(proxy, key) == 1, [r.target for r, _ in proxy.seen]
        c = pre.counts()
        assert c.used + c.not_fetched == 1 and c.wasted == 0 and _all_accounted(c)
        reader.close()


def test_a_record_of_a_thousand_keys_and_hostile_names_is_bounded(world, backend):
    """1,000 well-formed keys (mostly absent) are capped; hostile names are never asked for;
    a budget smaller than the entries holds at most what it allows, and every get still
    answers the signed bytes (the reader fetches what the pool left)."""
    from jaxcache.seal.stores import prefetch_plan

    url = _published(world, backend, "pre-many")
    hostile = ["../../etc/passwd", "a" * 5000, "x/" + "0" * 64, "jit_f-" + "0" * 63 + "/",
               "jit_f-" + "G" * 64, "", None, 7, {"k": 1}, "jit_\u0131-" + "0" * 64,
               "jit_f-" + "0" * 64 + "\n"]
    fake = [f"jit_m{i}-{i:064x}" for i in range(1000)]
    real = [k for k, _ in world.entries]
    budget = max(len(d) for _, d in world.entries)  # one entry at a time at most
    with faultproxy.Proxy(backend.upstream) as proxy, \
            bucket_faults.environment(backend.env(proxy)):
        reader, pre = _reader(world, url, [*real, *hostile, *fake], limit=64,
                              budget_bytes=budget)
        assert pre.keys[:len(real)] == tuple(real) and len(pre.keys) == 64
        assert all(prefetch_plan.plan_keys([h]) == () for h in hostile)
        assert pre.wait_idle(120)
        assert pre.held_bytes <= budget
        for key, data in world.entries:
            assert reader.get(key) == data
        asked = " ".join(r.target for r, _ in proxy.seen)
        assert "passwd" not in asked and "aaaaaaaaaa" not in asked
        reader.close()
        c = pre.counts()
    assert c.planned == 64 and c.used + c.not_fetched == len(real) and _all_accounted(c)
    assert (c.not_found, c.failed) == (64 - len(real), 0)  # the fake keys, each once


def test_keys_the_bucket_does_not_hold_are_counted_not_found_apart_from_failures(world,
                                                                                 backend):
    """A record naming keys this prefix never held (another cache's, or entries deleted
    since): each is not found, not a failed fetch; a key whose download the server refuses
    (503, three times) is the one failure. The counts add up, the record's part passes its
    schema, and the summary says which is which."""
    from jaxcache.documents import schemas
    from jaxcache.lifecycle import prefetching
    from jaxcache.records.run_document import PrefetchPart
    from jaxcache.report.run import _prefetch_line

    url = _published(world, backend, "pre-absent")
    real = [k for k, _ in world.entries]
    absent = [f"jit_gone{i}-{i:064x}" for i in range(3)]
    refused = real[-1]
    plan = faultproxy.on(lambda r: bucket_faults.is_download(r, f"{refused}-cache.sig"),
                         Fault.STATUS_503)
    with faultproxy.Proxy(backend.upstream, plan) as proxy, \
            bucket_faults.environment(backend.env(proxy)):
        reader, pre = _reader(world, url, [*real, *absent])
        assert pre.wait_idle(120)
        for key, data in world.entries[:-1]:
            assert reader.get(key) == data
        reader.close()
        c = pre.counts()
        summary = prefetching.summary(pre)
    assert (c.planned, c.used, c.not_found, c.failed) == (len(real) + 3, len(real) - 1, 3, 1), c
    assert _all_accounted(c), c
    assert summary is not None and (summary["not_found"], summary["failed"]) == (3, 1)
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(summary, schemas.load("run")["properties"]["seal"]["properties"][
        "prefetch"])
    line = _prefetch_line(PrefetchPart.from_json(summary))
    assert "3 not found in the cache, 1 failed" in line, line


def test_a_bucket_failing_mid_prefetch_stops_the_pool_and_counts_stay_honest(world, backend):
    url = _published(world, backend, "pre-fail")
    keys = [k for k, _ in world.entries]

    def plan(r: faultproxy.Request) -> Fault:
        return Fault.RESET if r.index > 2 else Fault.PASS  # every later request is cut off

    with faultproxy.Proxy(backend.upstream, plan) as proxy, \
            bucket_faults.environment(backend.env(proxy, deadline_s=2.0)):
        reader, pre = _reader(world, url, keys, workers=2)
        assert pre.wait_idle(120)
        assert pre.network_error is not None
        got = [reader.get(k) for k in keys]
        assert all(g is None or g == d for g, (_, d) in zip(got, world.entries, strict=True))
        asked_after = len(proxy.seen)
        reader.get(keys[0])  # a second ask: the bucket is skipped for a while, no request
        assert len(proxy.seen) == asked_after
        assert any(m.kind == "network" for m in reader.misses)
        reader.close()
        c = pre.counts()
    assert c.failed >= 1 and _all_accounted(c)
    # bounded: each worker's last fetch, each request tried at most three times
    assert len(proxy.seen) <= 2 + 2 * 3 * 4 + 3 * len(keys)


IMPORTS_OFF_MAIN = r"""
import json, sys, threading
from jaxcache.lifecycle import prefetching
from jaxcache.lifecycle.seal_spec import PrefetchSpec, SealSpec

seal_value, plan_value, url = sys.argv[1:4]
seen = []
returned = []


class Watch:
    # every module imported anew reaches a finder: name those imported off the main thread
    # once the early start has returned (the job's `import jax` goes on from there)
    def find_spec(self, name, path=None, target=None):
        if returned and threading.current_thread() is not threading.main_thread():
            seen.append([threading.current_thread().name, name])
        return None


sys.meta_path.insert(0, Watch())
prefetching.start_early(seal_value, plan_value)
returned.append(True)
from jaxcache.seal.stores import prefetch as ahead
from jaxcache.trust.inputs import policy, public_keys
from jaxcache.trust.kernel.principals import Accounts
from jaxcache.trust.rules import keyring

given = SealSpec.from_env(seal_value).trusted_keys
ring = keyring.for_rule(policy.load(None, Accounts()).rule_for(url),
                        tuple(public_keys.load_public(k) for k in given))
pool = prefetching.adopt(url, ring)
assert isinstance(pool, ahead.Prefetcher), pool
assert pool.wait_idle(120)
c = pool.counts()
print(json.dumps({"imported_off_main": seen, "prefetched": c.prefetched, "planned": c.planned}))
"""


def test_the_early_start_leaves_no_import_to_the_pool(world, backend, tmp_path):
    """The job imports JAX while the pool fetches: a thread of ours importing beside it could
    meet importlib's deadlock detection (an ImportError in the job's own `import jax`). The
    early start makes the client and imports all it needs first, while the importing thread
    waits for it: once it returns, the pool's threads and the store's deadline threads import
    nothing at all."""
    import json
    import subprocess
    import sys

    from jaxcache.lifecycle.seal_spec import PrefetchSpec, SealSpec

    url = _published(world, backend, "pre-imports")
    keys = tuple(k for k, _ in world.entries)
    seal = SealSpec(url, None, (str(world.pub),), None, None).to_env()
    plan = PrefetchSpec(keys, "a record", 4, 1 << 30).to_env()
    with faultproxy.Proxy(backend.upstream) as proxy:
        t = subprocess.run([sys.executable, "-c", IMPORTS_OFF_MAIN, seal, plan, url],
                           env=backend.env(proxy), capture_output=True, text=True, timeout=300)
    assert t.returncode == 0, t.stderr[-3000:]
    got = json.loads(t.stdout.splitlines()[-1])
    assert got["planned"] == got["prefetched"] == len(keys)  # it did fetch, on its threads
    assert got["imported_off_main"] == [], " ".join(n for _, n in got["imported_off_main"])


def test_an_early_start_that_failed_is_not_tried_again_and_says_why(world, backend, tmp_path):
    """The early start never fails the job: what went wrong is kept; the enable does not try
    again (a client that hung would hang as long again): the plan's keys count as not
    fetched, every get fetches its entry itself, and the record and summary say why. With no
    early start tried (enable's own keys), the enable starts the fetch itself."""
    from jaxcache.lifecycle import prefetching
    from jaxcache.lifecycle.seal_spec import PrefetchSpec, SealSpec
    from jaxcache.records.run_document import PrefetchPart
    from jaxcache.report.run import _prefetch_line
    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.seal.stores.bucket_backend import BucketSealedCache
    from jaxcache.trust.inputs.public_keys import load_public
    from jaxcache.trust.rules import keyring, target

    url = _published(world, backend, "pre-late")
    keys = tuple(k for k, _ in world.entries)
    plan = PrefetchSpec(keys, "a record", 4, 1 << 30)
    gone = tmp_path / "gone.pub"  # the early start's trusted key cannot be read
    with faultproxy.Proxy(backend.upstream) as proxy, \
            bucket_faults.environment(backend.env(proxy)):
        prefetching.start_early(SealSpec(url, None, (str(gone),), None, None).to_env(),
                                plan.to_env())  # raises nothing
        ring = keyring.of([load_public(world.pub)])
        store = objects.open_store(target.parse_bucket(url))
        assert prefetching.for_enable(url, lambda: store, ring, None) is None  # no plan
        prefetching.start_early(SealSpec(url, None, (str(gone),), None, None).to_env(),
                                plan.to_env())
        pool = prefetching.for_enable(url, lambda: store, ring, plan)
        assert pool is not None
        reader = BucketSealedCache(store, trusted=ring, prefetch=pool)
        assert all(reader.get(k) == d for k, d in world.entries)  # each fetched by get
        c = pool.counts()
        summary = prefetching.summary(pool)
        reader.close()
        late = prefetching.for_enable(url, lambda: store, ring, plan)  # none tried early
        assert late is not None and late.wait_idle(120)
        started = late.counts()
        late.close()
    assert (c.planned, c.prefetched, c.not_fetched) == (len(keys), 0, len(keys))
    assert c.early_error is not None and "gone.pub" in c.early_error, c.early_error
    line = _prefetch_line(PrefetchPart.from_json(summary or {}))
    assert "started late, at enable" not in line and "gone.pub" in line, line
    assert started.prefetched == len(keys) and started.early_error is None


def test_a_forked_child_never_waits_for_a_fetch_no_thread_of_its_own_will_finish(world, backend):
    """A job that forks with a fetch in flight: the child has none of the pool's threads, so
    it never waits for that fetch; it fetches for itself (the parent still takes it)."""
    import os

    url = _published(world, backend, "pre-fork")
    key, data = max(world.entries, key=lambda e: len(e[1]))
    with faultproxy.Proxy(backend.upstream, delay_s=0.5) as proxy, \
            bucket_faults.environment(backend.env(proxy)):
        reader, pre = _reader(world, url, [key])
        pid = os.fork()
        if pid == 0:  # the child: take() must answer at once, None (fetch it yourself)
            os._exit(0 if pre.take(key) is None else 1)
        assert forked_exit_code(pid) == 0
        assert reader.get(key) == data  # the parent's fetch, taken as ever
        assert pre.counts().used == 1
        reader.close()


def test_a_key_that_expires_between_the_prefetch_and_the_load_is_not_loaded(world, backend):
    """The ring's clock passes the only key's not_after after the pool verified an entry:
    JAX's get then rejects it, as a fetch at that moment would, and the count says so."""
    import dataclasses

    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.seal.stores.bucket_backend import BucketSealedCache
    from jaxcache.seal.stores.prefetch import Prefetcher
    from jaxcache.trust.inputs.public_keys import load_public
    from jaxcache.trust.rules import keyring, target

    url = _published(world, backend, "pre-expiry")
    now = [1_000.0]
    pub = dataclasses.replace(load_public(world.pub), not_after=2_000.0)
    ring = dataclasses.replace(keyring.of([pub]), clock=lambda: now[0])
    (k1, _), (k2, _) = world.entries[0], world.entries[1]
    with faultproxy.Proxy(backend.upstream) as proxy, \
            bucket_faults.environment(backend.env(proxy)):
        store = objects.open_store(target.parse_bucket(url))
        pre = Prefetcher(store, ring, [k1]).start()
        reader = BucketSealedCache(store, trusted=ring, prefetch=pre)
        assert pre.wait_idle(120) and pre.counts().prefetched == 1
        now[0] = 3_000.0  # the key expired
        assert reader.get(k1) is None  # verified while it was trusted: not loaded now
        assert reader.get(k2) is None  # fetched now: rejected alike
        got = sorted((r.key, r.status) for r in reader.rejections)
        c = pre.counts()
        reader.close()
    assert got == sorted([(k1, "expired-key"), (k2, "expired-key")])
    assert (c.used, c.rejected) == (0, 1) and _all_accounted(c)


def test_results_never_asked_for_are_counted_whatever_they_were(world, backend):
    """A swapped entry the pool rejected and one over the budget, neither asked for: the
    counts still add up (rejected, not fetched), so the record never hides the swap."""
    url = _published_swapped(world, backend, "pre-count")  # k2's entry: k1's bytes
    (k1, _), (k2, _) = world.entries[0], world.entries[1]
    with faultproxy.Proxy(backend.upstream) as proxy, \
            bucket_faults.environment(backend.env(proxy)):
        swapped, pre = _reader(world, url, [k2])
        tight, over = _reader(world, url, [k1], budget_bytes=0)
        assert pre.wait_idle(120) and over.wait_idle(120)
        swapped.close()  # the job ended without asking for either
        tight.close()
        c, o = pre.counts(), over.counts()
    assert (c.planned, c.rejected) == (1, 1) and _all_accounted(c), c
    assert (o.planned, o.not_fetched) == (1, 1) and _all_accounted(o), o


def test_fetches_still_queued_or_in_flight_are_counted_not_fetched(world, backend):
    """A job that ends (or is counted) while fetches are in flight on a slow bucket: those
    keys are not fetched, so the counts still add up to the keys planned."""
    url = _published(world, backend, "pre-inflight")
    keys = [k for k, _ in world.entries]
    with faultproxy.Proxy(backend.upstream, delay_s=1.0) as proxy, \
            bucket_faults.environment(backend.env(proxy)):
        reader, pre = _reader(world, url, keys, workers=1)
        c = pre.counts()  # one worker, a second a request: most keys have no result yet
        reader.close()
    assert c.planned == len(keys) and c.used == 0, c
    assert c.not_fetched >= 1 and _all_accounted(c), c


def test_a_prefetch_of_an_entry_served_past_its_signed_size_reads_no_further(world, backend):
    """The server ignores the Range and sends the entry, then no end: the pool reads one byte
    past the signed size and closes, the entry is rejected as longer than signed, reported
    once on the reader's thread, and counted rejected. Before, the Cloud Storage client read
    the whole answer (here the proxy's 128 MiB) into memory first."""
    url = _published(world, backend, "pre-endless")
    key, data = world.entries[0]
    plan = faultproxy.on(lambda r: bucket_faults.is_download(r, f"{key}-cache"),
                         Fault.ENDLESS)
    with faultproxy.Proxy(backend.upstream, plan) as proxy, \
            bucket_faults.environment(backend.env(proxy, deadline_s=300)):
        reader, pre = _reader(world, url, [key])
        assert pre.wait_idle(300)
        assert reader.get(key) is None
        reader.close()
        c = pre.counts()
        bucket_faults.read_within(proxy, len(data) + 1)
    assert _entry_gets(proxy, key) == 1  # the pool's: the reader took its result
    (r,) = reader.rejections
    assert f"longer than the {len(data)} bytes signed" in r.reason, r.reason
    assert (c.planned, c.rejected) == (1, 1) and _all_accounted(c), c
