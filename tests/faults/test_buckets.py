"""Object-store faults (issue 42): fake-gcs-server and SeaweedFS behind a fault-injecting proxy
on loopback (support/faultproxy.py). 5xx answers, resets before and after the server applied a
request, stalls, bodies cut short, lengths that lie and flipped bytes never make a reader load
anything but an entry's exact bytes; a publisher killed at any request leaves nothing a reader
loads wrongly and the next one completes; every request has a deadline and retries are bounded;
a listing that fails half way is an error, never "0 entries"; a server that ignores the Range
or sends an answer without end is read no further than the request asked (counted in bytes at
the proxy, never timed); a real JAX job's numbers do not change. `make soak` runs more seeds and
every kill point (scripts/soak.py).
"""

from __future__ import annotations

import json
import threading

import pytest
from support import bucket_faults, faultproxy, faults
from support.faultproxy import Fault
from support.jobs import jaxcache

pytest.importorskip("cryptography")
pytest.importorskip("jax")

BACKENDS = bucket_faults.available()
if not BACKENDS:
    pytest.skip("neither fake-gcs-server nor SeaweedFS is installed", allow_module_level=True)
SEED = 11



@pytest.fixture(scope="module", params=BACKENDS)
def backend(request, tmp_path_factory):
    s3 = request.getfixturevalue("s3_server") if request.param == "s3" else None
    b = bucket_faults.start(request.param, tmp_path_factory.mktemp(request.param), s3)
    yield b
    b.stop()


def _clean(tally: faults.Tally) -> None:
    assert tally.failures == [], tally.failures[:5]
    assert (tally.wrong_loads, tally.lost_lines, tally.hangs, tally.internal_errors) == (0,) * 4


def test_seeded_faults_on_a_third_of_requests_never_load_a_wrong_entry(world, backend):
    tally = faults.Tally(f"{backend.name}: seeded request faults", "http")
    bucket_faults.publish_reads(world, backend, "noise", SEED, 0.35, tally)
    _clean(tally)
    assert tally.faults >= 5  # the proxy did fail requests (a third of some 50)


def _first_store_only(backend) -> None:
    """Kills cost a publisher and its checks each: in `make test` on one store (the soak
    kills at every request of both)."""
    if backend.name != BACKENDS[0]:
        pytest.skip("kills run on one store here; scripts/soak.py kills on both")


def test_a_publisher_killed_at_a_request(world, backend):
    """At a seeded request before the server sees it, and at the last after it applied it
    (the soak: every request, both ways)."""
    _first_store_only(backend)
    tally = faults.Tally(f"{backend.name}: publisher killed", "kill")
    n = bucket_faults.requests_of_publish(world, backend, "count")
    seeded = faults.points(n, 3, SEED)[1]
    for k, after in ((seeded, False), (n, True)):
        bucket_faults.killed_publisher(world, backend, f"kill-{after}-{k}", k, after, tally)
    _clean(tally)
    assert tally.faults == 2


@pytest.mark.parametrize("what", bucket_faults.COMMANDS)
def test_seal_and_gc_of_a_prefix_killed_at_a_request(world, backend, what):
    """At one seeded request: seal before the server sees it, cosign and gc after it
    applied it."""
    _first_store_only(backend)
    tally = faults.Tally(f"{backend.name}: {what} killed", "kill")
    n = bucket_faults.requests_of(what, world, backend, f"{what}-count")
    k = faults.points(n, 3, SEED)[1]
    bucket_faults.killed_command(what, world, backend, f"{what}-{k}", k, what != "seal", tally)
    _clean(tally)
    assert tally.faults == 1


def test_a_stalled_server_costs_one_deadline_then_a_miss(world, backend):
    """The proxy never answers: the load ends at the deadline (named in the miss), not at the
    client's socket timeout or never."""
    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.seal.stores.bucket_backend import BucketSealedCache
    from jaxcache.trust.inputs.public_keys import load_public
    from jaxcache.trust.rules import target

    with faultproxy.Proxy(backend.upstream, faultproxy.always(Fault.STALL)) as proxy, \
            bucket_faults.environment(backend.env(proxy, deadline_s=1.0)):
        reader = BucketSealedCache(objects.open_store(target.parse_bucket(
            backend.url("stalled"))), trusted=[load_public(world.pub)])
        got: list[object] = []
        t = threading.Thread(target=lambda: got.append(reader.get(world.entries[0][0])),
                             daemon=True)
        t.start()
        t.join(300)  # far past the 1 s deadline; only a missing deadline reaches it
        assert got == [None]
        assert "deadline" in reader.misses[0].reason, reader.misses
        asked = [r.target for r, _ in proxy.seen]
        assert len(asked) == len(set(asked))  # a deadline is not retried
        reader.close()


def test_retries_are_bounded(world, backend):
    """A server that answers 503 to everything is asked three times per call, no more (the
    clients' own retries are off: botocore's max_attempts alone left one more each time)."""
    from jaxcache.seal.objects import resilient
    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.seal.stores.bucket_backend import BucketSealedCache
    from jaxcache.trust.inputs.public_keys import load_public
    from jaxcache.trust.rules import target

    with faultproxy.Proxy(backend.upstream, faultproxy.always(Fault.STATUS_503)) as proxy, \
            bucket_faults.environment(backend.env(proxy)):
        reader = BucketSealedCache(objects.open_store(target.parse_bucket(
            backend.url("busy"))), trusted=[load_public(world.pub)])
        assert reader.get(world.entries[0][0]) is None
        reader.close()
    # This call's signature downloads only: a request the stalled test's abandoned thread
    # sends again after its proxy closed may reach this proxy when it reuses that port.
    asked = [r.target for r, _ in proxy.seen
             if r.target.split("?")[0].endswith(".sig") and "busy" in r.target]
    assert len(asked) == resilient.ATTEMPTS  # the signature's download (GCS also asks for the
    # bucket's metadata after a failed download: its client's own, not a retry)
    assert [m.kind for m in reader.misses] == ["error"]  # a server error, named for the record


def test_a_listing_cut_short_is_an_error_never_zero_entries(world, backend):
    """verify and ls of a prefix whose listing fails half way: one clear line and exit 2, not
    a clean count of 0."""
    with faultproxy.Proxy(backend.upstream) as clean_proxy:
        assert bucket_faults._publish(world, backend, backend.env(clean_proxy),
                                      "listed").returncode == 0

    cut = faultproxy.on(lambda r: bucket_faults.is_listing(backend, r), Fault.TRUNCATE)
    with faultproxy.Proxy(backend.upstream, cut) as proxy:
        env = backend.env(proxy)
        for argv in (["verify", backend.url("listed"), "--trusted-key", world.pub],
                     ["ls", backend.url("listed")]):
            proc = jaxcache(*argv, env=env)
            assert proc.returncode == 2, (argv, proc.returncode, proc.stdout, proc.stderr)
            assert "Traceback" not in proc.stderr
            lines = proc.stderr.strip().splitlines()
            assert len(lines) == 1 and "list" in lines[0], proc.stderr
        assert Fault.TRUNCATE in proxy.faults()
    with faultproxy.Proxy(backend.upstream) as clean_proxy:  # the same prefix, listed whole
        proc = jaxcache("ls", backend.url("listed"), "--format", "json",
                        env=backend.env(clean_proxy))
        assert proc.returncode == 0, proc.stderr
        assert len(json.loads(proc.stdout)["entries"]) == len(world.entries)


def test_a_real_job_through_failing_requests_computes_the_same(world, backend,
                                                               unsealed_results):
    _first_store_only(backend)
    golden = unsealed_results
    tally = faults.Tally(f"{backend.name}: a job reads through faults", "http")
    with faultproxy.Proxy(backend.upstream) as clean_proxy:
        assert bucket_faults._publish(world, backend, backend.env(clean_proxy),
                                      "job").returncode == 0
    bucket_faults.job_reads(world, backend, "job", SEED, golden, tally)
    _clean(tally)


def test_a_write_that_landed_before_its_answer_was_lost_counts_as_done(world, backend):
    """The entry's upload (the second: the signature goes first) is applied by the server
    and its answer lost (a reset after it): the retry finds the object there and reads it
    back; holding exactly these bytes, it was ours, so the write counts (before: "another
    publisher got there first", and the record said the entry was not written)."""
    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.seal.stores.bucket_backend import BucketSealedCache
    from jaxcache.trust.inputs import signing_keys as keys
    from jaxcache.trust.inputs.public_keys import load_public
    from jaxcache.trust.rules import target

    uploads: list[int] = []

    def plan(r: faultproxy.Request) -> Fault:
        if r.method in ("PUT", "POST"):
            uploads.append(r.index)
            if len(uploads) == 2:
                return Fault.RESET_AFTER
        return Fault.PASS

    key, data = world.entries[0]
    signer = keys.load_signing(str(world.key))
    with faultproxy.Proxy(backend.upstream, plan) as proxy, \
            bucket_faults.environment(backend.env(proxy)):
        cache = BucketSealedCache(objects.open_store(target.parse_bucket(
            backend.url("landed"))), trusted=[signer.public], signer=signer)
        cache.put(key, data)
        assert [(w.key, w.directory) for w in cache.writes] == \
            [(key, backend.url("landed"))]
        cache.close()
        assert len(uploads) >= 3 and Fault.RESET_AFTER in proxy.faults()  # it was retried
        reader = BucketSealedCache(objects.open_store(target.parse_bucket(
            backend.url("landed"))), trusted=[load_public(world.pub)])
        assert reader.get(key) == data
        reader.close()


def test_a_dead_bucket_costs_a_publisher_one_failure_not_one_per_compile(world, backend):
    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.seal.stores.bucket_backend import BucketSealedCache
    from jaxcache.trust.inputs import signing_keys as keys
    from jaxcache.trust.rules import target

    signer = keys.load_signing(str(world.key))
    with faultproxy.Proxy(backend.upstream, faultproxy.always(Fault.RESET)) as proxy, \
            bucket_faults.environment(backend.env(proxy)):
        cache = BucketSealedCache(objects.open_store(target.parse_bucket(
            backend.url("dead"))), trusted=[signer.public], signer=signer)
        (k1, d1), (k2, d2) = world.entries[:2]
        with pytest.raises(OSError):
            cache.put(k1, d1)
        asked = len(proxy.seen)
        with pytest.raises(OSError, match="skipped"):
            cache.put(k2, d2)
        assert len(proxy.seen) == asked  # skipped: not a request more
        cache.close()


def test_an_entry_landing_after_gc_took_its_signature_is_not_left_unsigned(world, backend):
    """publish.py's finding in a bucket (test_corpus.py has the directory's): a publisher put
    its signature; a rival completed the entry on it and gc deleted both, entry first; only
    then did our entry land, alone: every reader rejected it, every publisher took it for
    published. The schedule is replayed through the real store: just before our entry's
    upload, the signature is deleted as gc deletes it."""
    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.seal.objects.object_store import OBJECT_NAME_MAX
    from jaxcache.seal.publishing import tier_names as names
    from jaxcache.seal.stores.bucket_backend import BucketSealedCache
    from jaxcache.trust.inputs import signing_keys as keys
    from jaxcache.trust.rules import target

    key, data = world.entries[0]
    name = names.entry(key)
    signame = names.sidecar(name, names.SIGNATURE, OBJECT_NAME_MAX)
    signer = keys.load_signing(str(world.key))
    with faultproxy.Proxy(backend.upstream) as proxy, \
            bucket_faults.environment(backend.env(proxy)):
        store = objects.open_store(target.parse_bucket(backend.url("evicted-between")))
        real_put = store.put_if_absent
        replayed = []

        def put_if_absent(object_name: str, payload: bytes) -> bool:
            if object_name == name and not replayed:  # gc, between our two uploads
                replayed.append(object_name)
                info = store.stat(signame)
                assert info is not None and store.delete_if(signame, info.generation)
            return real_put(object_name, payload)

        store.put_if_absent = put_if_absent  # type: ignore[method-assign]
        publisher = BucketSealedCache(store, trusted=[signer.public], signer=signer)
        publisher.put(key, data)
        publisher.close()
        assert replayed
        left = bucket_faults.Backend.names(backend, "evicted-between")
        assert name not in left, left  # no entry without its signature
        again = BucketSealedCache(objects.open_store(target.parse_bucket(
            backend.url("evicted-between"))), trusted=[signer.public], signer=signer)
        again.put(key, data)  # the next publisher completes it
        assert again.get(key) == data
        again.close()


# --- answers that never end: read no further than asked ------------------------------------
ANSWER_MAX = 16 << 20  # what any answer but a ranged download may hold (docs/how-to/buckets.md)

@pytest.mark.parametrize("fault", [Fault.ENDLESS, Fault.ENDLESS_LENGTH])
def test_a_download_reads_no_further_than_it_asked_whatever_the_server_sends(backend, fault):
    """The server ignores the Range and sends a body that never ends (in chunks, or under a
    length of a terabyte): the download stops at what it asked for and closes the connection.
    Before, the Cloud Storage client read all of it into memory (here the proxy's 128 MiB)."""
    import os

    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.trust.rules import target

    data = os.urandom(4096)
    backend.upload("endless/obj", data)
    plan = faultproxy.on(lambda r: bucket_faults.is_download(r, "endless/obj"), fault)
    with faultproxy.Proxy(backend.upstream, plan) as proxy, \
            bucket_faults.environment(backend.env(proxy, deadline_s=300)):
        store = objects.open_store(target.parse_bucket(backend.url("endless")))
        assert store.get("obj", limit=1000) == data[:1000]
    bucket_faults.read_within(proxy, 1000)


def test_a_whole_download_reads_no_further_than_the_objects_size(backend):
    """A download of a whole object (`seal` reads an unsigned entry so) asks for what its
    stat said, plus a byte: more than that is an error (not bytes to sign), and the socket
    is read no further. Before, both clients read the whole answer (128 MiB here)."""
    import os

    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.seal.objects.object_store import StoreError
    from jaxcache.trust.rules import target

    data = os.urandom(4096)
    backend.upload("endless-whole/obj", data)
    plan = faultproxy.on(lambda r: bucket_faults.is_download(r, "endless-whole/obj"),
                         Fault.ENDLESS)
    with faultproxy.Proxy(backend.upstream, plan) as proxy, \
            bucket_faults.environment(backend.env(proxy, deadline_s=300)):
        store = objects.open_store(target.parse_bucket(backend.url("endless-whole")))
        with pytest.raises(StoreError, match="longer than the 4096 bytes") as raised:
            store.get("obj")
        assert raised.value.kind == "error"
        bucket_faults.read_within(proxy, len(data) + 1)


def _nothing_loaded(world, backend, prefix: str, key: str, plan: faultproxy.Plan):
    """A sealed reader of `prefix` asks for `key` once, through a proxy with `plan`, and
    gets nothing: the reader (its rejections and misses) and the proxy."""
    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.seal.stores.bucket_backend import BucketSealedCache
    from jaxcache.trust.inputs.public_keys import load_public
    from jaxcache.trust.rules import target

    with faultproxy.Proxy(backend.upstream, plan) as proxy, \
            bucket_faults.environment(backend.env(proxy, deadline_s=300)):
        reader = BucketSealedCache(objects.open_store(target.parse_bucket(
            backend.url(prefix))), trusted=[load_public(world.pub)])
        assert reader.get(key) is None
        reader.close()
    return reader, proxy


def test_an_entry_served_past_its_signed_size_is_one_rejection_and_a_bounded_read(world,
                                                                                   backend):
    """A 2 KB signature vouches for the entry's size; the server sends the entry and then
    no end: the reader reads one byte past the signed size, rejects the entry as longer than
    signed (one line), and JAX gets nothing."""
    with faultproxy.Proxy(backend.upstream) as clean_proxy:
        assert bucket_faults._publish(world, backend, backend.env(clean_proxy),
                                      "past").returncode == 0
    key, data = world.entries[0]
    reader, proxy = _nothing_loaded(world, backend, "past", key, faultproxy.on(
        lambda r: bucket_faults.is_download(r, f"{key}-cache"), Fault.ENDLESS))
    (r,) = reader.rejections
    assert (r.key, r.status) == (key, "bad-signature") and reader.misses == []
    assert f"longer than the {len(data)} bytes signed" in r.reason, r.reason
    bucket_faults.read_within(proxy, len(data) + 1)


def test_an_error_answer_without_end_is_one_miss_and_a_bounded_read(world, backend):
    """A 503 whose text never ends: read to a bound (16 MiB), then one miss that says so;
    not asked again (the answer is the server's fault, not the network's). Before, both
    clients read the whole text, three times over."""
    key = world.entries[0][0]
    reader, proxy = _nothing_loaded(world, backend, "busy-forever", key, faultproxy.on(
        lambda r: bucket_faults.is_download(r, f"{key}-cache.sig"), Fault.ENDLESS_ERROR))
    (m,) = reader.misses
    assert m.kind == "error" and "ran past" in m.reason and "\n" not in m.reason, m
    bucket_faults.read_within(proxy, ANSWER_MAX)


def test_a_listing_without_end_is_one_line_and_a_bounded_read(backend):
    """A listing page that never ends: an error with one clear line (exit 2), never a
    listing read into memory until it runs out."""
    backend.upload("listed-forever/x", b"x")
    plan = faultproxy.on(lambda r: bucket_faults.is_listing(backend, r), Fault.ENDLESS)
    with faultproxy.Proxy(backend.upstream, plan) as proxy:
        proc = jaxcache("ls", backend.url("listed-forever"),
                        env=backend.env(proxy, deadline_s=300))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "ran past" in line, line
    bucket_faults.read_within(proxy, ANSWER_MAX)
