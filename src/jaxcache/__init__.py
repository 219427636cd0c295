"""jaxcache: use JAX's persistent compilation cache safely, and know what it buys you.

The audit side imports no JAX, and `import jaxcache` sits on every job's start-up path under
`jaxcache run`: the public names below are imported on first use (`__getattr__`), while type
checkers and `dir()` see them all (the TYPE_CHECKING block, `__all__`, `__dir__`).
"""

from __future__ import annotations

from jaxcache._package import __version__

# Not `from typing import TYPE_CHECKING`: importing typing costs ~5 ms (more on a busy
# machine) on every job's start-up; type checkers treat this name as true all the same.
TYPE_CHECKING = False

# public name -> the module that defines it
_LAZY = {
    "audit": "jaxcache.api",
    "enable": "jaxcache.lifecycle.enabling",
    "enabled": "jaxcache.lifecycle.enabling",
    "disable": "jaxcache.lifecycle.enabling",
    "EnableResult": "jaxcache.lifecycle.traps",
    "Trap": "jaxcache.lifecycle.traps",
    "CacheLifecycleError": "jaxcache.lifecycle.traps",
    "CacheLifecycleWarning": "jaxcache.lifecycle.traps",
    "JaxcacheError": "jaxcache.errors",
    "PolicyError": "jaxcache.errors",
    "UntrustedCacheError": "jaxcache.errors",
    "AuditReport": "jaxcache.trust.judgement.audit",
    "Finding": "jaxcache.trust.findings",
    "Verdict": "jaxcache.trust.findings",
    "Writer": "jaxcache.trust.findings",
    "PublicKey": "jaxcache.trust.inputs.public_keys",
    "SigningKey": "jaxcache.trust.inputs.signing_keys",
}

__all__ = [  # spelled out: type checkers and linters read it without running this module
    "AuditReport", "CacheLifecycleError", "CacheLifecycleWarning", "EnableResult", "Finding",
    "JaxcacheError", "PolicyError", "PublicKey", "SigningKey", "Trap", "UntrustedCacheError",
    "Verdict", "Writer", "__version__", "audit", "disable", "enable", "enabled",
]

if TYPE_CHECKING:
    from typing import Any

    from jaxcache.api import audit
    from jaxcache.errors import JaxcacheError, PolicyError, UntrustedCacheError
    from jaxcache.lifecycle.enabling import disable, enable, enabled
    from jaxcache.lifecycle.traps import (
        CacheLifecycleError,
        CacheLifecycleWarning,
        EnableResult,
        Trap,
    )
    from jaxcache.trust.findings import Finding, Verdict, Writer
    from jaxcache.trust.inputs.public_keys import PublicKey
    from jaxcache.trust.inputs.signing_keys import SigningKey
    from jaxcache.trust.judgement.audit import AuditReport


if not TYPE_CHECKING:  # hidden from type checkers, so a misspelt name is an error there

    def __getattr__(name: str) -> Any:
        """Import a public name on first use and keep it, so later lookups cost nothing.
        (`from jaxcache import jobenv`, a submodule not yet imported, asks here first: refused
        before importlib is, which with warnings costs `jaxcache run` ~0.4 ms.)"""
        where = _LAZY.get(name)
        if where is None:
            raise AttributeError(f"module 'jaxcache' has no attribute {name!r}")
        import importlib

        value = getattr(importlib.import_module(where), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    """The public API (loaded or not) and the module's dunders, not its helpers."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})
