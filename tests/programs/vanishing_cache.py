"""A JAX job whose cache directory changes under it between two compiles; prints one JSON line.

    vanishing_cache.py DIR MODE     MODE: remove | rename | readonly (a read-only bind mount
                                    over DIR: needs a private mount namespace, as root)
The first function compiles (and is written to DIR), then DIR is removed, renamed aside or
made read-only, then the second compiles: a job under `jaxcache run` must compute the same
numbers and end as it would without a cache. Deterministic: the job itself changes DIR.
"""

import json
import os
import shutil
import subprocess
import sys

import jax
import jax.numpy as jnp

where, mode = sys.argv[1], sys.argv[2]
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


@jax.jit
def f(x):
    return jnp.tanh(x @ x.T) * 3


@jax.jit
def g(x):
    return jnp.cos(x @ x.T) + 2


x = jnp.arange(16.0).reshape(4, 4) / 16
first = float(f(x).sum())
if mode == "remove":
    shutil.rmtree(where)
elif mode == "rename":
    os.rename(where, where + ".moved")
else:
    subprocess.run(["mount", "--bind", where, where], check=True)
    subprocess.run(["mount", "-o", "remount,ro,bind", where], check=True)
second = float(g(x).sum())
print(json.dumps({"results": {"f": first, "g": second}}))
