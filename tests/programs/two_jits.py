"""Two jitted functions with distinct results on the same input; prints one JSON line.

    two_jits.py [--enable DIR] [--marker FILE]
Uses the cache JAX_COMPILATION_CACHE_DIR names (as `jaxcache run` sets it), or
jaxcache.enable(DIR). A swapped entry shows in the numbers: g computing f's result.
--marker: written once JAX is imported (the gate of `jaxcache run` holds the job before that).
"""

import argparse
import json

import jax
import jax.numpy as jnp

ap = argparse.ArgumentParser()
ap.add_argument("--enable")
ap.add_argument("--marker")
args = ap.parse_args()
if args.marker:
    with open(args.marker, "w") as f:
        f.write("ran\n")
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
if args.enable:
    import jaxcache

    try:
        jaxcache.enable(args.enable)
    except jaxcache.UntrustedCacheError as exc:
        print(json.dumps({"refused": str(exc)}))
        raise SystemExit(1) from None
hits = []
jax.monitoring.register_event_listener(
    lambda event, **kw: hits.append(1) if event == "/jax/compilation_cache/cache_hits" else None)


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
print(json.dumps({"results": {"f": float(f(x).sum()), "g": float(g(x).sum())},
                  "hits": len(hits)}))
