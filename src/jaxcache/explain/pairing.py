"""Which earlier module a later one is compared with: the one matching rule of the
cross-process explanation (reasons.py) and the per-rank one (rank_misses.py).

Modules are matched by name and input shapes, but one name and one set of input shapes can
stand for several modules (`jax.random.normal` for two weight shapes: two `jit__normal` taking
one key, with different outputs, hence different cache keys). So among the modules of one
(name, input shapes), those with equal cache keys pair first (the same key is the same module:
a hit or a repeat); only what remains pairs in order. A module whose counterpart was never
cached (skipped below a threshold, say) is not a miss: there was nothing to hit.
"""

from __future__ import annotations

from jaxcache.records.run_document import ModuleOutcome

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import TypeVar

    from jaxcache.records.run_document import ModuleEntry

    T = TypeVar("T")


def pair(earlier: Sequence[T], later: Sequence[T], module: Callable[[T], ModuleEntry]
         ) -> list[tuple[T | None, T]]:
    """Each later item (of one name and input shapes) with its earlier counterpart: the one
    with its cache key where there is one, else the first earlier key no later item has, in
    order; None where none is left. Of earlier items with one key (the same module in several
    records), the first that cached it stands for them (else the first). `module` reads an
    item's module."""
    by_key: dict[str, T] = {}
    for item in earlier:
        key = module(item).cache_key
        if key is not None and (key not in by_key or (not cached(module(by_key[key]))
                                                      and cached(module(item)))):
            by_key[key] = item
    later_keys = {module(item).cache_key for item in later}
    rest = iter([item for item in earlier if (key := module(item).cache_key) is None
                 or (key not in later_keys and by_key[key] is item)])
    out: list[tuple[T | None, T]] = []
    for item in later:
        key = module(item).cache_key
        same = by_key.get(key) if key is not None else None
        out.append((same, item) if same is not None else (next(rest, None), item))
    return out


def cached(m: ModuleEntry) -> bool:
    """Whether the module's entry is in the cache after its run (written, or there and hit)."""
    return m.outcome in (ModuleOutcome.WRITTEN, ModuleOutcome.HIT)


def missed(earlier: ModuleEntry, later: ModuleEntry) -> bool:
    """Whether the later module did not hit what its counterpart cached (which of its key's
    components changed is the caller's to find; none where the key is the same)."""
    return cached(earlier) and not later.hit
