"""A job for the JAX version matrix: one bigger jit, a cheap named one, a lambda and one with a
host callback (jax.debug.print: never written up to JAX 0.10, cached from 0.11).

    versions_job.py [--steps N] [--jax-log FILE]
Leaves the cache to what JAX_COMPILATION_CACHE_DIR and JAX_PERSISTENT_CACHE_* say (as under
`jaxcache run`); prints one checksum line. --jax-log: JAX's own cache debug log, written by
a handler set up before `import jax` (what the record is compared with).
"""

import argparse
import logging

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=25)
ap.add_argument("--jax-log")
args = ap.parse_args()
if args.jax_log:
    handler = logging.FileHandler(args.jax_log)
    handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
    for name in ("jax._src.compiler", "jax._src.compilation_cache"):
        logging.getLogger(name).setLevel(logging.DEBUG)
        logging.getLogger(name).addHandler(handler)

import jax  # noqa: E402 - after the log handler, so JAX's debug lines reach it
import jax.numpy as jnp  # noqa: E402


def train_step(x):
    for i in range(args.steps):
        x = jnp.tanh(x @ x.T * (1.0 + i * 1e-3)) + jnp.sin(x)
    return x


def normalize(x):
    return x / (jnp.abs(x).max() + 1.0)


def report(x):
    jax.debug.print("report {s:.6f}", s=x.sum())
    return x


x = jnp.ones((32, 32), jnp.float32)
x = jax.jit(normalize)(jax.jit(train_step)(x))
x = jax.jit(lambda y: y * 2.0)(x)
x = jax.jit(report)(x)
print(f"checksum {float(x.sum()):.6f}")
