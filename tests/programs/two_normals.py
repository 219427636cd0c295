"""`jax.random.normal` for two weight shapes: two modules both named `jit__normal` with the same
input shapes (one key), different outputs, so different cache keys.

Run with the threshold at 0 (JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0): the first is written;
the threshold is then raised past any compile before the second, which is skipped (below the
threshold) in every run, however fast the machine. So a warm run hits the first and skips the
second again: nothing is missed (the new-user trial's job, made deterministic).
"""

import jax

key = jax.random.key(0)
w1 = jax.random.normal(key, (64, 32))
w1.block_until_ready()
jax.config.update("jax_persistent_cache_min_compile_time_secs", 1e9)
w2 = jax.random.normal(key, (32, 8))
w2.block_until_ready()
print(float(w1.sum()) + float(w2.sum()))
