import sys

print("no jax here")
sys.exit(0)
