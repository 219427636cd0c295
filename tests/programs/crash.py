"""Compiles something, then dies by a signal."""

import os
import signal

import jax.numpy as jnp

print(float(jnp.ones(3).sum()), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
