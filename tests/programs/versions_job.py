"""A job for the JAX version matrix: one jit worth caching, a cheap named one and a lambda.

    versions_job.py [--steps N]
Leaves the cache to what JAX_COMPILATION_CACHE_DIR and JAX_PERSISTENT_CACHE_* say (as under
`jaxcache run`); prints one checksum line.
"""

import argparse

import jax
import jax.numpy as jnp

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=25)
args = ap.parse_args()


def train_step(x):
    for i in range(args.steps):
        x = jnp.tanh(x @ x.T * (1.0 + i * 1e-3)) + jnp.sin(x)
    return x


def normalize(x):
    return x / (jnp.abs(x).max() + 1.0)


x = jnp.ones((32, 32), jnp.float32)
x = jax.jit(normalize)(jax.jit(train_step)(x))
x = jax.jit(lambda y: y * 2.0)(x)
print(f"checksum {float(x.sum()):.6f}")
