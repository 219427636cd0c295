"""enable() is all-or-nothing, and disable() puts back what enable() changed.

What enable() changes: JAX's cache settings (directory, XLA sub-caches), its cache object
and first-compile decision, jaxcache's directory guard and sealed backend, and the
JAX_COMPILATION_CACHE_DIR its children inherit. Each enable() captures them first; when it
raises they are restored, and when it succeeds the capture is kept for disable(). One
exception, on purpose: a failed *sealed* enable never leaves JAX reading the sealed
directory unsigned, even if it did so before the call; the cache is then off.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

from jaxcache import jaxcompat
from jaxcache.lifecycle.inherit import VARIABLE

_STACK: list[Saved] = []  # one per enable() in effect, oldest first


@dataclass(frozen=True, slots=True)
class Saved:
    jax: jaxcompat.JaxState
    env: str | None  # JAX_COMPILATION_CACHE_DIR before


def capture() -> Saved:
    return Saved(jaxcompat.snapshot(), os.environ.get(VARIABLE))


def rollback(saved: Saved, *, sealed_dir: str | None = None) -> None:
    if saved.env is None:
        os.environ.pop(VARIABLE, None)
    else:
        os.environ[VARIABLE] = saved.env
    try:
        jaxcompat.restore(saved.jax)
    except Exception:
        jaxcompat.disable_cache()  # cannot put it back: no cache rather than a guess
        raise
    if sealed_dir is not None and _opens(sealed_dir):
        jaxcompat.disable_cache()


def _opens(directory: str) -> bool:
    """Would JAX now read `directory` with its own (unsigned) cache?"""
    configured = jaxcompat.config_value("jax_compilation_cache_dir")
    if not configured:
        return False
    same = os.path.realpath(str(configured)) == os.path.realpath(directory)
    return same and not jaxcompat.uses_sealed(directory)


@contextlib.contextmanager
def all_or_nothing(*, sealed_dir: str | None = None) -> Iterator[None]:
    """Run enable()'s changes: on any exception, undo them all; on success, remember how
    to (disable())."""
    saved = capture()
    try:
        yield
    except BaseException:
        rollback(saved, sealed_dir=sealed_dir)
        raise
    _STACK.append(saved)


def depth() -> int:
    return len(_STACK)


def disable(to_depth: int = 0) -> bool:
    """Undo the enable() calls made since `to_depth` were in effect (0: all of them);
    False when there was none."""
    if len(_STACK) <= to_depth:
        return False
    saved = _STACK[to_depth]
    del _STACK[to_depth:]
    rollback(saved)
    return True
