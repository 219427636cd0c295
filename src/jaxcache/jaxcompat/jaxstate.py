"""What enable() changes in JAX (its cache options and cache object) and in the guard,
captured and put back: enable() is all-or-nothing, and disable() undoes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxcache.jaxcompat.backend import close_backend
from jaxcache.jaxcompat.guard import ADMITTED, BACKENDS, GUARD, REFUSED
from jaxcache.jaxcompat.internals import compilation_cache_module, option_state

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from jaxcache.jaxcompat.guard import GuardSettings, SealedBackend

_OPTIONS = ("jax_compilation_cache_dir", "jax_persistent_cache_enable_xla_caches",
            "jax_persistent_cache_min_entry_size_bytes",
            "jax_persistent_cache_min_compile_time_secs")


@dataclass(frozen=True, slots=True)
class JaxState:
    """JAX's cache settings (global values) and cache object, and jaxcache's guard, at
    one moment: what enable() may change and disable() puts back."""

    options: tuple[tuple[str, object], ...]
    cache: object
    initialized: bool
    checked: bool
    used: bool
    backends: tuple[tuple[str, SealedBackend], ...]
    guard: GuardSettings
    admitted: tuple[tuple[str, str], ...]
    refused: tuple[tuple[str, str], ...]


def snapshot() -> JaxState:
    cc = compilation_cache_module()
    options = tuple((n, option_state(n).get_global()) for n in _OPTIONS)
    return JaxState(options, cc._cache, bool(cc._cache_initialized), bool(cc._cache_checked),
                    bool(cc._cache_used), tuple(BACKENDS.items()), GUARD.saved(),
                    tuple(ADMITTED.items()), tuple(REFUSED.items()))


def restore(state: JaxState) -> None:
    """Put JAX and the guard back as `state` found them; a sealed backend installed since
    is let go. The guard first: restoring the directory setting runs its hook."""
    import jax

    cc: Any = compilation_cache_module()  # jax._src.compilation_cache: its state is set back
    kept = {id(b) for _, b in state.backends}
    for backend in BACKENDS.values():
        if id(backend) not in kept:
            close_backend(backend)
    BACKENDS.clear()
    BACKENDS.update(state.backends)
    GUARD.restore(state.guard)
    ADMITTED.clear()
    ADMITTED.update(state.admitted)
    REFUSED.clear()
    REFUSED.update(state.refused)
    for name, value in state.options:
        jax.config.update(name, value)  # type: ignore[no-untyped-call]  # untyped in JAX
    with cc._cache_initialized_mutex:
        cc._cache = state.cache
        cc._cache_initialized = state.initialized
        cc._cache_checked = state.checked
        cc._cache_used = state.used
