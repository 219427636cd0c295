"""Every touch of JAX internals, in one place, version-gated.

jaxcache reads JAX's private lifecycle state (jax._src.compilation_cache) to detect the traps that
make a cache setting silently ineffective. Those names are not API: they were verified on the
versions in TESTED, and `tests/jaxcompat/test_jaxcompat.py` fails loudly when the pinned JAX moves.
On a JAX outside the supported minor lines, features that need internals fail closed. What JAX logs
and emits per version (which the probe reads) is in versions.py.

One module a concern, each imported when one of its names is first used (none imports JAX
until called), so callers keep writing `jaxcompat.<name>`: internals.py (the gate and JAX's
lifecycle state), guard.py (which directories JAX may open a cache in), backend.py (the sealed
backend JAX holds), jaxstate.py (what enable() changed, put back), settings.py (options put in
force after `import jax`: the directory a run grants). A module's name is never
one of the names: importing the module would rebind the package's attribute to it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself costs `jaxcache run` ~2 ms: names for the type checker only
if TYPE_CHECKING:
    from typing import Any

if TYPE_CHECKING:  # the names, for the type checker; at run time each is imported when first
    # asked for (PEP 562), so `jaxcompat.versions` alone costs `jaxcache run` no more than itself
    from jaxcache.jaxcompat.backend import (
        disable_xla_subcaches,
        held_backend,
        install_backend,
        max_size,
        uses_backend,
    )
    from jaxcache.jaxcompat.guard import (
        GUARD,
        current_cache,
        gate_gets,
        guard_cache_dirs,
        guard_log,
        lease,
        uses_sealed,
        witness_puts,
    )
    from jaxcache.jaxcompat.internals import (
        DEFAULT_MIN_COMPILE_TIME_SECS,
        DEFAULT_MIN_ENTRY_SIZE_BYTES,
        STATE,
        JaxInternalsChanged,
        cache_state,
        check_supported,
        config_value,
        disable_cache,
        effective,
        hidden_settings,
        holds,
        installed_version,
        reset_cache,
        set_cache_dir,
        set_thresholds,
        thresholds,
    )
    from jaxcache.jaxcompat.jaxstate import JaxState, restore, snapshot
    from jaxcache.jaxcompat.settings import put_in_force
    from jaxcache.jaxcompat.versions import TESTED

_HOME = {  # name -> the module of this package that holds it
    "disable_xla_subcaches": "backend", "held_backend": "backend", "install_backend": "backend",
    "max_size": "backend", "uses_backend": "backend",
    "GUARD": "guard", "current_cache": "guard", "gate_gets": "guard", "guard_cache_dirs": "guard",
    "guard_log": "guard", "lease": "guard", "uses_sealed": "guard", "witness_puts": "guard",
    "STATE": "internals", "DEFAULT_MIN_COMPILE_TIME_SECS": "internals",
    "DEFAULT_MIN_ENTRY_SIZE_BYTES": "internals", "JaxInternalsChanged": "internals",
    "cache_state": "internals", "check_supported": "internals", "config_value": "internals",
    "disable_cache": "internals",
    "effective": "internals", "hidden_settings": "internals", "holds": "internals",
    "installed_version": "internals", "reset_cache": "internals", "set_cache_dir": "internals",
    "set_thresholds": "internals", "thresholds": "internals",
    "JaxState": "jaxstate", "restore": "jaxstate", "snapshot": "jaxstate",
    "put_in_force": "settings",
    "TESTED": "versions",
}

__all__ = [
    "DEFAULT_MIN_COMPILE_TIME_SECS", "DEFAULT_MIN_ENTRY_SIZE_BYTES", "TESTED", "GUARD", "STATE",
    "JaxInternalsChanged", "JaxState", "RefusedCache", "cache_state", "check_supported",
    "config_value", "current_cache", "disable_cache", "disable_xla_subcaches", "effective",
    "gate_gets", "guard_cache_dirs", "guard_log", "held_backend", "hidden_settings", "holds",
    "install_backend", "installed_version", "lease", "max_size", "put_in_force", "reset_cache",
    "restore", "set_cache_dir", "set_thresholds", "snapshot", "thresholds", "uses_backend",
    "uses_sealed", "witness_puts",
]


def __getattr__(name: str) -> Any:
    """Each name from its module, imported when first asked for. RefusedCache is a subclass of
    JAX's CacheInterface, made when first asked for (after JAX is imported), as guard.py makes
    it."""
    if name == "RefusedCache":
        from jaxcache.jaxcompat import guard

        return guard.refused_class()
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib  # here: with warnings it costs `jaxcache run` ~0.5 ms, which needs none

    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
