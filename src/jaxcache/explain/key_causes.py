"""What a change in each component of JAX's cache key means, in words: shared by the
cross-process explanation (reasons.py) and the per-rank one (ranks.py)."""

from __future__ import annotations

CAUSES = {
    "computation": "the program lowered to different StableHLO: changed code, input shapes or "
                   "dtypes, or a non-deterministic lowering (custom_partitioning, HLO names)",
    "jax_lib version": "a different jaxlib version",
    "backend version": "a different backend (plugin or driver) version",
    "XLA flags": "different XLA flags (XLA_FLAGS, LIBTPU_INIT_ARGS or --xla* arguments)",
    "accelerator_config": "a different device topology or CPU/accelerator configuration",
    "compression": "zstandard installed in one environment and not the other (it changes the "
                   "compression name, hence every key)",
    "custom_hook": "a custom cache-key hook returned different values",
}
