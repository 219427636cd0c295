"""A job whose every compile is quick: N small jitted functions, then one function jitted at
three input shapes (three modules with one name), then an optional sleep (a start-up that
compilation is a small share of). `python quick_compiles.py N [SLEEP_S]`."""

import sys
import time

import jax
import jax.numpy as jnp


def make(i):
    def f(x):
        return jnp.tanh(x * (i + 1)) + jnp.cos(x) * i

    f.__name__ = f"small_{i}"
    return jax.jit(f)


@jax.jit
def same_name(x):
    return jnp.sin(x) * 2.0


n = int(sys.argv[1])
x = jnp.linspace(0.0, 1.0, 64)
total = sum(float(make(i)(x).sum()) for i in range(n))
total += sum(float(same_name(jnp.ones(k)).sum()) for k in (3, 4, 5))
if len(sys.argv) > 2:
    time.sleep(float(sys.argv[2]))
print(f"total {total:.3f}")
