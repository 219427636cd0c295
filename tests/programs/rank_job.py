"""One rank of a jax.distributed CPU job: `rank_job.py PORT ID N` on localhost, or
`rank_job.py` under srun (JAX finds the coordinator from Slurm's variables).

--share: jax_share_binary_between_hosts on, and a computation over the global mesh, so that
rank 1 waits for rank 0's executable under its own key, which rank 0 never publishes on CPU:
the job hangs (prints "compiling RANK" before the compile, "done RANK" after)."""

import sys

import jax
import jax.numpy as jnp
import numpy as np

share = "--share" in sys.argv
args = [a for a in sys.argv[1:] if a != "--share"]
if args:
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{args[0]}",
                               num_processes=int(args[2]), process_id=int(args[1]),
                               initialization_timeout=60)
else:
    jax.distributed.initialize(initialization_timeout=60)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
if share:
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    jax.config.update("jax_share_binary_between_hosts", True)
    sharding = NamedSharding(Mesh(np.array(jax.devices()), ("x",)), PartitionSpec("x"))
    x = jax.make_array_from_process_local_data(sharding, np.ones(2, np.float32))
    print("compiling", jax.process_index(), flush=True)
    jax.jit(lambda a: a * 2, out_shardings=sharding)(x).block_until_ready()
else:
    print("compiling", jax.process_index(), flush=True)
    jax.jit(lambda a: jnp.tanh(a) * 3)(jnp.ones(4)).block_until_ready()
print("done", jax.process_index(), flush=True)
jax.distributed.shutdown()
