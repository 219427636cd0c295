"""A JAX job that runs one of two programs of the same shape; prints one JSON line.

    storage_job.py f|g [CACHE_DIR]
Without CACHE_DIR the cache comes from the environment (jaxcache run). XLA's sub-caches are
off so the cache key does not depend on the directory's path (FACTS.md section 5): an entry
compiled anywhere is found under the same name everywhere. If STORAGE_JOB_MARKER is set, the
file it names is created first, to prove the job started.
"""

import json
import os
import sys

if os.environ.get("STORAGE_JOB_MARKER"):
    with open(os.environ["STORAGE_JOB_MARKER"], "w") as marker:
        marker.write("started\n")

import jax
import jax.numpy as jnp

hits = []
jax.monitoring.register_event_listener(
    lambda event, **kw: hits.append(1) if event == "/jax/compilation_cache/cache_hits" else None)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_enable_xla_caches", "none")
if len(sys.argv) > 2:
    jax.config.update("jax_compilation_cache_dir", sys.argv[2])


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
fun = {"f": f, "g": g}[sys.argv[1]]
print(json.dumps({"fun": sys.argv[1], "result": float(fun(x).sum()), "hits": len(hits)}))
