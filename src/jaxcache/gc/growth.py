"""The one line that says a cache has grown with nothing to limit it.

JAX keeps every entry unless `jax_compilation_cache_max_size` is set (its default, -1, is no
limit), and evicts only within one process's writes even then; so a cache grows for months
unseen. audit and run say so once it holds GROWN_BYTES or more and neither JAX's limit nor a
jaxcache gc limit is set: what it holds, and the two ways to bound it.
"""

from __future__ import annotations

from collections.abc import Mapping

from jaxcache.text import plural, size

GROWN_BYTES = 1_000_000_000  # 1 GB: below this, no line (most caches never get there)
JAX_LIMIT = "JAX_COMPILATION_CACHE_MAX_SIZE"
OPTION = "jax_compilation_cache_max_size"


def jax_limit(env: Mapping[str, str], job_options: object = None) -> int | None:
    """JAX's own size limit in bytes (None: no limit): as the job's JAX held it at its first
    compile (`job_options`, the run record's cache_options_at_first_compile: a job may set
    it in code), else as the environment sets it."""
    held = job_options.get(OPTION) if isinstance(job_options, dict) else None
    if isinstance(held, int) and not isinstance(held, bool):
        return held if held >= 0 else None
    try:
        limit = int(env.get(JAX_LIMIT, "-1"))
    except ValueError:
        return None
    return limit if limit >= 0 else None


def unlimited(total_bytes: int, entries: int, jax_max_size: int | None,
              path: str = "PATH") -> str | None:
    """The line, or None when the cache is small or JAX's `jax_max_size` limits it."""
    if total_bytes < GROWN_BYTES or jax_max_size is not None:
        return None
    return (f"the cache holds {size(total_bytes)} in {plural(entries, 'entry', 'entries')} "
            f"and nothing limits its size (JAX's max_size is unset): bound it with "
            f"`jaxcache gc {path} --max-size 10G`, or `jaxcache run --max-size 10G` after "
            "every job (docs/reference/gc.md)")
