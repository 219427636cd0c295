"""The timing loop the load benchmarks share: warm loads of one entry, arm by arm.

Each round every arm is switched in and serves one load of the same program (JAX's lookup,
the read, decompression, deserialization), timed from outside and checked to be a cache hit;
the arms' order alternates round by round so machine drift hits them alike, and round 0 is
discarded (it warms the OS file cache, connections, the emulator).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable


def program(mb: float):
    """The program whose one entry the benchmarks load: a jitted x + const whose constant,
    folded into the executable, makes the entry about `mb` MB. Returns (jitted f, its input)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    n = max(1, int(mb * (1 << 20) / 4))
    const = np.random.default_rng(int(mb * 10)).standard_normal(n).astype(np.float32)

    def fun(x, const=const):
        return x + jnp.asarray(const)

    return jax.jit(fun), jnp.zeros(n, jnp.float32)


def timed_loads(arms: dict[str, Callable[[], object]], f, x, hits: list, rounds: int,
                mb: float) -> dict[str, list[float]]:
    """Seconds per warm load, per arm; `hits` grows by one per cache hit (a JAX event
    listener appends to it); exits naming the arm when a load was not a hit."""
    import jax

    samples: dict[str, list[float]] = {name: [] for name in arms}
    order = list(arms)
    for i in range(rounds + 1):
        for name in (order if i % 2 else order[::-1]):
            arms[name]()
            jax.clear_caches()
            lowered = f.lower(x)
            before = len(hits)
            start = time.perf_counter()
            lowered.compile()
            took = time.perf_counter() - start
            if len(hits) != before + 1:
                sys.exit(f"{name} load of the {mb} MB entry was not a cache hit")
            if i:
                samples[name].append(took)
    return samples
