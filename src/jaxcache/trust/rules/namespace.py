"""`--namespace fingerprint`: one cache per fingerprint under a shared directory or bucket prefix.

JAX's key holds neither a digest of the jaxlib and plugin binaries nor, everywhere, the CPU's
features (fingerprint/model.py), so a mixed fleet sharing one cache can load entries compiled by
another build or for another CPU. With a namespace each job uses `<dir>/<id>` (or
`<scheme>://<bucket>/<prefix>/<id>`), where `<id>` is its own fingerprint's id (`jaxcache
fingerprint --short`): it reads and writes only there, never where another build wrote.

The sub-directory is an ordinary cache directory to everything else: audited (its parents too:
the audit walks them), created private by `init` when missing (trust/create.py), listed and
verified by its path. A policy's [[cache]] declaration for the shared directory or bucket
prefix covers its namespaces (`covering()`, used by policy_rules.py): whoever the policy trusts to
write the parent can replace any directory in it anyway, and the keys it trusts there are the
keys the fleet signs with. Only names that are a namespace id are covered.
"""

from __future__ import annotations

from jaxcache.errors import JaxcacheError
from jaxcache.text import quoted

NONE = "none"
FINGERPRINT = "fingerprint"
CHOICES = (NONE, FINGERPRINT)
_ID_LENGTH = 16  # fingerprint.model.SHORT
_HEX = frozenset("0123456789abcdef")


def check(value: object) -> str:
    """The namespace asked for (`jaxcache.enable(namespace=...)`); one clear line otherwise."""
    if not isinstance(value, str) or value not in CHOICES:
        raise JaxcacheError(f"namespace must be {' or '.join(map(quoted, CHOICES))}, not "
                            f"{quoted(str(value))}")
    return value


def is_id(name: str) -> bool:
    """16 lowercase hex digits: a fingerprint's id (no regex: `jaxcache run` imports this)."""
    return len(name) == _ID_LENGTH and _HEX.issuperset(name)


def join(where: str, ident: str) -> str:
    """The namespace `ident` inside the directory or bucket URL `where`, spelled as `where` is
    (relative stays relative: the caller resolves it as it resolves `where`)."""
    if not where:
        raise JaxcacheError("the cache path is empty")
    if not is_id(ident):  # never a path of someone's making: 16 hex digits or nothing
        raise JaxcacheError(f"no fingerprint id to name the namespace with (got "
                            f"{quoted(ident)}): see `jaxcache fingerprint`")
    return where.rstrip("/") + "/" + ident


def covering(text: str) -> str | None:
    """The directory or bucket URL whose declaration also covers `text` (a local path as the
    audit's walk reached it, or a bucket URL in its one spelling), when `text` names a
    namespace in it; None otherwise."""
    head, sep, tail = text.rpartition("/")
    if not sep or not is_id(tail) or head.endswith(":/"):
        return None
    return head or "/"


__all__ = ["CHOICES", "FINGERPRINT", "NONE", "check", "covering", "is_id", "join"]
