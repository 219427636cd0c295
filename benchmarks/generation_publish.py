"""A cold publish of a warmed cache to a bucket a round trip away: requests and wall time of a
generation against JAX's own cache writing the same entries and against the entry-by-entry
sealed publisher; and a republish of the unchanged cache.

The store is fake-gcs-server (or, with `--store s3`, SeaweedFS) on loopback, started here and
stopped by PID, behind the loopback proxy of the fault tests (tests/support/faultproxy.py)
holding every request for a set round trip and counting requests. The warmed cache is a
private directory of `--entries` entries (log-spaced from 1 KB to 1 MB, random bytes, JAX's
key shape). Arms, each to a fresh prefix of one bucket, in this process:
  a  JAX's own cache: the object its factory makes for the URL (get_file_cache: LRUCache
     through etils.epath and gcsfs/s3fs), `put` of each entry in turn, as JAX writes them
  b  jaxcache's entry-by-entry sealed publisher (BucketSealedCache.put with the signing key:
     a signature object and an entry per entry, each create-only, after a stat)
  c  a generation (seal/generations/publishing.py: one listing, the objects the store lacks
     in parallel, the manifest, its signature, the pointer)
  c2 c again into the same prefix, the cache unchanged: a republish
Round by round the arms go in a rotating order (interleaved, so that drift hits them alike).
Reported: requests (median over rounds) and wall time, each arm's median and c/a, c/b as
paired ratios (Hodges-Lehmann with the exact Wilcoxon interval, bench/estimates.py).

    .venv/bin/pip install -c constraints.txt -e '.[bench-gcs]'    # or '.[bench-s3]'
    .venv/bin/python benchmarks/generation_publish.py [--store gs|s3] [--entries 2000]
                                                      [--rounds 3] [--delay-ms 20] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from bucket_load import client_env, needs_store, start_store  # noqa: E402
from support import faultproxy  # noqa: E402

BUCKET = "jaxgens"
ARMS = ("a", "b", "c")
NAMES = {"a": "JAX's own cache", "b": "sealed, entry by entry", "c": "a generation",
         "c2": "a republish"}


def sizes(n: int) -> list[int]:
    lo, hi = 1_000, 1_000_000
    return [int(lo * (hi / lo) ** (i / max(1, n - 1))) for i in range(n)]


def warmed(folder: Path, n: int) -> dict[str, bytes]:
    """The warmed cache: `n` entries of JAX's file shape, written into `folder` (0700)."""
    import hashlib

    folder.mkdir(mode=0o700)
    out = {}
    for i, size in enumerate(sizes(n)):
        data = os.urandom(size)
        key = f"jit_m{i}-{hashlib.sha256(data).hexdigest()}"
        (folder / f"{key}-cache").write_bytes(data)
        out[key] = data
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", choices=("gs", "s3"), default="gs")
    ap.add_argument("--entries", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--delay-ms", type=float, default=20.0)
    ap.add_argument("--json", help="write the samples and estimates here")
    args = ap.parse_args()
    needs_store("generation_publish", args.store)
    work = Path(tempfile.mkdtemp(prefix="jaxcache-generation-publish-"))
    os.chmod(work, 0o700)
    srv = start_store(args.store, work, (BUCKET,))
    try:
        with faultproxy.Proxy(("127.0.0.1", srv.port)) as proxy:
            os.environ.update(client_env(args.store, srv, proxy.url))
            result = measure(args, work, proxy)
    finally:
        srv.stop()
    report(args, result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


def measure(args: argparse.Namespace, work: Path, proxy: faultproxy.Proxy) -> dict:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from jaxcache import fingerprint
    from jaxcache.jaxcompat.internals import compilation_cache_module
    from jaxcache.seal.generations.publishing import publish
    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.seal.stores.bucket_backend import BucketSealedCache
    from jaxcache.trust.inputs import signing_keys
    from jaxcache.trust.rules.target import parse_bucket

    entries = warmed(work / "warm", args.entries)
    total = sum(len(v) for v in entries.values())
    key = signing_keys.generate()
    here = fingerprint.current()
    cc = compilation_cache_module()
    print(f"{len(entries)} entries, {total / 1e6:.0f} MB; a round trip of {args.delay_ms:g} ms "
          "per request", flush=True)

    def arm(name: str, prefix: str) -> None:
        url = f"{args.store}://{BUCKET}/{prefix}"
        if name == "a":
            cache, _ = cc.get_file_cache(url)
            for k, v in entries.items():
                cache.put(k, v)
        elif name == "b":
            backend = BucketSealedCache(objects.open_store(parse_bucket(url)),
                                        trusted=[key.public], signer=key,
                                        host=lambda: here)
            try:
                for k, v in entries.items():
                    backend.put(k, v)
            finally:
                backend.close()
        else:
            done = publish(str(work / "warm"), objects.open_store(parse_bucket(url)), key,
                           publisher="bench", build=here.id)
            assert done.ok and done.entries == len(entries), done

    samples: dict[str, list[float]] = {a: [] for a in (*ARMS, "c2")}
    requests: dict[str, list[int]] = {a: [] for a in (*ARMS, "c2")}
    for r in range(args.rounds):
        order = ARMS[r % 3:] + ARMS[:r % 3]
        for name in order:
            runs = [name, "c2"] if name == "c" else [name]
            for which in runs:
                proxy.delay_s = args.delay_ms / 1000
                before = len(proxy.seen)
                started = time.perf_counter()
                arm(which if which != "c2" else "c", f"r{r}-{name}")
                samples[which].append(time.perf_counter() - started)
                proxy.answered()
                requests[which].append(len(proxy.seen) - before)
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(
            f"{a} {samples[a][-1]:.1f} s ({requests[a][-1]} requests)"
            for a in (*ARMS, "c2")), flush=True)
    return {"store": args.store, "entries": len(entries), "bytes": total,
            "delay_ms": args.delay_ms, "rounds": args.rounds, "samples_s": samples,
            "requests": requests,
            "command": "benchmarks/generation_publish.py " + " ".join(sys.argv[1:])}


def report(args: argparse.Namespace, result: dict) -> None:
    import jax

    from jaxcache.bench.estimates import paired_ratio

    s, q = result["samples_s"], result["requests"]
    print(f"\njax {jax.__version__}, {os.cpu_count()} cpus, {result['rounds']} interleaved "
          f"rounds; {'fake-gcs-server' if args.store == 'gs' else 'SeaweedFS'} on loopback "
          f"behind a proxy adding {args.delay_ms:g} ms per request; {result['entries']} "
          f"entries, {result['bytes'] / 1e6:.0f} MB")
    for a in (*ARMS, "c2"):
        print(f"  {a:>2} {NAMES[a]:<24} {statistics.median(s[a]):8.2f} s  "
              f"{statistics.median(q[a]):7.0f} requests")
    est = {}
    for other in ("a", "b"):
        ratio = paired_ratio(s[other], s["c"])
        est[f"c_over_{other}"] = [ratio.estimate, ratio.low, ratio.high]
        print(f"  c/{other}: {ratio.estimate:.3f} [{ratio.low:.3f}, {ratio.high:.3f}]")
    print(f"  requests of a publish: {statistics.median(q['c']):.0f} for {result['entries']} "
          f"new objects (a constant of {statistics.median(q['c']) - result['entries']:.0f}); "
          f"a republish: {statistics.median(q['c2']):.0f}")
    result["estimates"] = est


if __name__ == "__main__":
    main()
