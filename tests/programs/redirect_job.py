"""A job for the enable / redirect attack tests; prints one JSON line.

    redirect_job.py [--enable DIR] [--redirect DIR] [--both] [--child] [--child-env DIR]
                    [--chdir DIR]

Computes f (and with --both also g: same shapes, a different program, so an entry of one
planted under the other's key shows in the numbers). --enable calls jaxcache.enable(DIR),
--redirect then points JAX at another directory itself, --child starts this program again
(no options) in a subprocess and reports what it computed; --child-env DIR starts it with
JAX_COMPILATION_CACHE_DIR=DIR in its environment (a launcher choosing its workers' cache).
--chdir DIR: after a first compile (JAX's cache object exists), change the working directory.
"""

import argparse
import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp

ap = argparse.ArgumentParser()
ap.add_argument("--enable")
ap.add_argument("--redirect")
ap.add_argument("--both", action="store_true")
ap.add_argument("--child", action="store_true")
ap.add_argument("--child-env")
ap.add_argument("--chdir")
args = ap.parse_args()

hits = []
jax.monitoring.register_event_listener(
    lambda event, **kw: hits.append(1) if event == "/jax/compilation_cache/cache_hits" else None)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
if args.enable:
    import jaxcache

    jaxcache.enable(args.enable)
if args.redirect:
    jax.config.update("jax_compilation_cache_dir", args.redirect)


@jax.jit
def f(x):
    for i in range(6):
        x = jnp.tanh(x @ x.T) + i
    return x


@jax.jit
def g(x):
    for i in range(6):
        x = jnp.cos(x @ x.T) * (i + 2)
    return x


x = jnp.arange(16.0).reshape(4, 4) / 16
if args.chdir:
    jax.jit(lambda y: jnp.sin(y) * 3)(x).block_until_ready()  # JAX's cache object is made
    os.chdir(args.chdir)
out = {"f": float(f(x).sum())}
if args.both:
    out["g"] = float(g(x).sum())
if args.child or args.child_env:
    env = dict(os.environ)
    if args.child_env:
        env["JAX_COMPILATION_CACHE_DIR"] = args.child_env
    child = subprocess.run([sys.executable, os.path.abspath(__file__)], capture_output=True,
                           text=True, check=True, env=env)
    out["child"] = json.loads(child.stdout.strip().splitlines()[-1])
out.update(hits=len(hits), dir=jax.config.jax_compilation_cache_dir,
           env=os.environ.get("JAX_COMPILATION_CACHE_DIR"))
print(json.dumps(out))
