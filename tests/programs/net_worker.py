"""A member of a 2-process jax.distributed job (coordinator from JAX_COORDINATOR_ADDRESS) that
stays up until its stdin closes, so its sockets can be inspected; or, with 'profiler PORT', a
process that starts jax.profiler's server and waits the same way."""

import sys

import jax
import jax.numpy as jnp

if sys.argv[1] == "profiler":
    jax.profiler.start_server(int(sys.argv[2]))
else:
    jax.distributed.initialize(num_processes=2, process_id=int(sys.argv[1]),
                               initialization_timeout=60)
float(jax.jit(lambda x: x * 2)(jnp.ones(2)).sum())
print("ready", flush=True)
sys.stdin.read()
if sys.argv[1] != "profiler":
    jax.distributed.shutdown()
