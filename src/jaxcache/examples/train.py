"""A small training-like JAX job for demos, tests and benchmarks.

One expensive jitted `train_step` (an unrolled loop: about 2 s of XLA compile on a 2-core CPU,
above JAX's 1 s write threshold) and one cheap `normalize` helper (well below it).
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


def make_train_step(steps: int) -> Callable[[jax.Array], jax.Array]:
    def train_step(x: jax.Array) -> jax.Array:
        for i in range(steps):
            x = jnp.tanh(x @ x.T * (1.0 + i * 1e-3)) + jnp.sin(x)
        return x

    return train_step


def normalize(x: jax.Array) -> jax.Array:
    return x / (jnp.abs(x).max() + 1.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=130, help="unrolled steps (compile cost)")
    ap.add_argument("--size", type=int, default=64, help="matrix side")
    ap.add_argument("--iters", type=int, default=3, help="training iterations to execute")
    args = ap.parse_args()
    x = jnp.ones((args.size, args.size), jnp.float32)
    step = jax.jit(make_train_step(args.steps))
    norm = jax.jit(normalize)
    for _ in range(args.iters):
        x = norm(step(x))
    print(f"checksum {float(x.sum()):.6f}")


if __name__ == "__main__":
    main()
