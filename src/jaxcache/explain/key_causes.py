"""What a change in each component of JAX's cache key means, in words: shared by the
cross-process explanation (reasons.py) and the per-rank one (rank_misses.py)."""

from __future__ import annotations

from jaxcache.jaxcompat import versions
from jaxcache.text import safe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.records.run_document import ProcessEntry

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


def _path_in_key(*records: ProcessEntry) -> bool | None:
    """Whether the cache path entered these records' keys (JAX <= 0.10): True if it did for
    any of them, False if for none, None when a JAX version is missing."""
    said = [versions.path_in_key(r.jax) for r in records]
    return True if True in said else None if None in said else False


def _version_change(a: ProcessEntry, b: ProcessEntry) -> str | None:
    """'jax 0.10.2 vs 0.12.0.1' when the records' JAX or jaxlib differ, else None."""
    for name, va, vb in (("jax", a.jax, b.jax), ("jaxlib", a.jaxlib, b.jaxlib)):
        if va and vb and va != vb:
            return f"{name} {safe(str(va))} vs {safe(str(vb))}"
    return None


def compile_options_cause(a: ProcessEntry, b: ProcessEntry, changed: set[str]) -> str:
    """Why the compile options of two records' keys differ (their processes: the earlier
    and the later): a JAX version change first, the cache path where it enters the key (JAX
    <= 0.10), the XLA flags, else the options."""
    pa, pb = a.cache_path, b.cache_path
    in_key = _path_in_key(a, b)
    moved = _version_change(a, b)
    if moved:
        return (f"follows from the version change ({moved}): another JAX builds other compile "
                "options")
    if pa and pb and pa != pb and in_key is not False:
        return (f"the cache directory path differs ({safe(pa)} vs {safe(pb)}): on JAX <= 0.10 "
                "it enters the compile options (the GPU autotune sub-cache path), so every key "
                "changes. Use one canonical path, never reached through a symlink, or set "
                "jax_persistent_cache_enable_xla_caches='none'"
                + ("" if in_key else " (these records do not say which JAX compiled)"))
    if "XLA flags" in changed:
        return "follows from the XLA flags change (flags are part of the compile options)"
    return ("different compile options (device assignment, replicas or partitions, "
            "a debug option)" + (" with the same cache path" if in_key is not False else
                                 "; not the cache path, which JAX >= 0.11 leaves out of "
                                 "the key"))
