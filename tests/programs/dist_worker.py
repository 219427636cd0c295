"""One process of a 2-process jax.distributed job on CPU: on localhost with the coordinator
port and process id as arguments, or under srun with neither (JAX reads Slurm's variables)."""

import sys

import jax
import jax.numpy as jnp

if len(sys.argv) > 2:
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{sys.argv[1]}", num_processes=2,
                               process_id=int(sys.argv[2]), initialization_timeout=60)
else:
    jax.distributed.initialize(initialization_timeout=60)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
f = jax.jit(lambda x: jnp.tanh(x) * 3)
print(jax.process_index(), float(f(jnp.ones(4)).sum()), flush=True)
jax.distributed.shutdown()
