"""`jaxcache.enable(path, sealed=True, ...)`: audit both tiers, then hand JAX the sealed backend.

Kept apart from enabling.py because it needs `cryptography` and the seal package, which the
plain path does not. The child side of `jaxcache run --sealed` comes through here too
(`enable_from_env`), so a job and a library caller get the same checks.
"""

from __future__ import annotations

from jaxcache.lifecycle.seal_spec import ENV, PrefetchSpec, SealSpec
from jaxcache.lifecycle.seal_spec import SealOptions as SealOptions  # run's, kept here too

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from jaxcache.fingerprint.model import Fingerprint
    from jaxcache.lifecycle.traps import EnableResult
    from jaxcache.seal.signing.keyless import KeylessSigner
    from jaxcache.seal.stores.bucket_backend import BucketSealedCache
    from jaxcache.seal.stores.sealed_cache import SealedCache
    from jaxcache.trust.create import InitResult
    from jaxcache.trust.inputs.public_keys import PublicKey
    from jaxcache.trust.inputs.signing_keys import SigningKey
    from jaxcache.trust.rules.identities import SeenIdentity

    SealedBackend = SealedCache | BucketSealedCache
    TrustedKeys = str | PublicKey | Sequence[str | PublicKey]


def enable_sealed(path: str, *, policy: str | None, reset: bool,
                  signing_key: str | SigningKey | KeylessSigner | None,
                  trusted_keys: TrustedKeys, local: str | None,
                  prefetch: Sequence[str] | PrefetchSpec | None = None,
                  generation: str | None = None) -> EnableResult:
    """`prefetch`: keys (enable's own argument) or `jaxcache run`'s plan, for a reader of a
    bucket or a directory (lifecycle/prefetching.py). `generation`: `path` is a store of
    generations, and this process reads the one this pointer names (seal/generations/)."""
    from jaxcache.lifecycle import prefetching
    from jaxcache.trust import create

    plan = prefetch if isinstance(prefetch, PrefetchSpec) or prefetch is None \
        else prefetching.of_keys(tuple(prefetch))
    with create.taken_back_on_error() as made:  # all-or-nothing: the directories too
        return _enable_sealed(path, policy, reset, signing_key, trusted_keys, local, made,
                              plan, generation)


def _enable_sealed(path: str, policy: str | None, reset: bool,
                   signing_key: str | SigningKey | KeylessSigner | None,
                   trusted_keys: TrustedKeys, local: str | None,
                   made_dirs: list[InitResult], plan: PrefetchSpec | None,
                   generation: str | None = None) -> EnableResult:
    from jaxcache import jaxcompat
    from jaxcache.lifecycle import admission, inherit, undo
    from jaxcache.lifecycle.traps import (
        CacheLifecycleError,
        EnableResult,
        check_jax_uses,
        lifecycle_traps,
        refuse_hidden_settings,
    )
    from jaxcache.seal.stores.sealed_cache import SealedCache
    from jaxcache.trust.inputs import policy as policymod
    from jaxcache.trust.inputs import public_keys as trustkeys
    from jaxcache.trust.inputs import signing_keys as keymod
    from jaxcache.trust.kernel.principals import Accounts
    from jaxcache.trust.rules import keyring

    if isinstance(trusted_keys, (str, trustkeys.PublicKey)):
        trusted_keys = (trusted_keys,)  # one key given without a list
    if generation is not None and signing_key is not None:
        from jaxcache.errors import JaxcacheError

        raise JaxcacheError(READ_ONLY)
    signer = keymod.load_signing(signing_key) if isinstance(signing_key, str) else signing_key
    extra = tuple(trustkeys.load_public(k) if isinstance(k, str) else k for k in trusted_keys)
    key_signer = signer.public if isinstance(signer, keymod.SigningKey) else None
    if key_signer is not None:
        extra += (key_signer,)
    accounts = Accounts()
    pol = policymod.load(policy, accounts)
    let_in = admission.admit(admission.Asked(
        path, sealed=True, keys=extra, signer=key_signer, publisher=signer is not None,
        local=local, generation=generation is not None), pol, accounts, made_dirs)
    chosen, report, local_dir = let_in.path, let_in.report, let_in.local
    store = None
    if let_in.kind is admission.Kind.GENERATION:
        from jaxcache.seal.generations import reading

        store = reading.store_at(chosen)
    elif let_in.kind is admission.Kind.SEALED_BUCKET:
        from jaxcache.seal.objects import store_for_url as objects
        from jaxcache.trust.rules import target

        store = objects.open_store(target.parse_bucket(chosen))
    rule = pol.rule_for(chosen)
    keys = keyring.for_rule(rule, extra)  # KeyRingError: one line
    if key_signer is not None:
        keys = keys.with_key(key_signer)  # refused when the policy revokes it
    # a namespace of `--namespace fingerprint` (<dir>/<id>) is this version's: its entries'
    # signatures all claim a build, so one that claims none had its claim stripped (copied in
    # from another build's namespace): a miss, as the policy's require_build would make it
    from jaxcache.trust.rules import namespace

    require_build = rule.require_build or namespace.is_id(chosen.rstrip("/").rpartition("/")[2])
    traps = lifecycle_traps(chosen)
    state = jaxcompat.cache_state()
    # the sealed store needs no filelock for a size limit (it locks on its own)
    blocking = [t for t in traps if t.fatal and t.code not in (
        "other-dir-in-use", "first-compile-disabled", "max-size-without-filelock")]
    if blocking:
        raise CacheLifecycleError(f"{blocking[0].message}. What to do: {blocking[0].remedy}")
    needs_reset = state.initialized or state.present or any(
        t.code == "first-compile-disabled" for t in traps)
    if needs_reset and not reset:
        raise CacheLifecycleError(
            "JAX already made its cache decision in this process (a cache object exists or "
            "the first compile ran without one); pass reset=True, or enable before the first "
            "compile")
    refuse_hidden_settings()
    # the local tier is trusted by ownership, as a plain cache: what this process writes there
    # goes into the origin ledger as enable() has JAX's own writes go (lifecycle/witness.py)
    witnessed = None
    if local_dir is not None:
        from jaxcache.lifecycle import witness

        witnessed = witness.recorder()
    with undo.all_or_nothing(sealed_dir=chosen):
        if needs_reset:
            jaxcompat.reset_cache()
        from jaxcache.lifecycle import prefetching

        backend: SealedCache | BucketSealedCache
        if generation is not None:
            from jaxcache.seal.generations.generation_cache import GenerationCache

            assert store is not None
            backend = GenerationCache(store, pointer=generation, trusted=keys,
                                      local=local_dir, max_size=jaxcompat.max_size,
                                      host=job_fingerprint, require_build=require_build,
                                      witness=witnessed, ahead=plan.keys if plan else (),
                                      workers=plan.workers if plan else 1,
                                      budget_bytes=plan.budget_bytes if plan else 0)
        elif store is None:
            backend = SealedCache(chosen, trusted=keys, signer=signer, local=local_dir,
                                  max_size=jaxcompat.max_size, host=job_fingerprint,
                                  require_build=require_build, witness=witnessed,
                                  prefetch=prefetching.for_enable(
                                      chosen, None, keys, plan,
                                      reader=signer is None))
        else:
            from jaxcache.seal.stores.bucket_backend import BucketSealedCache

            bucket = store
            # the fetch the probe started as the job began to import JAX, if it verified
            # with these very keys; else the plan's (run's, or the keys enable() was given),
            # started now. A publisher compiles and publishes its misses: no fetch ahead.
            pool = prefetching.for_enable(chosen, lambda: bucket, keys, plan,
                                          reader=signer is None)
            backend = BucketSealedCache(pool.store if pool is not None else store,
                                        trusted=keys, signer=signer, local=local_dir,
                                        max_size=jaxcompat.max_size, host=job_fingerprint,
                                        require_build=require_build, witness=witnessed,
                                        prefetch=pool)
        try:
            jaxcompat.disable_xla_subcaches()  # XLA would read them from the sealed dir
            jaxcompat.install_backend(chosen, backend)
        except BaseException:
            backend.close()
            raise
        jaxcompat.guard_cache_dirs()  # any other directory the job points JAX at is refused
        # children: no plain path to the shared directory (they would read it unsigned);
        # under `jaxcache run --sealed` they inherit JAXCACHE_SEAL and their probe seals
        # them too
        inherit.point_children_at(None)
        check_jax_uses(chosen)
        if not jaxcompat.uses_backend(backend):
            raise CacheLifecycleError("after enabling, JAX does not hold the sealed backend; "
                                      "nothing was changed")
    kept = tuple(t for t in traps if not t.fatal)
    return EnableResult(chosen, report, kept, needs_reset, backend)


READ_ONLY = ("a generation is read-only: its readers compile their misses into their own "
             "local tier; publish one with `jaxcache seal DIR --generation STORE`")


def job_fingerprint() -> Fingerprint:
    """The fingerprint a sealed backend signs and judges with, asked at its first load or
    write (a compile has made JAX's backend by then): what `jaxcache run` handed the job, or
    this process's own, with what the backend says of the accelerator."""
    from jaxcache import fingerprint
    from jaxcache.jaxcompat import hardware

    return fingerprint.in_job().with_accelerator(hardware.accelerator())


def env_value(path: str, *, signing_key: str | None, trusted_keys: tuple[str, ...],
              local: str | None, policy: str | None) -> str:
    """What `jaxcache run --sealed` puts in the job's environment for its probe."""
    return SealSpec(path, signing_key, trusted_keys, local, policy).to_env()


def enable_from_env(value: str, prefetch: str | None = None) -> EnableResult:
    """The probe's call, right after the job imported jax. `prefetch`: the plan `jaxcache run`
    gave (seal_spec.PrefetchSpec), whose fetch the probe started as the import began."""
    from jaxcache.lifecycle.seal_spec import PrefetchSpec

    spec = SealSpec.from_env(value)
    signer: str | KeylessSigner | None = spec.signing_key
    if spec.identity == "ci":
        from jaxcache.seal.signing.keyless import KeylessSigner

        signer = KeylessSigner(trust_config=spec.sigstore_config)  # token at the first write
    return enable_sealed(spec.path, policy=spec.policy, reset=False,
                         signing_key=signer, trusted_keys=spec.trusted_keys,
                         local=spec.local,
                         prefetch=PrefetchSpec.from_env(prefetch) if prefetch else None,
                         generation=spec.generation)


def _name_of(backend: SealedBackend, public: PublicKey) -> str | None:
    known = backend.trusted.get(public.raw)
    return (known.name if known is not None else None) or public.name


def _signing_identity(backend: SealedBackend, own: SeenIdentity) -> dict[str, object]:
    """A keyless publisher's own identity, as its certificate states it, and whether readers
    with its policy reject what it signs."""
    from jaxcache.seal.signing.identity_policy import rejection

    return {"issuer": own.issuer, "identity": own.subject, "ref": own.ref,
            "caller": own.caller, "event": own.event, "run": own.run_uri,
            "rejected_by_readers": rejection(backend.given, own)}


def summary(backend: SealedBackend) -> dict[str, object]:
    """For the run record: what the sealed backend rejected or could not write, and the
    keys it judged with (by name and id, each with its state then)."""
    from jaxcache.lifecycle import prefetching

    own = getattr(backend.signer, "seen", None)  # keyless: its certificate's claims
    return {"path": backend.shared, "local": backend.local,
            "signing_key": backend.signer.public.id if backend.signer else None,
            "signing_key_name": _name_of(backend, backend.signer.public) if backend.signer
            else None,
            "signing_identity": None if own is None else _signing_identity(backend, own),
            # the policy's (the publisher's own identity, which it trusts, is not listed)
            "trusted_identities": [{"id": i.id, "identity": i.subject, "issuer": i.issuer,
                                    "name": i.name} for i in backend.given.identities],
            "trusted_keys": [{"id": k.id, "name": k.name, "holder": k.holder,
                              "state": backend.trusted.state(k)}
                             for k in backend.trusted.keys.values()],
            "signatures_needed": backend.trusted.needed,
            "rejections": [{"key": r.key, "directory": r.directory, "status": r.status,
                            "reason": r.reason, "owner": r.owner, "signer": r.signer}
                           for r in backend.rejections],
            "writes": [{"key": w.key, "directory": w.directory, "bytes": w.bytes,
                        "tier": w.tier.value} for w in backend.writes],
            "evictions": [{"entry": e, "directory": d} for e, d in backend.evictions],
            "loads": [{"key": k, "tier": tier.value, "bytes": n}
                      for k, (tier, n) in backend.served.items()],
            "write_errors": list(backend.write_errors),
            "bucket_misses": [{"key": m.key, "kind": m.kind, "reason": m.reason,
                               "hint": m.hint} for m in getattr(backend, "misses", ())],
            "prefetch": prefetching.summary(getattr(backend, "prefetch", None)),
            "generation": _generation_summary(backend),
            "build": _build_summary(backend)}


def _generation_summary(backend: SealedBackend) -> dict[str, object] | None:
    """A generation's reader: the pointer it followed, the generation it read (None: refused,
    `refused` says why) and who published it. (Asked by attribute: the generations' modules
    are not imported for other sealed runs.)"""
    pointer = getattr(backend, "pointer", None)
    if pointer is None:
        return None
    made = getattr(backend, "generation", None)
    refusal = getattr(backend, "refusal", None)
    return {"pointer": pointer, "name": made.name if made else None,
            "publisher": made.publisher if made else None,
            "created": made.created if made else None,
            "entries": len(made.entries) if made else None,
            "refused": refusal[1] if refusal else None,
            "fetched_ahead": getattr(backend, "ahead_planned", 0),
            "ahead_used": getattr(backend, "ahead_used", 0)}


def _build_summary(backend: SealedBackend) -> dict[str, object]:
    """The build binding, for the run record: this process's build (when the backend asked
    for it: a process that loaded or wrote nothing never did), whether a known build is
    required, and the keys loaded though no signature said which build made them."""
    host = backend.host_if_asked
    return {"fingerprint": host.id if host is not None else None,
            "digest": host.build.digest if host is not None and host.build else None,
            "require_build": backend.require_build,
            "unknown_loaded": list(backend.unknown_builds)}


__all__ = ["ENV", "enable_from_env", "enable_sealed", "env_value", "summary"]
