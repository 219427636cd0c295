"""Prints, as one JSON line, the cache options JAX holds once imported, then compiles once.

    cache_options.py
What the job itself sees in jax.config, to hold against what its run record says JAX used.
"""

import json

import jax
import jax.numpy as jnp

OPTIONS = ("jax_compilation_cache_dir", "jax_enable_compilation_cache",
           "jax_persistent_cache_enable_xla_caches", "jax_persistent_cache_min_compile_time_secs",
           "jax_persistent_cache_min_entry_size_bytes", "jax_compilation_cache_max_size")
print(json.dumps({name: getattr(jax.config, name) for name in OPTIONS}), flush=True)
jax.block_until_ready(jax.jit(lambda x: x * 2 + 1)(jnp.ones(8)))
