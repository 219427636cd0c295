"""Train a small MLP in plain JAX: the bundled "real job" for demos, tests and benchmarks.

`train_step` runs several SGD micro-steps on a 4-layer MLP, unrolled inside one jit as
gradient-accumulation loops often are; that makes its XLA compile take a few seconds on a 2-core
CPU, above JAX's 1 s write threshold, so the persistent cache can save it on the next start.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    Params = list[tuple[jax.Array, jax.Array]]  # (weights, biases) of each layer


def init(key: jax.Array, sizes: list[int]) -> Params:
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
        key, sub = jax.random.split(key)
        params.append((jax.random.normal(sub, (fan_in, fan_out)) / jnp.sqrt(fan_in),
                       jnp.zeros(fan_out)))
    return params


def predict(params: Params, x: jax.Array) -> jax.Array:
    for w, b in params[:-1]:
        x = jax.nn.gelu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def loss(params: Params, x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.mean((predict(params, x) - y) ** 2)


def make_train_step(micro_steps: int, lr: float = 1e-2
                    ) -> Callable[[Params, jax.Array, jax.Array], tuple[Params, jax.Array]]:
    def train_step(params: Params, x: jax.Array, y: jax.Array) -> tuple[Params, jax.Array]:
        for i in range(micro_steps):  # unrolled: one fused program, a few seconds to compile
            xs = jnp.roll(x, i, axis=0)
            ys = jnp.roll(y, i, axis=0)
            value, grads = jax.value_and_grad(loss)(params, xs, ys)
            params = [(w - lr * gw, b - lr * gb)
                      for (w, b), (gw, gb) in zip(params, grads, strict=True)]
        return params, value

    return train_step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--micro-steps", type=int, default=24, help="unrolled SGD steps per call")
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=20, help="training steps to execute")
    args = ap.parse_args()
    key = jax.random.PRNGKey(0)
    params = init(key, [32, args.width, args.width, args.width, 1])
    x = jax.random.normal(key, (args.batch, 32))
    y = jnp.sin(x.sum(axis=1, keepdims=True))
    step = jax.jit(make_train_step(args.micro_steps))
    start = time.perf_counter()
    for _ in range(args.steps):
        params, value = step(params, x, y)
    value.block_until_ready()
    print(f"loss {float(value):.6f} after {args.steps} steps "
          f"({time.perf_counter() - start:.2f} s including the first compile)")


if __name__ == "__main__":
    main()
