"""`jaxcache run`: audit the cache, run the job with the probe, write the run record.

One order: the audit first, then the job, started with the cache granted (through its probe,
under this run's lease: probe/launch.py). The job waits for everything before its start, so
this module imports little at the top.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from jaxcache import jobenv
from jaxcache.errors import JaxcacheError, UntrustedCacheError
from jaxcache.text import quoted, safe

TYPE_CHECKING = False  # typing itself costs `jaxcache run` start-up time: names for the type
if TYPE_CHECKING:  # checker only
    import threading
    from collections.abc import Callable
    from typing import IO

    from jaxcache.documents.claim import Output, Unclaimed
    from jaxcache.fingerprint.model import Fingerprint
    from jaxcache.lifecycle.sealing import SealOptions
    from jaxcache.records.dir_snapshot import DirSnapshot, ListingBeside
    from jaxcache.records.run_document import RunRecord
    from jaxcache.records.run_record import RunResult
    from jaxcache.trust.inputs.public_keys import PublicKey
    from jaxcache.trust.judgement.audit import AuditReport
    from jaxcache.trust.kernel.principals import Accounts
    from jaxcache.trust.rules.policy_rules import Policy

UNVERIFIED_REMEDY = ("Use a supported JAX, or pass --unverified-jax to record it anyway, marked "
                     "unverified")
SEALED_NO = "A sealed cache needs a supported JAX; --unverified-jax does not apply"


class Admission(NamedTuple):
    """What the audit admitted the job to: the path it gets and its verdict, the job's cache
    variables, what the directory held before, and where those entries came from (None for
    a sealed run)."""

    path: str
    verdict: str
    env: dict[str, str]
    before: DirSnapshot
    origin: dict[str, object] | None = None
    beside: ListingBeside | None = None  # a sealed reader's bucket: `before`, listed beside


def default_record_path() -> str:
    from jaxcache.records import record_dir as store

    return os.path.join(store.runs_dir(), store.new_name())


def _written(record: RunRecord, target: Output | Unclaimed) -> str | None:
    """The record written into a target claimed before the job; None, or why it was lost."""
    from jaxcache.records import run_record as recordmod

    try:
        recordmod.write(record, target)
    except (OSError, JaxcacheError) as exc:  # claimed before the job, yet lost since
        why = exc.strerror if isinstance(exc, OSError) else str(exc)
        return f"cannot write the record {safe(target.path)}: {why}"
    return None


def _kept_copy(record_path: str) -> str | None:
    """Where a record written with --record FILE is kept too, so that `jaxcache records`,
    decide and gc find it as they find every other (None: FILE is itself one they find, a
    name of theirs in that folder)."""
    from jaxcache.records.record_dir import NAME

    kept = default_record_path()
    here = os.path.realpath(os.path.dirname(os.path.abspath(record_path)))
    found = here == os.path.realpath(os.path.dirname(kept)) and \
        NAME.match(os.path.basename(record_path)) is not None
    return None if found else kept


def choose_cache_dir(explicit: str | None, env: dict[str, str]) -> str:
    if explicit is not None and not explicit:
        raise JaxcacheError("--cache-dir is empty")
    chosen = explicit or env.get("JAX_COMPILATION_CACHE_DIR")
    if chosen and chosen.startswith("~"):
        raise JaxcacheError(f"cache directory {quoted(chosen)} starts with '~', which JAX does "
                            "not expand (it would use a directory literally named '~' here); "
                            "use $HOME/...")
    if chosen:
        return chosen
    from jaxcache.trust import create

    return create.default_cache_dir(env)


def _claim_record(path: str, explicit: bool) -> Output | Unclaimed:
    """The record's target, claimed before the job (outputs.py): created empty now, so a path
    given with --record that cannot be written fails before the job runs; an existing file is
    replaced only if it is a jaxcache run record of yours. The default record's folder being
    unwritable (no writable state folder, a full or read-only disk) does not stop the job: the
    record is then reported not written, with the reason."""
    from jaxcache.documents import claim as outputs
    from jaxcache.documents import kinds

    recognize = outputs.json_schema(kinds.prefix("run"))
    if explicit:
        return outputs.claim(path, "record", recognize=recognize)
    try:
        from jaxcache import folders

        # made 0700 and yours alone, as `records` reads only such a folder: one another user
        # can write (a state folder of theirs) would get the job's argv and environment
        _, dfd = folders.private_folders(os.path.dirname(os.path.abspath(path)), "run record")
        os.close(dfd)
        return outputs.claim(path, "record", recognize=recognize)
    except OSError as exc:  # the state folder cannot be made or written
        why = exc.strerror or str(exc)
        return outputs.Unclaimed(path, f"no state folder for it ({safe(why)}"
                                       f"{': ' + safe(str(exc.filename)) if exc.filename else ''})")
    except JaxcacheError as exc:  # refused: not a file of yours, a link, ...
        return outputs.Unclaimed(path, str(exc))


def run_job(argv: list[str], *, cache_dir: str | None = None, record_path: str | None = None,
            policy: str | None = None, allow_untrusted: bool = False,
            env: dict[str, str] | None = None, seal: SealOptions | None = None,
            unverified_jax: bool = False, stdout: int | IO[str] | IO[bytes] | None = None,
            require_origin: bool = False,
            on_hashing: Callable[[int, int, bool], None] | None = None,
            namespace: str = "none",
            on_created: Callable[[tuple[str, ...]], None] | None = None) -> RunResult:
    """Returns a record.RunResult. seal: a sealing.SealOptions, for a sealed cache (its probe
    enables it in the job). unverified_jax: run a job whose JAX is outside the supported
    lines anyway; its record says `unverified` (otherwise refused before the job when its
    version can be told then, after it when not). stdout: where the job's stdout goes (a file
    or descriptor) when ours carries a document, as in `explain -- CMD`. require_origin: refuse
    a plain cache holding entries no watched job of yours wrote (as under CI, trust/rules/ci.py).
    on_hashing(bytes, files): told before the build's binaries are hashed (fingerprint/:
    once per install), so a person knows why this run starts slower. namespace: "fingerprint"
    runs the job on <cache dir>/<its fingerprint's id> (trust/rules/namespace.py), "none" on the
    cache dir itself. on_created(folders): told the folders made for a cache directory that did
    not exist (made private before the job: a mistyped path would start empty, every run)."""
    from jaxcache import fingerprint
    from jaxcache.probe import launch

    env = dict(os.environ if env is None else env)
    chosen = choose_cache_dir(cache_dir, env)
    if record_path == "":
        raise JaxcacheError("--record is empty")
    if record_path is not None:
        from jaxcache.probe import rank_identity as ranks

        record_path = ranks.record_path(record_path, env)  # one file per rank, never shared
    claimed: list[Output | Unclaimed] = []
    try:
        if not argv:
            raise JaxcacheError("no command given: jaxcache run [OPTIONS] -- CMD [ARGS...]")
        exe = launch.resolve(argv)
        chosen, named = _namespaced(chosen, namespace, on_hashing)
        ahead = _prefetch_env(argv, chosen, seal) if seal is not None else {}
        # the record's target claimed and the job's JAX checked first: either refused, there
        # is no audit and no job (the claimed target is released)
        claimed.append(_claim_record(record_path or default_record_path(),
                                     record_path is not None))
        if not unverified_jax or seal is not None:
            from jaxcache.jaxcompat import gate as jaxgate

            why = jaxgate.refusal(exe)
            if why is not None:
                raise JaxcacheError(f"{why}. {UNVERIFIED_REMEDY if seal is None else SEALED_NO}")

        def mine() -> fingerprint.Fingerprint:
            return fingerprint.current(on_hashing=on_hashing)  # kept for the process

        try:
            admission = _admit(chosen, policy, allow_untrusted, seal, require_origin, env, mine,
                               on_created)
        except UntrustedCacheError as exc:
            _say_how_to_make(exc, chosen, named, seal)
            raise
        # the directory reaches JAX through the probe, under this run's lease, never as a
        # variable a process that outlives the run (or skips the probe) would still read; only
        # this run's grant, never an outer run's
        env = {**jobenv.ungranted(env), **admission.env,
               jobenv.FINGERPRINT: fingerprint.to_env(mine()), **ahead}
        kept = _kept_copy(record_path) if record_path is not None else None
        if kept is not None:  # claimed once the job will run (a refused one makes no folder);
            claimed.append(_claim_record(kept, False))  # never fatal: said if not written
        beside: list[threading.Thread | None] = []

        def started() -> None:  # once the job has started: what we do while it runs
            if admission.beside is not None:
                admission.beside.start()
            beside.append(launch.beside(_import_record_model, "jaxcache-imports"))

        ran = launch.launch(argv, env, stdout=stdout, started=started)
        for thread in beside:
            if thread is not None:  # (None: no thread could start; imported below instead)
                thread.join()  # the modules it imports are imported here only once it is done
        from jaxcache.probe import runner
        from jaxcache.records import run_record as recordmod
        from jaxcache.records.run_document import Namespace

        out = claimed[0]
        outcome = runner.outcome(argv, ran)
        before = admission.before if admission.beside is None \
            else admission.beside.result()  # waited for before this process imports more
        # the other directories JAX used are audited too, each by its own verdict
        record = recordmod.finish(outcome, admission.path, verdict=admission.verdict,
                                  before=before, env=env,
                                  run=recordmod.RunAudit(admission.origin,
                                                         Namespace(*named) if named else None,
                                                         policy,
                                                         unverified_jax))
        lost = [_written(record, target) for target in claimed]
        return recordmod.RunResult(record, out.path, outcome, lost[0],
                                   lost[1] if len(lost) > 1 else None)
    finally:
        for made in claimed:
            made.release()  # no-op once written


def _import_record_model() -> None:
    """The run record's model, builder and outcome, imported on a thread while the job runs:
    ~40 classes whose creation (dataclasses: ~1.5 ms each on a 2-core machine) this process
    would otherwise do after the job ended, or, taken before it, the job would wait for."""
    try:
        import jaxcache.probe.runner
        import jaxcache.records.run_record  # noqa: F401
    except Exception:  # noqa: BLE001, S110 - the main thread imports them again: it says why
        pass


def _prefetch_env(argv: list[str], chosen: str, seal: SealOptions) -> dict[str, str]:
    """A sealed reader of a bucket, or of a directory on a network filesystem (or any, with
    --prefetch-from): the keys the newest record of this command and cache hit (or
    --prefetch-from's), for the job's probe to fetch ahead (seal/stores/prefetch.py); nothing
    when prefetch is off, for a publisher, or without such a record."""
    from jaxcache.trust.rules.target import is_url

    if not seal.prefetch or seal.publisher:
        return {}  # a publisher compiles and publishes its misses
    if not is_url(chosen) and seal.prefetch_from is None:
        from jaxcache.lifecycle.prefetching import on_network

        if not on_network(chosen):
            return {}  # a local disk answers each read at once: nothing to overlap
    from jaxcache.lifecycle.seal_spec import PrefetchSpec
    from jaxcache.records import key_uses as prefetch_keys
    from jaxcache.seal.stores.prefetch_plan import plan_keys

    found = prefetch_keys.from_file(seal.prefetch_from) if seal.prefetch_from is not None \
        else prefetch_keys.newest_for(argv, chosen)
    keys = plan_keys(found.keys) if found is not None else ()
    if keys and seal.local is not None:  # what the local tier holds is loaded from there
        from jaxcache.lifecycle.prefetching import absent_from

        keys = absent_from(keys, seal.local)
    if found is None or not keys:
        return {}
    spec = PrefetchSpec(keys, found.record, seal.prefetch_workers, seal.prefetch_memory).within()
    return {jobenv.PREFETCH: spec.to_env()} if spec.keys else {}


def _namespaced(chosen: str, namespace: str, on_hashing: Callable[[int, int, bool], None] | None
                ) -> tuple[str, tuple[str, str, str] | None]:
    """The cache the job uses, and the record's word on its namespace (its Namespace's fields,
    made into one with the record after the job: its model is imported while the job runs).
    With "fingerprint" the fingerprint is computed here, before the audit, which gets the same
    one (fingerprint.current() keeps it for the process)."""
    from jaxcache.trust.rules import namespace as ns

    if ns.check(namespace) == ns.NONE:
        return chosen, None
    from jaxcache import fingerprint
    from jaxcache.trust.rules import target

    ident = fingerprint.current(on_hashing=on_hashing).id
    given = target.resolve(chosen)  # the parent as the job's path is read: absolute
    return ns.join(chosen, ident), (namespace, ident, given.path or given.url or chosen)


def _say_how_to_make(exc: UntrustedCacheError, path: str, named: tuple[str, str, str] | None,
                     seal: SealOptions | None) -> None:
    """A sealed namespace that init would not create (a shared parent others can write):
    the refusal says how the share's publisher makes it, readable by the fleet's readers."""
    import shlex

    from jaxcache.text import wrap
    from jaxcache.trust.rules.target import is_url

    if named is None or seal is None or is_url(path) or os.path.lexists(path):
        return
    hint = ("or, as this sealed namespace's publisher, make it yourself, readable by its "
            "readers (jaxcache creates only directories no one else could replace): "
            f"mkdir -m 755 {shlex.quote(safe(path))}")
    exc.args = ("\n".join([str(exc), *wrap(hint, "  ", limit=100)]),)


def audited_env(path: str, witness: bool = True) -> dict[str, str]:
    """The job's cache variables for an audited directory. JAXCACHE_AUDITED: the probe sets it
    as JAX's cache directory, while the run's lease is held (probe/launch.py), and lets JAX
    open its cache there and nowhere else (JAXCACHE_LIB: where the probe finds jaxcache's
    guard, whatever Python the job runs). Never JAX_COMPILATION_CACHE_DIR: a process that
    skips the probe (`python -I`) or outlives the run would read the directory unjudged.
    JAXCACHE_WITNESS: the origin ledger each entry the job writes goes into
    (trust/provenance/origin.py), unless `witness` is False (bench's own caches)."""
    from jaxcache import _package
    from jaxcache.trust.provenance.ledger_place import ledger_path

    env = {jobenv.AUDITED: path, jobenv.LIB: _package.HOME}
    if witness:
        env[jobenv.WITNESS] = ledger_path()
    return env


def _admit(chosen: str, policy: str | None, allow_untrusted: bool, seal: SealOptions | None,
           require_origin: bool = False, env: dict[str, str] | None = None,
           fingerprint: Callable[[], Fingerprint] | None = None,
           on_created: Callable[[tuple[str, ...]], None] | None = None) -> Admission:
    """The one admission (lifecycle/admission.py), then what this job gets for what it let in:
    the variables of its grant and what the cache held before. `fingerprint()` (the job's
    build and host, fingerprint.current()): entries of yours another build wrote are found too
    (trust/provenance/origin.py's built()); asked for only where origins are judged (a plain
    cache), after the keys and the policy are read: a bad key or policy is one line, not first
    a notice that the build is being hashed."""
    from jaxcache.lifecycle import admission
    from jaxcache.records.dir_snapshot import DirSnapshot, ListingBeside
    from jaxcache.trust.inputs import policy as policymod
    from jaxcache.trust.kernel.principals import Accounts

    accounts = Accounts()
    pol = policymod.load(policy, accounts)
    keys: tuple[PublicKey, ...] = seal.public_keys() if seal is not None else ()
    # public_keys() puts the signer's key last
    signer = keys[-1] if seal is not None and seal.signing_key is not None else None
    let_in = admission.admit(admission.Asked(
        chosen, sealed=seal is not None, keys=keys, signer=signer,
        publisher=seal is not None and seal.publisher, local=seal.local if seal else None,
        allow_untrusted=allow_untrusted, require_origin=require_origin, fingerprint=fingerprint,
        env=env, remember=True, generation=seal is not None and seal.generation is not None),
        pol, accounts)
    if let_in.created and on_created is not None:
        on_created(let_in.created)
    path, report = let_in.path, let_in.report
    if let_in.kind is admission.Kind.GENERATION:
        assert seal is not None
        from jaxcache.trust.rules import target

        if target.is_url(path):
            from jaxcache.seal.objects import store_for_url as objects

            objects.check_client(target.parse_bucket(path))
        # what the job may load is what the generation's manifest names: read by the job
        return Admission(path, let_in.verdict.value, seal.job_env(path, policy),
                         DirSnapshot(path, {}, "a store of generations: its manifest names "
                                               "what the job may load"))
    if let_in.kind is admission.Kind.SEALED_BUCKET:
        assert seal is not None
        from jaxcache.seal.objects import store_for_url as objects
        from jaxcache.trust.rules import target

        objects.check_client(target.parse_bucket(path))  # installed (else: one clear line)
        # a publisher's job writes to the bucket: listed before it starts; a reader's, beside
        if seal.publisher:
            return Admission(path, let_in.verdict.value, seal.job_env(path, policy),
                             DirSnapshot.at(path))
        return Admission(path, let_in.verdict.value, seal.job_env(path, policy),
                         DirSnapshot(path, {}, "listed beside the job"), None,
                         ListingBeside(path))
    if seal is not None:  # no JAX_COMPILATION_CACHE_DIR: without the probe, no cache at all
        granted = seal.job_env(path, policy)
    else:
        granted = audited_env(path)
        if not allow_untrusted and _origin_required(pol, path, require_origin, env):
            from jaxcache.trust.provenance.ledger_place import ledger_path

            granted[jobenv.ORIGIN_GATE] = ledger_path()
            trusted = _vouching(report, pol, accounts, path)
            if trusted:  # trusted writers' ledgers that vouched: the job reads them again
                from jaxcache.lifecycle import witness

                granted[jobenv.ORIGIN_TRUSTED] = witness.vouching_env(trusted)
            # XLA reads and writes its sub-caches itself: nothing could judge those loads
            granted["JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES"] = "none"
    return Admission(path, let_in.verdict.value, granted,
                     DirSnapshot.of(path, report.inventory), _origin_summary(report))


def _origin_required(pol: Policy, path: str, require_origin: bool, env: dict[str, str] | None
                     ) -> bool:
    """Are entries of unknown origin refused here (trust/judgement/origin_findings.py's refusal)?
    Then the job judges each load too, not only this audit (--allow-untrusted: the user takes
    whatever is there, as for any other finding)."""
    from jaxcache.trust.judgement import origin_findings
    from jaxcache.trust.rules import ci

    return origin_findings.refusal(ci.detect(env), require_origin,
                          pol.rule_for(path).restored_from) is not None


def _vouching(report: AuditReport, pol: Policy, accounts: Accounts, path: str
              ) -> tuple[tuple[str, frozenset[int]], ...]:
    """The trusted writers' ledgers that vouched in this audit, with who may own each
    (origin_findings.vouching()), for the job's gate."""
    from jaxcache.trust.judgement import origin_findings

    return origin_findings.vouching(report.origins, pol.declared(path), accounts)


def _origin_summary(report: AuditReport) -> dict[str, object] | None:
    """The record's word on where the entries before the job came from
    (trust/provenance/origin.py); None where origins were not judged (a sealed cache)."""
    o = report.origins
    if o is None:
        return None
    from jaxcache.trust.finding_codes import ORIGIN_SAID
    from jaxcache.trust.provenance.origin import build_reason

    said = [f for f in report.findings if f.code in ORIGIN_SAID]
    return {**o.counts(), "ledger_problem": o.ledger_problem,
            "vouched_by": {who: len(names) for who, names in o.vouched().items()},
            "not_yours": [{"name": e.name, "origin": e.origin, "vouched_by": e.vouched_by}
                          for e in o.entries if e.origin != "yours"],
            "other_build": [{"name": e.name, "writer": e.writer, "reason": build_reason(e, o),
                             "vouched_by": e.vouched_by}
                            for e in o.other_build()],
            "findings": [{"code": f.code, "effect": f.effect, "message": f.message,
                          "remedy": f.remedy} for f in said]}
