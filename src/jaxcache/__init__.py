"""jaxcache: use JAX's persistent compilation cache safely, and know what it buys you.

The audit side imports no JAX; anything that needs JAX imports it lazily.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "audit"]


def audit(path, **kwargs):  # noqa: ANN001, ANN003, ANN201 - thin re-export, typed in api
    """Audit a cache directory; see :func:`jaxcache.api.audit`."""
    from jaxcache.api import audit as _audit

    return _audit(path, **kwargs)
