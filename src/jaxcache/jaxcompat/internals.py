"""The version gate and JAX's private cache lifecycle state (jax._src.compilation_cache,
jax._src.config): what the traps, the guard and the sealed backend read and reset.

Those names are not API: they were verified on the versions in versions.TESTED, and
tests/jaxcompat/test_jaxcompat.py fails loudly when the pinned JAX moves. Outside the supported
minor lines every reader fails closed (JaxInternalsChanged). JAX is imported only when called.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from jaxcache.jaxcompat.versions import why_unverified

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Protocol

    class _Option(Protocol):
        """One of jax._src.config's option states (config_states[name])."""

        @property
        def value(self) -> object: ...  # in this thread (a config context first)

        def get_global(self) -> object: ...

STATE = ("_cache", "_cache_checked", "_cache_used", "_cache_initialized", "reset_cache",
          "get_file_cache", "_initialize_cache")


DEFAULT_MIN_COMPILE_TIME_SECS = 1.0
DEFAULT_MIN_ENTRY_SIZE_BYTES = 0


class JaxInternalsChanged(RuntimeError):
    """The installed JAX does not have the internals this version of jaxcache relies on."""


def installed_version(dist: str = "jax") -> str | None:
    """A distribution's version without importing it (the audit must not import JAX)."""
    import importlib.metadata

    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_supported(version: str) -> None:
    """Fail closed outside the supported minor lines (0.4.x ignores a dir set after a
    compile; a newer JAX may have moved its private cache state)."""
    why = why_unverified(version)
    if why is not None:
        raise JaxInternalsChanged(f"{why}. Refusing to guess: pin JAX to a tested version")


def compilation_cache_module() -> ModuleType:
    import jax

    check_supported(jax.__version__)
    from jax._src import compilation_cache as cc

    missing = [name for name in STATE if not hasattr(cc, name)]
    if missing:
        raise JaxInternalsChanged(
            f"jax._src.compilation_cache on JAX {jax.__version__} lacks {', '.join(missing)}; "
            "jaxcache cannot check the cache's lifecycle and fails closed")
    return cc


def cache_interface() -> type:
    """JAX's CacheInterface (jax._src.compilation_cache_interface on 0.5 to 0.12): every
    cache object jaxcache hands JAX is one, as JAX's own are."""
    from jax._src import compilation_cache_interface as ci

    base: type | None = getattr(ci, "CacheInterface", None)
    if base is None:
        raise JaxInternalsChanged("jax._src.compilation_cache_interface has no CacheInterface")
    return base


def check_contents() -> bool:
    """jax_compilation_cache_check_contents as JAX sees it now (the option is 0.9.1+)."""
    from jax._src import config as jax_config

    state = getattr(jax_config, "compilation_cache_check_contents", None)
    return bool(state is not None and state.value)


def verification_cache() -> type:
    """JAX's VerificationCache, which its get_file_cache wraps around the store when
    check_contents is set (0.9.1+)."""
    found: type | None = getattr(compilation_cache_module(), "VerificationCache", None)
    if found is None:
        raise JaxInternalsChanged("jax_compilation_cache_check_contents is set but this JAX "
                                  "has no VerificationCache: jaxcache cannot honour it")
    return found


@dataclass(frozen=True, slots=True)
class CacheState:
    """JAX's process-wide cache lifecycle, as jaxcache needs to know it."""

    compiled: bool  # a compile already asked whether to use the cache
    used: bool  # ... and the answer was yes
    initialized: bool  # the cache object was created
    path: str | None  # the directory the cache object was created with
    present: bool = False  # a cache object is there (JAX's, or one someone else put there)


def cache_state() -> CacheState:
    cc = compilation_cache_module()
    cache = cc._cache
    path = None
    if cache is not None:
        raw = getattr(cache, "_path", None)
        path = None if raw is None else str(raw)
    return CacheState(bool(cc._cache_checked), bool(cc._cache_used),
                      bool(cc._cache_initialized), path, cache is not None)


def reset_cache() -> None:
    """JAX's own reset: forget the cache object and the first-compile decision."""
    compilation_cache_module().reset_cache()


def config_value(name: str) -> object:
    """A JAX option's global value, as JAX holds it (JAX defines its options at run time)."""
    import jax

    return getattr(jax.config, name)


def set_cache_dir(path: str) -> None:
    import jax

    jax.config.update(  # type: ignore[no-untyped-call]  # untyped in JAX
        "jax_compilation_cache_dir", path)


def set_thresholds(min_compile_time: float | None, min_entry_size: int | None) -> None:
    """JAX's write thresholds for this process (public options), where given."""
    import jax

    if min_compile_time is not None:
        jax.config.update(  # type: ignore[no-untyped-call]  # untyped in JAX
            "jax_persistent_cache_min_compile_time_secs", float(min_compile_time))
    if min_entry_size is not None:
        jax.config.update(  # type: ignore[no-untyped-call]  # untyped in JAX
            "jax_persistent_cache_min_entry_size_bytes", int(min_entry_size))


def thresholds() -> tuple[float, int]:
    """JAX's write thresholds in effect: (min compile seconds, min entry bytes)."""
    seconds = config_value("jax_persistent_cache_min_compile_time_secs")
    size = config_value("jax_persistent_cache_min_entry_size_bytes")
    # JAX holds a float and an int (it checks what it is given); read any other value as text
    return (float(seconds if isinstance(seconds, int | float) else str(seconds)),
            int(size if isinstance(size, int | float) else str(size)))


def disable_cache() -> None:
    """No persistent cache for the rest of this process (fail closed)."""
    import jax

    jax.config.update(  # type: ignore[no-untyped-call]  # untyped in JAX
        "jax_compilation_cache_dir", None)
    compilation_cache_module().reset_cache()


def option_state(name: str) -> _Option:
    from jax._src import config as jax_config

    found: _Option | None = getattr(jax_config, "config_states", {}).get(name)
    if found is None or not hasattr(found, "get_global"):
        raise JaxInternalsChanged(f"jax._src.config has no state object for {name}")
    return found


def hidden_settings() -> list[str]:
    """Options whose value in this thread differs from the global one (a config context
    manager such as `with jax.config...compilation_cache_dir(...)` is active): a value
    enable() sets globally would not be the one JAX uses here."""
    out = []
    for name in ("jax_compilation_cache_dir", "jax_enable_compilation_cache"):
        state = option_state(name)
        if state.value != state.get_global():
            out.append(f"{name} is {state.value!r} in this thread (a config context), "
                       f"{state.get_global()!r} globally")
    return out


def effective(name: str) -> object:
    """The value JAX uses in this thread (a thread-local context first)."""
    return option_state(name).value


def holds(path: str) -> bool:
    """Does JAX's cache object (if any) serve `path`?"""
    cache = compilation_cache_module()._cache
    if cache is None:
        return True
    raw = getattr(cache, "_path", None)
    return raw is not None and os.path.normpath(str(raw)) == os.path.normpath(path)
