"""Writes to both streams, uses JAX a little, and exits with a non-zero code."""

import sys

print("to stdout: line 1")
print("to stderr: warning", file=sys.stderr)
if "--jax" in sys.argv:
    import jax.numpy as jnp

    print(f"sum {float(jnp.arange(4.0).sum())}")
sys.stdout.write("no newline at the end")
sys.exit(3)
