"""A JAX job on a sealed cache; prints one JSON line: results, hits, rejections, warnings.

    sealed_job.py DIR PUBKEY [--key KEYFILE] [--local DIR] [--unsealed] [--reset-in DIR]
                             [--as-is] [--prefetch-from RECORD] [--hold DIR]
Two jitted functions with distinct results, so a swapped entry would show in the numbers.
--prefetch-from: enable(sealed=True, prefetch=the keys that run record hit); `prefetch`
then holds its counts.
--as-is: enable nothing (under `jaxcache run --sealed`, whose probe enables the cache).
--hold DIR: once the backend JAX holds has fetched ahead all it will, write DIR/fetched and
wait for DIR/go before the first compile (a test changes the bucket in between).
--reset-in: then change the working directory to DIR, reset JAX's cache object and its
in-memory caches, and compute again (`again`: results, hits of that second pass).
"""

import argparse
import json
import os
import warnings

import jax
import jax.numpy as jnp

import jaxcache

ap = argparse.ArgumentParser()
ap.add_argument("dir")
ap.add_argument("pub")
ap.add_argument("--key")
ap.add_argument("--local")
ap.add_argument("--unsealed", action="store_true")
ap.add_argument("--reset-in")
ap.add_argument("--as-is", action="store_true")
ap.add_argument("--prefetch-from")
ap.add_argument("--hold")
args = ap.parse_args()

hits = []
jax.monitoring.register_event_listener(
    lambda event, **kw: hits.append(1) if event == "/jax/compilation_cache/cache_hits" else None)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
if args.unsealed:  # enable(sealed=True) turns XLA's sub-caches off itself (tests check it)
    jax.config.update("jax_persistent_cache_enable_xla_caches", "none")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    if args.as_is:
        backend = None
    elif args.unsealed:
        jax.config.update("jax_compilation_cache_dir", args.dir)
        backend = None
    else:
        ahead = ()
        if args.prefetch_from:
            from jaxcache.records import key_uses as prefetch_keys

            ahead = prefetch_keys.from_file(args.prefetch_from).keys
        backend = jaxcache.enable(args.dir, sealed=True, trusted_keys=[args.pub],
                                  signing_key=args.key, local=args.local,
                                  prefetch=ahead).backend

    if args.hold:
        import time

        from jaxcache import jaxcompat

        held = backend if backend is not None else getattr(
            jaxcompat.held_backend(), "store", None)  # what the probe installed
        pool = getattr(held, "prefetch", None)
        assert pool is not None and pool.wait_idle(120), "no fetch ahead to wait for"
        open(os.path.join(args.hold, "fetched"), "w").close()
        deadline = time.monotonic() + 120
        while not os.path.exists(os.path.join(args.hold, "go")):
            assert time.monotonic() < deadline, "never told to go on"
            time.sleep(0.01)

    @jax.jit
    def f(x):
        for i in range(12):
            x = jnp.tanh(x @ x.T) + i
        return x

    @jax.jit
    def g(x):
        for i in range(12):
            x = jnp.cos(x @ x.T) * (i + 2)
        return x

    x = jnp.arange(16.0).reshape(4, 4) / 16
    out = {"f": float(f(x).sum()), "g": float(g(x).sum())}
    again = None
    if args.reset_in:
        from jax._src import compilation_cache

        from jaxcache import jaxcompat

        first = len(hits)
        os.chdir(args.reset_in)
        compilation_cache.reset_cache()
        jax.clear_caches()
        again = {"results": {"f": float(f(x).sum()), "g": float(g(x).sum())},
                 "hits": len(hits) - first,
                 "served_by": None if backend is None else jaxcompat.uses_backend(backend)}
if args.as_is:  # does the backend the probe installed fetch ahead in this process?
    from jaxcache import jaxcompat

    fetching = getattr(getattr(jaxcompat.held_backend(), "store", None), "prefetch", None)
else:
    fetching = getattr(backend, "prefetch", None)
print(json.dumps({
    "results": out, "hits": len(hits), "again": again, "fetching_ahead": fetching is not None,
    "rejections": [] if backend is None else [
        {"key": r.key, "status": r.status, "reason": r.reason, "owner": r.owner}
        for r in backend.rejections],
    "write_errors": [] if backend is None else backend.write_errors,
    "warnings": [str(w.message) for w in caught],
    "xla_caches": jax.config.jax_persistent_cache_enable_xla_caches,
    "prefetch": None if getattr(backend, "prefetch", None) is None else {
        "planned": backend.prefetch.counts().planned, "used": backend.prefetch.counts().used,
        "wasted": backend.prefetch.counts().wasted},
}))
