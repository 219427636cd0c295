"""A job whose child outlives it: `python outliving.py MODE GO RESULT`.

The main process compiles `f` (so a run writes its entry), then starts a child in a session of
its own, with stdout and stderr to RESULT.log, and exits at once. The child waits for the file
GO (the test makes it after `jaxcache run` has ended), then uses JAX's cache and writes RESULT
(JSON: the cache directory JAX holds and the cache hits it saw). MODE says when the child
imports jax and how it was started:
- later: a child with the probe that imports jax only after the run ended
- early: a child that imported jax while the run was on, and compiles after it ended
- isolated: a `python -I` child (no probe: site is not run), started while the run was on
- none: no child at all
"""

import json
import os
import subprocess
import sys
import time


def child(mode, go, result):
    if mode == "early":
        import jax  # noqa: F401 - while the run is on

        open(result + ".imported", "w").close()
    while not os.path.exists(go):
        time.sleep(0.05)
    import jax
    import jax.numpy as jnp
    from jax import monitoring

    hits = []
    monitoring.register_event_listener(
        lambda event, **kw: hits.append(event) if event.endswith("cache_hits") else None)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    float(jax.jit(lambda x: jnp.sin(x) * 3.0 + x)(jnp.arange(8.0)).sum())
    with open(result, "w") as f:
        json.dump({"dir": jax.config.jax_compilation_cache_dir, "hits": len(hits)}, f)


def main(mode, go, result):
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    float(jax.jit(lambda x: jnp.sin(x) * 3.0 + x)(jnp.arange(8.0)).sum())
    if mode == "none":  # no child: the job alone
        return
    argv = [sys.executable, *(["-I"] if mode == "isolated" else []), os.path.abspath(__file__),
            "child", mode, go, result]
    with open(result + ".log", "wb") as log:
        subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                         start_new_session=True)
    deadline = time.monotonic() + 120
    while mode == "early" and not os.path.exists(result + ".imported") and \
            time.monotonic() < deadline:  # the child has imported jax before the run ends
        time.sleep(0.02)


if __name__ == "__main__":
    if sys.argv[1] == "child":
        child(*sys.argv[2:5])
    else:
        main(*sys.argv[1:4])
