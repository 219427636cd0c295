"""`jaxcache.enable()`: audit first, then switch JAX's cache on, catching the lifecycle traps.

enable() checks every lifecycle trap (traps.py) before it changes anything; a sealed enable()
is sealing.py's (which imports the seal package and `cryptography` only when called), and
sealing.py depends on traps.py, not on this module: the imports point one way.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterator, Sequence

from jaxcache import jaxcompat
from jaxcache.errors import JaxcacheError, UntrustedCacheError
from jaxcache.lifecycle import sealing, undo
from jaxcache.lifecycle.traps import (
    CacheLifecycleError,
    CacheLifecycleWarning,
    EnableResult,
    Trap,
    check_jax_uses,
    lifecycle_traps,
    refuse_hidden_settings,
)
from jaxcache.text import quoted, safe
from jaxcache.trust.findings import Effect
from jaxcache.trust.kernel.principals import Trust

TYPE_CHECKING = False
if TYPE_CHECKING:  # the key classes import cryptography: only a sealed enable() needs it
    from collections.abc import Callable

    from jaxcache.trust.create import InitResult
    from jaxcache.trust.inputs.public_keys import PublicKey
    from jaxcache.trust.inputs.signing_keys import SigningKey
    from jaxcache.trust.kernel.principals import Accounts
    from jaxcache.trust.rules.policy_rules import Policy

__all__ = ["CacheLifecycleError", "CacheLifecycleWarning", "EnableResult", "Trap",
           "UntrustedCacheError", "disable", "enable", "enabled", "lifecycle_traps"]


def enable(path: str | None = None, *, policy: str | None = None, allow_untrusted: bool = False,
           reset: bool = False, sealed: bool = False,
           signing_key: str | SigningKey | None = None,
           trusted_keys: str | PublicKey | Sequence[str | PublicKey] = (),
           local: str | None = None, require_origin: bool = False,
           min_compile_time: float | None = None,
           min_entry_size: int | None = None, namespace: str = "none",
           max_size: int | str | None = None,
           max_age: float | str | None = None,
           prefetch: Sequence[str] = (), generation: str | None = None) -> EnableResult:
    """Audit `path`, then make it JAX's compilation cache for this process.

    Without `path`: $JAX_COMPILATION_CACHE_DIR, else the project file's cache_dir
    (`.jaxcache.toml` or pyproject.toml's [tool.jaxcache], found from the working directory
    up: docs/reference/project-file.md), else the directory `jaxcache init` makes; audited all the
    same.

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
    PublicKey objects). `signing_key` (a key file from `jaxcache keygen`, or a `pkcs11:` URI
    naming a key in an HSM: docs/how-to/hsm.md) signs what this process writes; without it nothing
    is written to `path`. `local`: a private directory read first and written instead of
    `path` (tiers), one folder in it per build (`local/<fingerprint id>`). See
    docs/how-to/sealed-cache.md. `prefetch`, for a reader (of a bucket or a directory): cache keys
    (those a run record shows the job hit: jaxcache.records.key_uses.from_file) fetched and
    verified now, in parallel, so that JAX finds them when it asks; each is judged as it is
    handed to JAX. `generation` (with sealed=True, no signing_key): `path` is a store of
    generations (a directory, gs:// or s3://: `jaxcache seal --generation`), and this process
    reads the generation that pointer names (e.g. "current"): its manifest's signature is
    verified now, once, and each entry by its digest (docs/how-to/generations.md).

    Origin (trust/provenance/origin.py): each entry this process writes is recorded in your origin
    ledger; entries no job jaxcache watched wrote (restored, copied, baked into an image)
    are refused under CI, or anywhere with `require_origin=True`, unless the policy names
    their source (restored_from); otherwise the report carries a warning.

    min_compile_time / min_entry_size: JAX's write thresholds for this process (JAX writes
    no entry for a compile quicker than 1 s by default). Lower one only where `jaxcache run`
    or `jaxcache explain` calls what it leaves out material, and bench it; disable() puts
    them back. The result's `thresholds` are the ones in effect. Not given: the project
    file's, for each whose JAX variable (JAX_PERSISTENT_CACHE_MIN_*) is not set.

    namespace="fingerprint": the cache is `path`/<id> (a bucket: its prefix/<id>), <id> being
    this build's and CPU's fingerprint (`jaxcache fingerprint --short`), created private when
    missing: processes of a mixed fleet share `path`, each reading only what its own build
    wrote. The result's `path` is the directory used. "none" (the default): `path` itself.

    max_size (bytes or '10G') / max_age (seconds or '30d'): when this process exits, collect
    the directory as `jaxcache gc` does (docs/reference/gc.md), for at most 10 s of deleting; a
    plain cache only. Neither given, nor `path`: the project file's [gc] max_size and
    max_age, if set and its cache_dir is the cache used.
    """
    _check_thresholds(min_compile_time, min_entry_size)
    given_path = path
    if path is None or min_compile_time is None or min_entry_size is None:
        from jaxcache.project import effective  # the project file: refused before anything

        path = effective.default_cache_dir(os.environ) if path is None else path
        filed = effective.file_thresholds(os.environ)
        min_compile_time = filed[0] if min_compile_time is None else min_compile_time
        min_entry_size = filed[1] if min_entry_size is None else min_entry_size
    path = _namespaced(path, namespace)
    from jaxcache.gc import at_exit

    gc_limits = at_exit.limits(max_size, max_age)  # bad limits: refused before anything
    if gc_limits == (None, None) and not sealed and given_path is None:
        from jaxcache.project import effective  # the project file's limit, for its own cache

        gc_limits = effective.file_gc_limits(os.environ)
    if sealed and gc_limits != (None, None):
        raise JaxcacheError("max_size and max_age collect a plain cache directory; collect a "
                            "sealed one where it is published (jaxcache gc)")
    if generation is not None and not sealed:
        raise JaxcacheError("generation= reads a signed generation: it needs sealed=True")
    if generation is not None:
        from jaxcache.seal.generations.manifest import is_pointer, not_a_pointer

        if not is_pointer(generation):
            raise JaxcacheError(f"generation={not_a_pointer(generation)}")
    if sealed:
        result = sealing.enable_sealed(path, policy=policy, reset=reset,
                                       signing_key=signing_key, trusted_keys=trusted_keys,
                                       local=local, prefetch=prefetch, generation=generation)
    else:
        if signing_key is not None or trusted_keys or local is not None or prefetch:
            raise JaxcacheError("signing_key, trusted_keys, local and prefetch need "
                                "sealed=True")
        from jaxcache.trust import create

        with create.taken_back_on_error() as made:  # all-or-nothing: the directory too
            result = _enable(path, policy, allow_untrusted, reset, made, require_origin)
    from dataclasses import replace

    jaxcompat.set_thresholds(min_compile_time, min_entry_size)  # undone by disable()
    at_exit.schedule(result.path, *gc_limits)  # collected when the process ends
    return replace(result, thresholds=jaxcompat.thresholds())


def _namespaced(path: str, namespace: str) -> str:
    from jaxcache.trust.rules import namespace as ns

    if ns.check(namespace) == ns.NONE:
        return path
    from jaxcache import fingerprint

    return ns.join(path, fingerprint.current().id)


def _check_thresholds(min_compile_time: object, min_entry_size: object) -> None:
    """Refused before anything changes: a number JAX would take wrongly or not at all."""
    if min_compile_time is not None and (
            isinstance(min_compile_time, bool) or not isinstance(min_compile_time, int | float)
            or not 0 <= min_compile_time < float("inf")):
        raise JaxcacheError(f"min_compile_time must be a number of seconds >= 0, not "
                            f"{safe(repr(min_compile_time))}")
    if min_entry_size is not None and (
            isinstance(min_entry_size, bool) or not isinstance(min_entry_size, int)
            or min_entry_size < -1):
        raise JaxcacheError(f"min_entry_size must be a whole number of bytes >= -1, not "
                            f"{safe(repr(min_entry_size))}")


def _enable(path: str, policy: str | None, allow_untrusted: bool, reset: bool,
            made_dirs: list[InitResult], require_origin: bool = False) -> EnableResult:
    from jaxcache.lifecycle import admission, inherit
    from jaxcache.trust.inputs import policy as policymod
    from jaxcache.trust.kernel.principals import Accounts
    from jaxcache.trust.rules import target

    tgt = target.resolve(path)
    if tgt.path is None:
        raise JaxcacheError(f"jaxcache.enable takes a local directory, not {safe(path)}")
    if tgt.tilde:
        raise CacheLifecycleError(
            f"{quoted(path)} starts with '~', which JAX does not expand (it would use a "
            "directory literally named '~' under the current directory); pass "
            "os.path.expanduser(path)")
    accounts = Accounts()
    pol = policymod.load(policy, accounts)
    from jaxcache import fingerprint

    # the build that will load the entries is this process's: another's are found too; a
    # missing directory is made private here (taken back if enable() fails after)
    let_in = admission.admit(admission.Asked(
        tgt.path, allow_untrusted=allow_untrusted, require_origin=require_origin,
        fingerprint=fingerprint.in_job), pol, accounts, made_dirs)
    chosen, report = let_in.path, let_in.report
    conflicts = inherit.conflicts(os.environ, chosen)
    if conflicts:
        raise CacheLifecycleError(conflicts[0])
    traps = lifecycle_traps(chosen)
    fatal = [t for t in traps if t.fatal]
    fixable = {"other-dir-in-use", "first-compile-disabled"}
    if fatal and (not reset or any(t.code not in fixable for t in fatal)):
        trap = next(t for t in fatal if not reset or t.code not in fixable)
        raise CacheLifecycleError(f"{trap.message}. What to do: {trap.remedy}")
    refuse_hidden_settings()
    if not report.verdict.ok:  # taken by the caller (allow_untrusted): said loudly
        message = (f"jaxcache: ENABLING AN UNTRUSTED CACHE {safe(tgt.path)} (verdict "
                   f"{report.verdict.value}, writers: "
                   f"{', '.join(sorted(report.writer_names(Trust.UNTRUSTED)))}): they can make "
                   "this process run code of their choosing")
        print(message, file=sys.stderr)
        warnings.warn(message, CacheLifecycleWarning, stacklevel=3)
    for f in report.findings:  # entries of unknown origin, outside CI: said, not refused
        if f.code.startswith("origin.") and f.effect is Effect.WARNING:
            warnings.warn(f"jaxcache: {f.message}. What to do: {f.remedy}",
                          CacheLifecycleWarning, stacklevel=3)
    did_reset = bool(fatal)
    with undo.all_or_nothing():
        if fatal:
            jaxcompat.reset_cache()
            traps = [t for t in traps if not t.fatal]
        jaxcompat.set_cache_dir(chosen)
        # from here on JAX opens its own cache only in `chosen`, or in a directory that
        # passes the same audit when the job points JAX there itself
        jaxcompat.guard_cache_dirs([chosen], how="enable",
                                   auditor=_auditor(pol, accounts, require_origin))
        from jaxcache.lifecycle import witness

        jaxcompat.witness_puts(witness.recorder())  # the origin of what this process writes
        from jaxcache.trust.judgement import origin_findings
        from jaxcache.trust.rules import ci

        if origin_findings.refusal(ci.detect(), require_origin, pol.rule_for(chosen).restored_from):
            # each load judged by its bytes, by your ledger or a trusted writer's that vouched
            jaxcompat.gate_gets(witness.gatekeeper(trusted=origin_findings.vouching(
                report.origins, pol.declared(chosen), accounts)))
            jaxcompat.disable_xla_subcaches()  # XLA's own loads could not be judged
        before = inherit.point_children_at(chosen)
        check_jax_uses(chosen)
    if before is not None and before != chosen:
        traps = [*traps, Trap(
            "env-replaced", f"{inherit.VARIABLE} was {safe(before)}; the processes this one "
            f"starts now inherit {safe(chosen)}, the directory jaxcache audited",
            "nothing to do; set it before the job starts to choose the cache", False)]
    for trap in traps:
        warnings.warn(f"{trap.message}. What to do: {trap.remedy}", CacheLifecycleWarning,
                      stacklevel=3)
    return EnableResult(chosen, report, tuple(traps), did_reset)


def disable() -> bool:
    """Undo every jaxcache.enable() of this process still in effect: JAX's cache settings,
    its cache object, jaxcache's directory guard and JAX_COMPILATION_CACHE_DIR are as they
    were before the first one. Programs already compiled stay compiled. False if there was
    nothing to undo."""
    from jaxcache.gc import at_exit

    at_exit.cancel()
    return undo.disable()


@contextlib.contextmanager
def enabled(path: str | None = None, *, policy: str | None = None, allow_untrusted: bool = False,
            reset: bool = False, sealed: bool = False,
            signing_key: str | SigningKey | None = None,
            trusted_keys: str | PublicKey | Sequence[str | PublicKey] = (),
            local: str | None = None, require_origin: bool = False,
            min_compile_time: float | None = None, min_entry_size: int | None = None,
            namespace: str = "none") -> Iterator[EnableResult]:
    """`with jaxcache.enabled(path, ...) as result:` enable() for the block only; on exit
    everything is as it was before (also when the block raises)."""
    mark = undo.depth()
    result = enable(path, policy=policy, allow_untrusted=allow_untrusted, reset=reset,
                    sealed=sealed, signing_key=signing_key, trusted_keys=trusted_keys,
                    local=local, require_origin=require_origin,
                    min_compile_time=min_compile_time, min_entry_size=min_entry_size,
                    namespace=namespace)
    try:
        yield result
    finally:
        undo.disable(mark)


def _auditor(pol: Policy, accounts: Accounts, require_origin: bool = False
             ) -> Callable[[str], tuple[bool, str]]:
    """The guard's judge for a directory the job points JAX at after enable(): the same audit
    as enable()'s, on the spot; anything not PRIVATE or SHARED-BY-POLICY is refused, loudly."""
    from jaxcache.trust.judgement.audit import audit
    from jaxcache.trust.rules import target

    def judge(where: str) -> tuple[bool, str]:
        tgt = target.resolve(where)
        if tgt.path is None or tgt.tilde:
            ok, why = False, "not a local directory path jaxcache can audit"
        else:
            from jaxcache.trust.inputs import ledger

            report = audit(tgt.path, policy=pol, scan_processes=False, accounts=accounts,
                           require_origin=require_origin, ledger=ledger.load(accounts=accounts))
            resolved = report.resolved or tgt.path
            if not report.exists:
                ok, why = False, ("it does not exist, and JAX would create it unaudited "
                                  "(jaxcache.enable() creates it private)")
            elif not report.verdict.ok:
                writers = ", ".join(sorted(report.writer_names(Trust.UNTRUSTED))) or "unknown"
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
