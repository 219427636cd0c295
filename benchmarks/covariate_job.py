"""A job like issue 26's: one module worth caching, and many that compile in every run.

The big module (an unrolled chain of matmuls) compiles for about 1.5-2.5 s on a 2-core machine
and is written to the persistent cache; the `--small` functions each compile well below JAX's
1 s threshold, so the cache never holds them and they compile again in every process, cold and
warm alike. Their compile time is the same work in both arms of a bench: the covariate
`jaxcache bench` adjusts by (docs/reference/bench.md, "Covariate adjustment").

    jaxcache bench -t 4 -k 1 -- python benchmarks/covariate_job.py [--big 120] [--small 50]
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp


def big(steps: int):  # type: ignore[no-untyped-def]
    def chain(x):  # type: ignore[no-untyped-def]
        for i in range(steps):
            x = jnp.sin(x @ x.T * (i + 1)) + jnp.tanh(x) * i
        return x

    return jax.jit(chain)


def small(i: int, ops: int):  # type: ignore[no-untyped-def]
    def f(x):  # type: ignore[no-untyped-def]
        for j in range(ops):
            x = jnp.tanh(x * (i + 1)) + jnp.cos(x) * j
        return x

    f.__name__ = f"small_{i}"
    return jax.jit(f)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--big", type=int, default=120, help="steps of the cached module")
    ap.add_argument("--small", type=int, default=50, help="uncached modules")
    ap.add_argument("--ops", type=int, default=60, help="operations per uncached module")
    args = ap.parse_args()
    total = float(big(args.big)(jnp.ones((64, 64)) / 64).sum())
    x = jnp.linspace(0.0, 1.0, 256)
    for i in range(args.small):
        total += float(small(i, args.ops)(x).sum())
    print(f"total {total:.6f} from 1 big and {args.small} small functions")


if __name__ == "__main__":
    main()
