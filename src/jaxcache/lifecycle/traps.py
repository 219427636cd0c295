"""What makes a cache setting silently ineffective in this process (the lifecycle traps), and
the checks after enabling that JAX really uses it: shared by a plain and a sealed enable().

JAX reads JAX_COMPILATION_CACHE_DIR once, at import; creates its cache object once, at the first
compile that uses it; and remembers whether that first compile used a cache. Each of those makes a
late or repeated setting silently do nothing.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass

from jaxcache import jaxcompat
from jaxcache.errors import JaxcacheError
from jaxcache.text import safe
from jaxcache.trust.judgement.audit import AuditReport

__all__ = ["CacheLifecycleError", "CacheLifecycleWarning", "EnableResult", "Trap",
           "check_jax_uses", "lifecycle_traps", "refuse_hidden_settings"]


class CacheLifecycleError(JaxcacheError):
    """Enabling now would be silently ignored by JAX (or is impossible as configured)."""

    exit_code = 1


class CacheLifecycleWarning(UserWarning):
    """Enabling works, but not for everything (e.g. programs compiled before)."""


@dataclass(frozen=True, slots=True)
class Trap:
    code: str
    message: str
    remedy: str
    fatal: bool


@dataclass(frozen=True, slots=True)
class EnableResult:
    path: str
    report: AuditReport
    traps: tuple[Trap, ...]
    reset: bool  # JAX's cache was reset to make the new directory take effect
    backend: object | None = None  # the SealedCache JAX now calls, when sealed
    # JAX's write thresholds in effect once enabled: (min compile seconds, min entry bytes)
    thresholds: tuple[float, int] | None = None

    def __str__(self) -> str:
        """A few lines, not the whole audit (print(enable(...)) in a notebook)."""
        lines = [f"jaxcache.enable: {safe(self.path)} ({self.report.verdict.value}"
                 + (", sealed" if self.backend is not None else "") + ")"
                 + (", JAX's cache was reset" if self.reset else "")]
        if self.thresholds is not None:
            secs, size = self.thresholds
            lines.append(f"  JAX writes an entry only for compiles of at least {secs:g} s and "
                         f"entries of at least {size} B (min_compile_time=, min_entry_size=); "
                         "`jaxcache run` and `jaxcache explain` say whether what that leaves "
                         "out matters for your job")
        lines += [f"  {t.code}: {t.message}" for t in self.traps]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"EnableResult(path={self.path!r}, verdict={self.report.verdict.value!r}, "
                f"traps={[t.code for t in self.traps]!r}, reset={self.reset!r}, "
                f"sealed={self.backend is not None!r}, thresholds={self.thresholds!r})")


def lifecycle_traps(path: str) -> list[Trap]:
    """What would make `jax_compilation_cache_dir = path` ineffective in this process now."""
    state = jaxcompat.cache_state()
    traps: list[Trap] = []
    env = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    configured = jaxcompat.config_value("jax_compilation_cache_dir")
    if env is not None and env != configured:
        traps.append(Trap(
            "env-after-import",
            f"JAX_COMPILATION_CACHE_DIR={safe(env)} is set but JAX's setting is "
            f"{configured!r}: JAX reads the variable only once, at `import jax`, so setting it "
            "later does nothing",
            "set the variable before the process starts, or use jaxcache.enable() / "
            "jax.config.update() after import (as this call does)", False))
    if not jaxcompat.config_value("jax_enable_compilation_cache"):
        traps.append(Trap(
            "disabled", "jax_enable_compilation_cache is False: JAX will not use any cache dir",
            "remove JAX_ENABLE_COMPILATION_CACHE=false or "
            "jax.config.update('jax_enable_compilation_cache', True) first", True))
    max_size = jaxcompat.config_value("jax_compilation_cache_max_size")
    if max_size != -1 and importlib.util.find_spec("filelock") is None:
        traps.append(Trap(
            "max-size-without-filelock",
            f"jax_compilation_cache_max_size={max_size} needs the 'filelock' package, which is "
            "not installed (pip install jax does not bring it): cache writes will fail",
            "pip install filelock, or leave jax_compilation_cache_max_size at -1", True))
    if state.present and (state.path is None or
                          os.path.normpath(state.path) != os.path.normpath(path)):
        traps.append(Trap(
            "other-dir-in-use",
            f"JAX's cache object already exists for {safe(str(state.path))}: a new directory "
            "would be silently ignored for the rest of this process",
            "pass reset=True (uses JAX's reset_cache()) or enable the cache before the first "
            "compile", True))
    if state.compiled and not state.used:
        traps.append(Trap(
            "first-compile-disabled",
            "the first compile of this process ran with the cache disabled, and JAX remembers "
            "that: no later compile would use the cache",
            "pass reset=True (uses JAX's reset_cache()) or enable before the first compile",
            True))
    elif state.compiled:
        traps.append(Trap(
            "compiled-before",
            "JAX already compiled programs in this process: those will not be written to the "
            "cache (only programs compiled from now on are)",
            "call jaxcache.enable() right after `import jax`, before anything runs; or "
            "jax.clear_caches() so they compile again", False))
    return traps


def refuse_hidden_settings() -> None:
    """A config context in this thread would hide what enable() sets: refuse, unchanged."""
    hidden = jaxcompat.hidden_settings()
    if hidden:
        raise CacheLifecycleError(
            f"{hidden[0]}: JAX would not use what enable() sets. What to do: call "
            "jaxcache.enable() outside the `with` block")


def check_jax_uses(path: str) -> None:
    """After enabling: the directory JAX really uses here, and its cache object, are
    `path`; otherwise raise (the caller undoes everything)."""
    used = jaxcompat.effective("jax_compilation_cache_dir")
    if used is None or os.path.normpath(str(used)) != os.path.normpath(path):
        raise CacheLifecycleError(f"after enabling, JAX uses {safe(str(used))}, not "
                                  f"{safe(path)}; nothing was changed")
    if not jaxcompat.effective("jax_enable_compilation_cache"):
        raise CacheLifecycleError("after enabling, jax_enable_compilation_cache is False in "
                                  "this thread; nothing was changed")
    if not jaxcompat.holds(path):
        raise CacheLifecycleError(f"after enabling, JAX's cache object serves "
                                  f"{safe(str(jaxcompat.cache_state().path))}, not "
                                  f"{safe(path)}; nothing was changed")
