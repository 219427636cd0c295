"""A rank of a jax.distributed job under srun, coordinator auto-detected from Slurm's
variables; prints "ready RANK JOBID" and stays up until the file argv[1] exists."""

import os
import sys
import time

import jax

jax.distributed.initialize(initialization_timeout=60)
print(f"ready {jax.process_index()} {os.environ['SLURM_JOB_ID']}", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.1)
jax.distributed.shutdown()
