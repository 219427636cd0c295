"""`jaxcache.enable()`: audit first, then switch JAX's cache on, catching the lifecycle traps.

JAX reads JAX_COMPILATION_CACHE_DIR once, at import; creates its cache object once, at the first
compile that uses it; and remembers whether that first compile used a cache. Each of those makes a
late or repeated setting silently do nothing. enable() checks them all before it changes anything.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jaxcache import jaxcompat, undo
from jaxcache.display import safe
from jaxcache.errors import JaxcacheError, UntrustedCacheError
from jaxcache.trust.audit import AuditReport

if TYPE_CHECKING:  # the key classes import cryptography: only a sealed enable() needs it
    from jaxcache.seal.keys import PublicKey, SigningKey

__all__ = ["CacheLifecycleError", "CacheLifecycleWarning", "EnableResult", "Trap",
           "UntrustedCacheError", "disable", "enable", "enabled", "lifecycle_traps"]


class CacheLifecycleError(JaxcacheError):
    """Enabling now would be silently ignored by JAX (or is impossible as configured)."""

    exit_code = 1


class CacheLifecycleWarning(UserWarning):
    """Enabling works, but not for everything (e.g. programs compiled before)."""


@dataclass(frozen=True)
class Trap:
    code: str
    message: str
    remedy: str
    fatal: bool


@dataclass(frozen=True)
class EnableResult:
    path: str
    report: AuditReport
    traps: tuple[Trap, ...]
    reset: bool  # JAX's cache was reset to make the new directory take effect
    backend: object | None = None  # the SealedCache JAX now calls, when sealed


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


def enable(path: str, *, policy: str | None = None, allow_untrusted: bool = False,
           reset: bool = False, sealed: bool = False,
           signing_key: str | SigningKey | None = None,
           trusted_keys: str | PublicKey | Sequence[str | PublicKey] = (),
           local: str | None = None) -> EnableResult:
    """Audit `path`, then make it JAX's compilation cache for this process.

    Raises UntrustedCacheError unless the verdict is PRIVATE or SHARED-BY-POLICY (or SEALED);
    `allow_untrusted=True` is the loud expert opt-out. Raises CacheLifecycleError when the
    setting would be ignored; `reset=True` uses JAX's reset_cache() where that fixes it.
    A missing directory is created private and judged under `policy`.

    Children: JAX_COMPILATION_CACHE_DIR is set to the audited directory, so processes this
    one starts use it too (sealed: removed, so they never read the shared one unsigned);
    XLA_FLAGS naming XLA caches elsewhere is refused. From then on JAX opens its cache only in
    the audited directory, or in one the job points it at that passes the same audit now;
    any other gets a cache that never hits and never writes (jaxcompat.guard_cache_dirs).

    sealed=True: JAX loads from `path` only entries signed by a trusted key (the policy's
    trusted_keys for this path, plus `trusted_keys`: ed25519:... strings, .pub files or
    PublicKey objects). `signing_key` (a key file from `jaxcache keygen`) signs what this
    process writes; without it nothing is written to `path`. `local`: a private directory
    read first and written instead of `path` (tiers). See docs/sealed-cache.md.
    """
    if sealed:
        from jaxcache import sealing

        return sealing.enable_sealed(path, policy=policy, reset=reset,
                                     signing_key=signing_key, trusted_keys=trusted_keys,
                                     local=local)
    if signing_key is not None or trusted_keys or local is not None:
        raise JaxcacheError("signing_key, trusted_keys and local need sealed=True")
    from jaxcache.trust import create

    with create.taken_back_on_error() as made:  # all-or-nothing: the directory too
        return _enable(path, policy, allow_untrusted, reset, made)


def _enable(path: str, policy: str | None, allow_untrusted: bool, reset: bool,
            made_dirs: list) -> EnableResult:
    from jaxcache import inherit
    from jaxcache.trust import create, target
    from jaxcache.trust import policy as policymod
    from jaxcache.trust.audit import audit
    from jaxcache.trust.principals import Accounts

    tgt = target.resolve(path)
    if tgt.path is None:
        raise JaxcacheError(f"jaxcache.enable takes a local directory, not {safe(path)}")
    if tgt.tilde:
        raise CacheLifecycleError(
            f"{safe(path)!r} starts with '~', which JAX does not expand (it would use a "
            "directory literally named '~' under the current directory); pass "
            "os.path.expanduser(path)")
    accounts = Accounts()
    pol = policymod.load(policy, accounts)
    report = audit(tgt.path, policy=pol, scan_processes=False, accounts=accounts)
    chosen = report.resolved or tgt.path
    conflicts = inherit.conflicts(os.environ, chosen)
    if conflicts:
        raise CacheLifecycleError(conflicts[0])
    traps = lifecycle_traps(chosen)  # before anything is created or changed
    fatal = [t for t in traps if t.fatal]
    fixable = {"other-dir-in-use", "first-compile-disabled"}
    if fatal and (not reset or any(t.code not in fixable for t in fatal)):
        trap = next(t for t in fatal if not reset or t.code not in fixable)
        raise CacheLifecycleError(f"{trap.message}. What to do: {trap.remedy}")
    refuse_hidden_settings()
    if not report.exists and report.missing:
        # creating it ourselves (mkdir 0700, then verify, under the caller's policy) removes
        # the pre-creation risk
        made = create.init(tgt.path, policy=pol)
        made_dirs.append(made)
        if not made.ok and not allow_untrusted:
            raise UntrustedCacheError(made.report)
        report = made.report if made.ok else report
    if not report.verdict.ok:
        if not allow_untrusted:
            raise UntrustedCacheError(report)
        message = (f"jaxcache: ENABLING AN UNTRUSTED CACHE {safe(tgt.path)} (verdict "
                   f"{report.verdict.value}, writers: "
                   f"{', '.join(sorted(report.writer_names('untrusted')))}): they can make "
                   "this process run code of their choosing")
        print(message, file=sys.stderr)
        warnings.warn(message, CacheLifecycleWarning, stacklevel=2)
    did_reset = bool(fatal)
    with undo.all_or_nothing():
        if fatal:
            jaxcompat.reset_cache()
            traps = [t for t in traps if not t.fatal]
        jaxcompat.set_cache_dir(chosen)
        # from here on JAX opens its own cache only in `chosen`, or in a directory that
        # passes the same audit when the job points JAX there itself
        jaxcompat.guard_cache_dirs([chosen], how="enable", auditor=_auditor(pol, accounts))
        before = inherit.point_children_at(chosen)
        check_jax_uses(chosen)
    if before is not None and before != chosen:
        traps = [*traps, Trap(
            "env-replaced", f"{inherit.VARIABLE} was {safe(before)}; the processes this one "
            f"starts now inherit {safe(chosen)}, the directory jaxcache audited",
            "nothing to do; set it before the job starts to choose the cache", False)]
    for trap in traps:
        warnings.warn(f"{trap.message}. What to do: {trap.remedy}", CacheLifecycleWarning,
                      stacklevel=2)
    return EnableResult(chosen, report, tuple(traps), did_reset)


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


def disable() -> bool:
    """Undo every jaxcache.enable() of this process still in effect: JAX's cache settings,
    its cache object, jaxcache's directory guard and JAX_COMPILATION_CACHE_DIR are as they
    were before the first one. Programs already compiled stay compiled. False if there was
    nothing to undo."""
    return undo.disable()


@contextlib.contextmanager
def enabled(path: str, *, policy: str | None = None, allow_untrusted: bool = False,
            reset: bool = False, sealed: bool = False,
            signing_key: str | SigningKey | None = None,
            trusted_keys: str | PublicKey | Sequence[str | PublicKey] = (),
            local: str | None = None) -> Iterator[EnableResult]:
    """`with jaxcache.enabled(path, ...) as result:` enable() for the block only; on exit
    everything is as it was before (also when the block raises)."""
    mark = undo.depth()
    result = enable(path, policy=policy, allow_untrusted=allow_untrusted, reset=reset,
                    sealed=sealed, signing_key=signing_key, trusted_keys=trusted_keys,
                    local=local)
    try:
        yield result
    finally:
        undo.disable(mark)


def _auditor(pol, accounts):
    """The guard's judge for a directory the job points JAX at after enable(): the same audit
    as enable()'s, on the spot; anything not PRIVATE or SHARED-BY-POLICY is refused, loudly."""
    from jaxcache.trust import target
    from jaxcache.trust.audit import audit

    def judge(where: str) -> tuple[bool, str]:
        tgt = target.resolve(where)
        if tgt.path is None or tgt.tilde:
            ok, why = False, "not a local directory path jaxcache can audit"
        else:
            report = audit(tgt.path, policy=pol, scan_processes=False, accounts=accounts)
            resolved = report.resolved or tgt.path
            if not report.exists:
                ok, why = False, ("it does not exist, and JAX would create it unaudited "
                                  "(jaxcache.enable() creates it private)")
            elif not report.verdict.ok:
                writers = ", ".join(sorted(report.writer_names("untrusted"))) or "unknown"
                ok, why = False, f"verdict {report.verdict.value} (writers: {writers})"
            elif os.path.normpath(resolved) != os.path.normpath(tgt.path):
                ok, why = False, f"it leads elsewhere ({safe(resolved)}) through a symlink"
            else:
                ok, why = True, f"verdict {report.verdict.value}"
        if not ok:
            message = (f"jaxcache: JAX was pointed at {safe(where)}, which jaxcache refuses: "
                       f"{why}. Nothing is loaded from or written there in this process")
            print(message, file=sys.stderr)
            warnings.warn(message, CacheLifecycleWarning, stacklevel=2)
        return ok, why

    return judge
