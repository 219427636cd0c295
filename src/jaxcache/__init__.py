"""jaxcache: use JAX's persistent compilation cache safely, and know what it buys you.

The audit side imports no JAX; anything that needs JAX imports it lazily.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "audit", "enable", "enabled", "disable", "UntrustedCacheError",
           "CacheLifecycleError"]


def __getattr__(name: str):
    """Lazy re-exports, so `import jaxcache` stays light and JAX-free."""
    if name == "audit":
        from jaxcache.api import audit

        return audit
    if name in ("enable", "enabled", "disable", "UntrustedCacheError", "CacheLifecycleError"):
        from jaxcache import lifecycle as module

        return getattr(module, name)
    raise AttributeError(f"module 'jaxcache' has no attribute {name!r}")
