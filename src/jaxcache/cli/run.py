"""`jaxcache run`: a job with the cache on, and the record of what JAX did.

On the path of every job's start-up: nothing heavy beyond the command line's parser is
imported before the job starts.
"""

from __future__ import annotations

import argparse
import os
import sys

from jaxcache.cli import common
from jaxcache.errors import UntrustedCacheError
from jaxcache.trust.rules import namespace

TYPE_CHECKING = False  # typing itself costs `jaxcache run` ~2 ms: names for the type checker only
if TYPE_CHECKING:
    from typing import NoReturn

    from jaxcache.lifecycle.seal_spec import SealOptions
    from jaxcache.records.run_document import RunRecord


def options(p: argparse.ArgumentParser) -> None:
    # REMAINDER: the command starts at the first word that is not our option; from there on
    # nothing is ours (`jaxcache run python x.py --help` passes --help to x.py).
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="CMD",
                   help="The program and its arguments, passed on verbatim.")
    common.option(p, "--cache-dir", metavar="DIR",
                  help="Cache directory (default: $JAX_COMPILATION_CACHE_DIR, else the project "
                       "file's cache_dir (docs/reference/project-file.md), "
                       "else the one `jaxcache init` makes). "
                       "Audited first, wherever it was named; created private if missing "
                       "(a sealed reader's is refused instead).")
    common.option(p, "--namespace", choices=namespace.CHOICES, default=namespace.NONE,
                  show_default=True,
                  help="fingerprint: use <cache dir>/<id>, <id> being this build's and CPU's "
                       "`jaxcache fingerprint --short` (created private if missing; a bucket: "
                       "<prefix>/<id>), so jobs of a mixed fleet share one directory or "
                       "bucket and each reads only what its own build wrote.")
    common.option(p, "--record", dest="record_path", metavar="FILE",
                  help="Where to write the run record (JSON). Default: a new file under the "
                       "project file's [records] dir, else your state dir "
                       "(~/.local/state/jaxcache/runs/). Fields {rank}, {host}, "
                       "{pid} are filled in; under a launcher that started several ranks "
                       "(srun, mpirun) each rank writes FILE.rank<N>.json unless {rank} or "
                       "{pid} is given. A record written to FILE is kept in that folder too, "
                       "so `jaxcache records`, decide and gc see every run.")
    common.option(p, "--policy", dest="policy_path", metavar="FILE",
                  help="Trust policy (TOML).")
    common.option(p, "--allow-untrusted", action="store_true",
                  help="Run even if the audit says UNSAFE or UNVERIFIABLE. Anyone who can "
                       "write the cache can then choose the code your job runs.")
    common.option(p, "--require-origin", action="store_true",
                  help="Refuse a plain cache holding entries no job jaxcache watched wrote "
                       "(restored from a CI cache, copied, baked into an image), as under CI "
                       "it always does, unless the policy names their source (restored_from). "
                       "Without it, outside CI, such entries are a warning.")
    common.option(p, "--max-size", metavar="SIZE",
                  help="After the job, collect the cache directory down to SIZE (10G, 500M, "
                       "2GiB), least recently used first, as `jaxcache gc` does "
                       "(docs/reference/gc.md), never what the job itself loaded or wrote (a "
                       "limit below that is said); a plain directory only. The job's exit "
                       "status is unchanged.")
    common.option(p, "--max-age", metavar="AGE",
                  help="After the job, delete the entries not used for longer than AGE (30d, "
                       "12h), as `jaxcache gc --max-age` does.")
    common.unverified_flag(p)
    common.threshold_flags(p)
    sealed_flags(p)


def sealed_flags(p: argparse.ArgumentParser) -> None:
    common.option(p, "--sealed", action="store_true",
                  help="Load only entries signed by a trusted key (docs/how-to/sealed-cache.md); "
                       "others may then write the directory. The job must be able to import "
                       "jaxcache.")
    common.option(p, "--signing-key", metavar="KEYFILE",
                  help="With --sealed: sign what the job writes (from `jaxcache keygen`, or "
                       "a pkcs11: URI naming a key in an HSM: docs/how-to/hsm.md). "
                       "Without it the job writes nothing to the sealed directory.")
    common.identity_options(p, "With --sealed: sign what the job writes")
    common.option(p, "--trusted-key", dest="trusted_keys", action="append", metavar="KEY",
                  help="With --sealed: trust this public key (ed25519:... or a .pub file; "
                       "repeatable), besides the policy's trusted_keys for the directory.")
    common.option(p, "--local", metavar="DIR",
                  help="With --sealed: a private directory read first and written instead "
                       "(tiers); each build keeps its own folder in it, DIR/<fingerprint id>.")
    common.option(p, "--generation", metavar="POINTER",
                  help="With --sealed: the cache is a store of generations (a directory, gs:// "
                       "or s3://: `jaxcache seal --generation`); read the one POINTER names "
                       "(e.g. current), its manifest's signature verified once and each entry "
                       "by its digest. Read-only: the job's misses go to --local, if given "
                       "(docs/how-to/generations.md).")
    common.option(p, "--no-prefetch", dest="prefetch", action="store_false",
                  help="With --sealed on a bucket or a network filesystem (NFS, a FUSE mount): "
                       "do not fetch ahead the entries the newest record of the same command "
                       "and cache hit (fetched in parallel while the job imports JAX, each "
                       "verified as a load is).")
    common.option(p, "--prefetch-from", metavar="RECORD",
                  help="With --sealed: fetch ahead the entries this run record hit, instead "
                       "of the newest record of the same command's (also from a local "
                       "directory).")
    common.option(p, "--prefetch-workers", type=int, default=8, metavar="N",
                  help="With a fetch ahead: reads in flight at once (default 8).")
    common.option(p, "--prefetch-memory", type=int, default=1024, metavar="MB",
                  help="With a fetch ahead: at most this many MB fetched and not yet loaded "
                       "(default 1024).")


def handle(args: argparse.Namespace, tail: list[str] | None) -> None:
    """Run a JAX job unmodified, with the cache enabled and a probe that records what JAX did.

      jaxcache run -- python train.py --epochs 1
      jaxcache run --cache-dir /srv/jax-cache --record run.json -- ./job.sh

    One order: the cache directory is audited first, and the job starts only once the audit
    has passed (PRIVATE or SHARED-BY-POLICY); a refusal is one line, before any of the job
    runs. The probe (a sitecustomize that chains yours) does not import jax before your
    program does and does not touch its output; it hands JAX the directory in each Python
    process of the job (the job's environment holds no JAX_COMPILATION_CACHE_DIR), and only
    while this run lasts: a process that outlives the run is stopped when it next reaches the
    cache. After the program ends a summary goes to stderr: modules compiled, hits, written,
    skipped and why (the slowest first, every one with 5% of the time; --verbose: all), what
    JAX's write thresholds left uncached and whether that is material, seconds compiling vs
    loading (--quiet: none; the job's stdout is its own, the record is the machine output).

    Exit code: the program's own (128+N if killed by signal N); 127 command not found, 126
    not executable; 1 cache refused, or a program that exited 0 after pointing JAX at another
    directory (refused by jaxcache, or not PRIVATE/SHARED-BY-POLICY by its own audit); 2 usage
    or input error, or a --record FILE that could not be written after a program that
    succeeded (the default record in the state folder only warns: the status stands).
    """
    argv = common.user_command(args.command, tail)
    if not argv:
        common.usage(args, "no command to run: jaxcache run [OPTIONS] -- CMD [ARGS...]")
    limits = _gc_limits(args)  # bad input is refused before the job
    from jaxcache.run import command as runmod

    try:
        result = runmod.run_job(argv, cache_dir=args.cache_dir, record_path=args.record_path,
                                policy=args.policy_path, allow_untrusted=args.allow_untrusted,
                                seal=seal_options_of(args), unverified_jax=args.unverified_jax,
                                require_origin=args.require_origin,
                                namespace=args.namespace,
                                env={**os.environ, **common.threshold_env(args)},
                                on_hashing=None if args.quiet else common.hashing_notice,
                                on_created=None if args.quiet else _created)
    except UntrustedCacheError as exc:
        _refused_rank(exc)
    record = result.record  # as built: what the summary says and what was written
    if not args.quiet:
        from jaxcache.report import run as run_report

        sys.stderr.write(run_report.render_text(record,
                                                result.record_error and
                                                f"NOT WRITTEN ({result.record_error})"
                                                or result.record_path, verbose=args.verbose))
    if limits is not None:
        _collect(args, limits, record)
    elif not args.quiet:
        _grown(record)
    _compact_ledger(args)
    if result.record_error and args.record_path is not None:
        # a record asked for with --record: the job's own status if it failed, else 2
        sys.stderr.write(f"jaxcache: {result.record_error}\n")
        _exit_now(result.outcome.status or 2)
    if result.record_error:  # the default record (a full or failing state folder): said,
        sys.stderr.write(f"jaxcache: warning: {result.record_error}; the job's exit status "
                         "stands\n")  # but the job's own outcome is not changed by it
    if result.kept_error:  # --record FILE was written; its copy in the records folder was not
        sys.stderr.write(f"jaxcache: warning: {result.kept_error}; `jaxcache records`, decide "
                         "and gc will not see this run\n")
    unverified = record.unverified
    code = result.exit_code
    if unverified and not args.unverified_jax:
        from jaxcache.text import safe

        sys.stderr.write(f"jaxcache: {safe(unverified)}. {runmod.UNVERIFIED_REMEDY}\n")
    elif code != result.outcome.status:
        from jaxcache.records import used_dirs

        failing = used_dirs.failing(record)
        if any(e.status == "refused" for e in failing):
            why = ("JAX was pointed at another cache directory, which jaxcache audited and "
                   "refused: nothing was loaded from or written there (see the record's "
                   "jax_cache_dirs)")
        elif failing:
            why = ("JAX used another cache directory, which its own audit does not trust (see "
                   "the record's jax_cache_dirs)")
        else:
            why = ("a rank of the job saw another cache directory, or none (see the record's "
                   "ranks)")
        sys.stderr.write(f"jaxcache: exit 1: {why}\n")
    _exit_now(code)


def _created(folders: tuple[str, ...]) -> None:
    """Said before the job: a cache directory that did not exist was made, outermost first
    (a mistyped path would otherwise start empty, silently, every run)."""
    from jaxcache.text import plural, safe

    above = f", and {plural(len(folders) - 1, 'folder')} above it" if len(folders) > 1 else ""
    sys.stderr.write(f"jaxcache: created {safe(folders[-1])} (mode 0700{above}): the cache "
                     "directory did not exist\n")


GC_DEADLINE_S = 10.0  # after the job, gc deletes for at most this long; the next run goes on


def _gc_limits(args: argparse.Namespace) -> tuple[int | None, float | None] | None:
    """--max-size and --max-age, parsed; neither given: the project file's [gc] limits (a
    plain cache; None: none set anywhere)."""
    if args.max_size is None and args.max_age is None:
        if args.sealed:
            return None
        from jaxcache.project import effective

        filed = effective.file_gc_limits(os.environ, args.cache_dir)
        return None if filed == (None, None) else filed
    if args.sealed:
        common.usage(args, "--max-size and --max-age collect a plain cache directory; for a "
                           "sealed one run `jaxcache gc` where it is published")
    from jaxcache import text

    try:
        return (text.parse_size(args.max_size) if args.max_size is not None else None,
                text.parse_age(args.max_age) if args.max_age is not None else None)
    except ValueError as exc:
        common.usage(args, str(exc))


def _collect(args: argparse.Namespace, limits: tuple[int | None, float | None],
             record: RunRecord) -> None:
    """gc of the job's cache directory after the job, for at most GC_DEADLINE_S: one line on
    stderr (none with --quiet but an error), never a change to the exit status."""
    import time

    from jaxcache.errors import JaxcacheError
    from jaxcache.gc import collect
    from jaxcache.run.command import choose_cache_dir
    from jaxcache.text import plural, safe, size
    from jaxcache.trust.rules import namespace

    try:
        path = choose_cache_dir(args.cache_dir, dict(os.environ))
        named = record.cache_dir.namespace
        if named is not None and namespace.is_id(named.id):
            path = namespace.join(path, named.id)
        done = collect.collect(path, max_size=limits[0], max_age_s=limits[1],
                               until_ns=time.monotonic_ns() + int(GC_DEADLINE_S * 1e9),
                               keep=_used_entries(record))
    except (JaxcacheError, OSError) as exc:
        sys.stderr.write(f"jaxcache: gc after the job skipped: {safe(str(exc))}\n")
        return
    if done.job_over_limit:  # a limit below the job's working set: said, even with -q
        sys.stderr.write(
            f"jaxcache: gc: the limit cannot hold what this job used: "
            f"{size(done.kept_for_job_bytes)} in {plural(done.kept_for_job, 'entry', 'entries')}"
            f", kept (deleting them would make the next run compile them again); "
            f"{size(done.over_by)} over, freed {size(done.freed_bytes)}: a limit (--max-size, "
            f"or the project file's [gc] max_size) of at least {size(done.after_bytes)} holds "
            "it with what gc may not delete\n")
        return
    if not args.quiet:
        sys.stderr.write(f"jaxcache: gc: freed {size(done.freed_bytes)} "
                         f"({plural(len(done.evicted), 'entry', 'entries')}), "
                         f"{size(done.after_bytes)} left"
                         + (f"; stopped after {GC_DEADLINE_S:g} s, the next run goes on"
                            if done.stopped else "")
                         + (f"; still {size(done.over_by)} over: not gc's to delete "
                            f"(jaxcache gc {safe(path)} --max-size ... says what)"
                            if done.over_by else "") + "\n")


def _used_entries(record: RunRecord) -> frozenset[str]:
    """The entry files the job's processes loaded or wrote: its working set, which gc after
    the job never evicts."""
    from jaxcache.records.run_document import ModuleOutcome

    return frozenset(f"{m.cache_key}-cache" for p in record.processes for m in p.modules
                     if m.cache_key and m.outcome in (ModuleOutcome.HIT, ModuleOutcome.WRITTEN))


def _grown(record: RunRecord) -> None:
    """One line when the job's cache directory has grown large with no limit set."""
    from jaxcache.gc.growth import OPTION, jax_limit, unlimited
    from jaxcache.text import safe

    place = record.cache_dir
    total, entries = place.after.bytes, place.after.entries
    if total is not None and entries is not None:
        held = record.processes[0].options.max_size  # as the job's JAX held it (absent: None)
        limit = jax_limit({**os.environ, **record.env}, {OPTION: held})
        grown = unlimited(total, entries, limit,
                          safe(place.path_given or "PATH"))
        if grown:
            sys.stderr.write(f"jaxcache: {grown}\n")


def _compact_ledger(args: argparse.Namespace) -> None:
    """The origin ledger compacted after the job once it has grown past half what the
    witness writes (one stat otherwise), for at most GC_DEADLINE_S; one line on stderr. Not
    after a sealed job without a local tier: it writes no line there (its entries are signed)."""
    if args.sealed and not args.local:
        return
    from jaxcache.trust.provenance.ledger_place import crowded

    if not crowded():
        return
    import time

    from jaxcache.gc import compaction
    from jaxcache.report.gc import ledger_line

    done = compaction.compact(until_ns=time.monotonic_ns() + int(GC_DEADLINE_S * 1e9))
    if done.problem or not args.quiet:
        sys.stderr.write(f"jaxcache: {ledger_line(done)}\n")


def seal_options_of(args: argparse.Namespace) -> SealOptions | None:
    """--sealed and friends as sealing.SealOptions, or None for an ordinary cache."""
    if not args.sealed:
        if args.signing_key or args.trusted_keys or args.local or args.identity or \
                args.generation:
            common.usage(args, "--signing-key, --identity, --trusted-key, --local and "
                               "--generation need --sealed")
        return None
    if args.generation is not None:
        from jaxcache.seal.generations.manifest import is_pointer, not_a_pointer

        if not is_pointer(args.generation):
            common.usage(args, f"--generation {not_a_pointer(args.generation)}")
        if args.signing_key or args.identity:
            common.usage(args, "--generation reads a published generation: it signs nothing "
                               "(publish one with `jaxcache seal DIR --generation STORE`)")
    if args.signing_key and args.identity:
        common.usage(args, "sign with --signing-key or --identity ci, not both")
    if args.sigstore_config and not args.identity:
        common.usage(args, "--sigstore-config needs --identity ci")
    from jaxcache.lifecycle.seal_spec import SealOptions

    return SealOptions(args.signing_key, tuple(args.trusted_keys or ()), args.local,
                       args.identity, args.sigstore_config,
                       prefetch=args.prefetch,
                       prefetch_from=args.prefetch_from,
                       prefetch_workers=max(1, args.prefetch_workers),
                       prefetch_memory=max(0, args.prefetch_memory) << 20,
                       generation=args.generation)


def _refused_rank(exc: UntrustedCacheError) -> NoReturn:
    """One rank of a multi-rank launch refused its cache: the others may wait for it in
    jax.distributed until they time out, unless the launcher stops the step."""
    from jaxcache.probe import rank_identity as ranks

    me = ranks.detect(dict(os.environ))
    if not me.multi:
        raise exc
    hint = ("run the step with `srun --kill-on-bad-exit=1` so that one refused rank stops "
            "them all" if me.launcher == "slurm" else "stop the job when one rank fails "
            "(e.g. mpirun's default abort on a non-zero exit)")
    sys.stderr.write(f"jaxcache: {exc}\njaxcache: rank {me.rank} of {me.size} ({me.launcher}) "
                     "was refused before JAX saw the directory\n  the other ranks may wait "
                     f"for it until they time out: {hint}\n")
    sys.stderr.flush()
    sys.exit(exc.exit_code)


def _exit_now(status: int) -> NoReturn:
    """Exit without tearing down the interpreter (~7 ms here, after the user's job has ended):
    the record is written and closed; only our own output needs flushing."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:  # None: started with that descriptor closed
            try:  # noqa: SIM105 (contextlib's import costs every `jaxcache run` ~0.5 ms)
                stream.flush()
            except OSError:
                pass
    os._exit(status)
