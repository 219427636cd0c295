"""Compiles in the parent, forks a child that exits normally without touching JAX (XLA is not
fork-safe), and spawns a Python subprocess that compiles on its own."""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp

print("parent", float(jax.jit(lambda x: x * 2)(jnp.ones(3)).sum()), flush=True)
pid = os.fork()
if pid == 0:
    print("child", sum(range(4)), flush=True)
    sys.exit(0)  # runs atexit handlers in the child, the probe's included
os.waitpid(pid, 0)
subprocess.run([sys.executable, "-c",
                "import jax.numpy as j; print('spawned', float(j.ones(2).sum()))"], check=True)
