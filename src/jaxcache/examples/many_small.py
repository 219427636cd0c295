"""A job made of many small jitted functions, each compiling well under JAX's 1 s threshold.

The persistent cache writes none of them (at default thresholds), so it cannot shorten this
job's start-up: `jaxcache bench` must say so plainly rather than report a saving.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


def make(i: int) -> Callable[[jax.Array], jax.Array]:
    def f(x: jax.Array) -> jax.Array:
        return jnp.tanh(x * (i + 1)) + jnp.cos(x) * i

    f.__name__ = f"small_{i}"
    return jax.jit(f)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--functions", type=int, default=40)
    args = ap.parse_args()
    x = jnp.linspace(0.0, 1.0, 256)
    total = 0.0
    for i in range(args.functions):
        total += float(make(i)(x).sum())
    print(f"total {total:.6f} from {args.functions} functions")


if __name__ == "__main__":
    main()
