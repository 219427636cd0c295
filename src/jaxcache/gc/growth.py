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


def jax_limit(env: Mapping[str, str]) -> int | None:
    """JAX's own size limit from the environment, in bytes; None when unset or no limit."""
    try:
        limit = int(env.get(JAX_LIMIT, "-1"))
    except ValueError:
        return None
    return limit if limit >= 0 else None


def unlimited(total_bytes: int, entries: int, env: Mapping[str, str],
              path: str = "PATH") -> str | None:
    """The line, or None when the cache is small or something limits it."""
    if total_bytes < GROWN_BYTES or jax_limit(env) is not None:
        return None
    return (f"the cache holds {size(total_bytes)} in {plural(entries, 'entry', 'entries')} "
            f"and nothing limits its size (JAX's max_size is unset): bound it with "
            f"`jaxcache gc {path} --max-size 10G`, or `jaxcache run --max-size 10G` after "
            "every job (docs/gc.md)")
