"""Every touch of JAX internals, in one place, version-gated.

jaxcache reads JAX's private lifecycle state (jax._src.compilation_cache) to detect the traps
that make a cache setting silently ineffective. Those names are not API: they were verified on
the versions in TESTED, and `tests/test_jaxcompat.py` fails loudly when the pinned JAX moves.
On a JAX outside the supported minor lines, features that need internals fail closed. What JAX
logs and emits per version (which the probe reads) is in versions.py.

One module a concern, all imported here (none imports JAX until called), so callers keep
writing `jaxcompat.<name>`: internals.py (the gate and JAX's lifecycle state), guard.py (which
directories JAX may open a cache in), backend.py (the sealed backend JAX holds), snapshot.py
(what enable() changed, put back).
"""

from __future__ import annotations

from jaxcache.jaxcompat.backend import (
    XLA_SUBCACHE_FLAGS,
    disable_xla_subcaches,
    held_backend,
    install_backend,
    max_size,
    uses_backend,
)
from jaxcache.jaxcompat.guard import (
    _GUARD,
    current_cache,
    gate_gets,
    guard_cache_dirs,
    guard_log,
    uses_sealed,
    witness_puts,
)
from jaxcache.jaxcompat.internals import (
    _STATE,
    DEFAULT_MIN_COMPILE_TIME_SECS,
    DEFAULT_MIN_ENTRY_SIZE_BYTES,
    CacheState,
    JaxInternalsChanged,
    cache_state,
    check_contents,
    check_supported,
    config_value,
    disable_cache,
    effective,
    hidden_settings,
    holds,
    installed_version,
    reset_cache,
    set_cache_dir,
)
from jaxcache.jaxcompat.snapshot import JaxState, restore, snapshot
from jaxcache.jaxcompat.versions import (
    NEWEST_LINE,
    OLDEST_LINE,
    TESTED,
    support,
    why_unverified,
)

__all__ = [
    "DEFAULT_MIN_COMPILE_TIME_SECS", "DEFAULT_MIN_ENTRY_SIZE_BYTES", "NEWEST_LINE", "OLDEST_LINE",
    "TESTED", "XLA_SUBCACHE_FLAGS", "_GUARD", "_STATE", "CacheState", "JaxInternalsChanged",
    "JaxState", "RefusedCache", "cache_state", "check_contents", "check_supported",
    "config_value", "current_cache", "disable_cache", "disable_xla_subcaches", "effective",
    "gate_gets",
    "guard_cache_dirs", "guard_log", "held_backend", "hidden_settings", "holds", "install_backend",
    "installed_version", "max_size", "reset_cache", "restore", "set_cache_dir", "snapshot",
    "support", "uses_backend", "uses_sealed", "why_unverified", "witness_puts",
]


def __getattr__(name: str):
    """RefusedCache is a subclass of JAX's CacheInterface, made when first asked for (after
    JAX is imported), as guard.py makes it."""
    if name == "RefusedCache":
        from jaxcache.jaxcompat import guard

        return guard._refused_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
