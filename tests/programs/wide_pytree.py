"""A job whose jitted function takes a dict of 240 arrays (a model's parameters, flattened).

Every command that prints per-module input shapes meets 240 of them here: the text output of
bench, explain and the run summary must still fit in short lines.
"""

import jax
import jax.numpy as jnp

jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)

params = {f"layer_{i:03d}/{'kernel' if i % 2 else 'bias'}": jnp.ones((8, 4 + i % 5))
          for i in range(240)}


@jax.jit
def total(tree):
    return sum(jnp.sum(v * v) for v in tree.values())


print(float(total(params)))
