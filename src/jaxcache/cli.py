"""The `jaxcache` command: parse, call, format, exit. No logic lives here.

Exit codes everywhere: 0 fine, 1 a finding you must act on, 2 usage or input error.

argparse, not click: `jaxcache run -- CMD` must add as little as possible to the start-up of
the user's job, and argparse costs a fraction of click's import time. Each command imports
what it needs when it runs.
"""

from __future__ import annotations

import argparse
import os
import sys

from jaxcache import __version__
from jaxcache.errors import JaxcacheError, UntrustedCacheError

FORMATS = ("text", "json", "sarif")
TEXT_JSON = ("text", "json")

OVERVIEW = """\
Use JAX's persistent compilation cache safely, and know what it buys you.

Every cache entry is a compiled executable that JAX loads unchecked: whoever can write the
cache directory, or replace it through any parent, decides what your process runs.
Start with the trust boundary:

  jaxcache init                 make a private cache directory and print how to use it
  jaxcache audit PATH           who can change what JAX loads from PATH, and why
  jaxcache ls PATH              inventory of the entries in a cache directory
  jaxcache run -- CMD...        run a job with the cache on and record what JAX did
  jaxcache bench -- CMD...      cold vs warm in separate processes: what the cache buys
  jaxcache explain REC...       why modules were or were not cached, and cross-run misses
  jaxcache net [--pid P]        JAX's network services: a trust boundary of their own
  jaxcache decide PATH ...      share the cache? writers, compatibility, saving
  jaxcache records [ACTION]     the run records kept: list, prune, stats

A sealed cache (docs/sealed-cache.md): entries signed, loaded only if a trusted key signed them:

  jaxcache keygen KEYFILE       an Ed25519 signing key; prints the public key to trust
  jaxcache seal DIR --key K     sign the entries of a directory you trust
  jaxcache verify DIR           valid / unsigned / bad signature / unknown key, per entry
  jaxcache run --sealed ...     run a job that loads only signed entries (and signs with a key)

Exit codes: 0 fine, 1 a finding you must act on, 2 usage or input error.
Verdicts are in colour on a terminal: NO_COLOR=1 or --color never turns it off.
"""


def _fail(message: str, code: int = 2) -> None:
    sys.stderr.write(f"jaxcache: {message}\n")
    sys.stderr.flush()
    sys.exit(code)


def _emit(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _usage(args: argparse.Namespace, message: str) -> None:
    """A usage error in the command's own terms: its usage line, the message, exit 2."""
    args.parser.error(message)


def _user_command(before: list[str], after: list[str] | None) -> list[str]:
    """The user's command: words given without `--` (they start at the first one that is not
    our option), then what followed `--`, verbatim (a later `--` is theirs)."""
    if after is None:
        return list(before)
    return [*before, "--", *after] if before else list(after)


def init(args: argparse.Namespace, tail: None) -> None:
    """Create a private cache directory (mode 0700), or accept one that already is private.

    Without PATH it uses ~/.cache/jaxcache/NAME (your platform's cache dir). Every missing
    component is created 0700 without races; every parent is audited. An existing directory is
    never modified: if it is not private you get the findings, and nothing changes.
    """
    import json
    import shlex

    from jaxcache.report import json as jsonfmt
    from jaxcache.report import text
    from jaxcache.trust import create, policy
    from jaxcache.trust.principals import Accounts

    target = args.path if args.path is not None else create.default_dir(args.name)
    result = create.init(target, policy=policy.load(args.policy_path, Accounts()))
    if args.fmt == "json":
        doc = {"schema": "jaxcache.init/1", "path": result.path, "ok": result.ok,
               "created": list(result.created), "refused": result.refused,
               "audit": jsonfmt.audit_dict(result.report)}
        _emit(json.dumps(doc, indent=2) + "\n")
        sys.exit(0 if result.ok else 1)
    if not result.ok:
        _emit(text.render_audit(result.report))
        _fail(f"not using {result.path}: {result.refused}; nothing was changed", 1)
    what = "created" if result.created else "already private:"
    quoted = shlex.quote(result.path)
    _emit(f"{what} {result.path} (mode 0700, verdict {result.report.verdict.value})\n\n"
          "Enable it before JAX compiles anything. In the shell that starts the job:\n"
          f"  export JAX_COMPILATION_CACHE_DIR={quoted}\n"
          "or in Python, right after `import jax`:\n"
          f"  jax.config.update(\"jax_compilation_cache_dir\", {json.dumps(result.path)})\n")


def audit(args: argparse.Namespace, tail: None) -> None:
    """Who can change what JAX loads from PATH, through which path, on which filesystem.

    PATH is read as JAX reads it: '~' is not expanded, a relative path is relative to the
    current directory, a path that does not exist yet is judged by its nearest existing
    ancestor, and URLs (gs://...) are UNVERIFIABLE.

    Verdicts:
      PRIVATE           only you and root can create, replace or rename entries or any parent
      SHARED-BY-POLICY  extra writers exist and your policy declares every one trusted
      SEALED            (with --sealed) others may write, but the reader loads only entries
                        signed by trusted keys whose holders are declared writers
      UNSAFE            undeclared writers; each shown with its chain of reasons
      UNVERIFIABLE      network filesystem, URL, unreadable parent... fails closed
    Exit code 0 for PRIVATE / SHARED-BY-POLICY / SEALED, 1 for UNSAFE / UNVERIFIABLE (and, with
    --must-exist, for a path that does not exist), 2 for bad input.
    """
    from jaxcache import api

    report = api.audit(args.path, policy=args.policy_path, as_user=args.as_user,
                       scan_processes=not args.no_processes,
                       scan_handles=not args.no_processes, sealed=args.sealed,
                       sealed_keys=_public_keys(args))
    if args.fmt == "json":
        from jaxcache.report import json as out
        _emit(out.render_audit(report))
    elif args.fmt == "sarif":
        from jaxcache.report import sarif
        _emit(sarif.render_audit(report))
    else:
        from jaxcache.report import text
        _emit(text.render_audit(report, verbose=args.verbose))
    missing = bool(report.missing) and not any(f.code == "path.unreadable"
                                               for f in report.findings)
    if missing and args.must_exist:
        _fail(f"{report.resolved or report.requested} does not exist (--must-exist)", 1)
    sys.exit(0 if report.verdict.ok else 1)


def ls_command(args: argparse.Namespace, tail: None) -> None:
    """Inventory of a cache directory: module, size, owner, mode, age, links and flags.

    Flags mark what JAX would not have made: entries owned by other users, group- or
    other-writable entries, hard links, symlinks, non-regular files, ACLs, unexpected names.
    Exit code 1 when any entry is flagged beyond an unexpected name.
    """
    if "://" in args.path:
        _ls_bucket(args)
    from jaxcache.trust import listing

    inv, resolved = listing.list_dir(args.path)
    if args.fmt == "json":
        from jaxcache.report import json as out
        _emit(out.render_ls(resolved, inv))
    else:
        from jaxcache.report import text
        _emit(text.render_ls(resolved, inv))
    sys.exit(1 if listing.needs_attention(inv) else 0)


def _ls_bucket(args: argparse.Namespace) -> None:
    """`ls gs://bucket/prefix`: its entries and whether a signature object sits beside each
    (`verify` checks them). Exit 1 when an entry has none."""
    from jaxcache.seal import bucket_scan, objects

    found = bucket_scan.listing(objects.open_store(objects.parse(args.path)))
    if args.fmt == "json":
        from jaxcache.report import bucket_ls_json as out
    else:
        from jaxcache.report import bucket_ls_text as out
    _emit(out.render(found))
    sys.exit(1 if bucket_scan.unsigned(found) else 0)


def run(args: argparse.Namespace, tail: list[str] | None) -> None:
    """Run a JAX job unmodified, with the cache enabled and a probe that records what JAX did.

      jaxcache run -- python train.py --epochs 1
      jaxcache run --cache-dir /srv/jax-cache --record run.json -- ./job.sh

    The cache directory is audited first and refused unless PRIVATE or SHARED-BY-POLICY. The
    probe (a sitecustomize that chains yours) does not import jax before your program does and
    does not touch its output. After the program ends a summary goes to stderr: modules
    compiled, hits, written, skipped and why, seconds compiling vs loading.

    Exit code: the program's own (128+N if killed by signal N); 127 command not found, 126
    not executable; 1 cache refused, or a program that exited 0 after pointing JAX at another
    directory (refused by jaxcache, or not PRIVATE/SHARED-BY-POLICY by its own audit); 2 usage
    or input error, or a record that could not be written after a program that succeeded.
    """
    argv = _user_command(args.command, tail)
    if not argv:
        _usage(args, "no command to run: jaxcache run [OPTIONS] -- CMD [ARGS...]")
    from jaxcache import run as runmod

    try:
        result = runmod.run_job(argv, cache_dir=args.cache_dir, record_path=args.record_path,
                                policy=args.policy_path, allow_untrusted=args.allow_untrusted,
                                seal=_seal_options_of(args), unverified_jax=args.unverified_jax)
    except UntrustedCacheError as exc:
        _refused_rank(exc)
    if not args.quiet:
        from jaxcache.report import run_text

        sys.stderr.write(run_text.render(result.record, result.record_error and
                                         f"NOT WRITTEN ({result.record_error})"
                                         or result.record_path))
    if result.record_error:  # the job's own status if it failed, else 2: never silent
        sys.stderr.write(f"jaxcache: {result.record_error}\n")
        _exit_now(result.outcome.status or 2)
    unverified = result.record.get("unverified")
    if unverified and not args.unverified_jax:
        sys.stderr.write(f"jaxcache: {unverified}. {runmod.UNVERIFIED_REMEDY}\n")
    elif result.exit_code != result.outcome.status:
        from jaxcache import used_dirs

        why = ("JAX was pointed at a cache directory jaxcache did not audit (see the record's "
               "jax_cache_dirs)" if used_dirs.failing(result.record) else
               "a rank of the job saw another cache directory, or none (see the record's "
               "ranks)")
        sys.stderr.write(f"jaxcache: exit 1: {why}\n")
    _exit_now(result.exit_code)


def _refused_rank(exc: UntrustedCacheError) -> None:
    """One rank of a multi-rank launch refused its cache: the others may wait for it in
    jax.distributed until they time out, unless the launcher stops the step."""
    from jaxcache import ranks

    me = ranks.detect(dict(os.environ))
    if not me.multi:
        raise exc
    hint = ("run the step with `srun --kill-on-bad-exit=1` so that one refused rank stops "
            "them all" if me.launcher == "slurm" else "stop the job when one rank fails "
            "(e.g. mpirun's default abort on a non-zero exit)")
    sys.stderr.write(f"jaxcache: {exc}\njaxcache: rank {me.rank} of {me.size} ({me.launcher}) "
                     "was refused before JAX saw the directory; the other ranks may wait for "
                     f"it until they time out: {hint}\n")
    sys.stderr.flush()
    sys.exit(exc.exit_code)


def _exit_now(status: int) -> None:
    """Exit without tearing down the interpreter (~7 ms here, after the user's job has ended):
    the record is written and closed; only our own output needs flushing."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def bench(args: argparse.Namespace, tail: list[str] | None) -> None:
    """Measure what the cache buys: cold versus warm, each in its own process.

      jaxcache bench -- python train.py
      jaxcache bench -t 3 -k 2 --out bench-out -- python examples/mlp.py
      jaxcache bench --compare before.json after.json

    Each trial makes a fresh private cache, runs the job once cold and K times warm against
    it, and checks the cache really filled and was hit. Per process it reports import jax,
    trace, lower, compile-or-load and the rest from inside (the probe of `jaxcache run`), and
    wall, CPU and memory from outside. The saving per start comes with an exact
    distribution-free interval over trials, the independent unit (two-sample Hodges-Lehmann /
    exact Mann-Whitney; 4 trials, 8 processes, are the fewest for 95%). JAX's thresholds are never
    lowered unless you ask, and always reported.

    Outputs (--json, --report, --plot, --out): each target is created before the first trial,
    so an unwritable one, or a file that is not a jaxcache document of yours, fails at once
    (exit 2); a bench that fails removes the empty files it created, an interrupted one writes
    what finished. A jaxcache document of the same kind that you own is replaced atomically.

    Verdicts, on the saving's interval (the rule decide applies too): saves (noticeable: the
    lower bound >= the larger of --min-saving and --min-fraction of the cold start-up),
    too-small (the whole interval is below that), inconclusive (the interval straddles it, or
    too few trials for an interval: run more, -t N), nothing-cached, warm-missed.

    Exit code: 0 saves; 1 too-small, inconclusive, nothing-cached or warm-missed; 2 usage
    error, a target that cannot be written, or a run that failed or timed out; 130
    interrupted (the runs that finished are still reported).
    """
    argv = _user_command(args.command, tail)
    if args.compare:
        if argv:
            _usage(args, "--compare takes two JSON files and no command")
        from jaxcache.bench import command as benchcmd

        _emit(benchcmd.compare(*args.compare))
        sys.exit(0)
    if not argv:
        _usage(args, "no command to bench: jaxcache bench [OPTIONS] -- CMD [ARGS...]")
    from jaxcache.bench import command as benchcmd

    code = benchcmd.run(
        argv, trials=args.trials, warm=args.warm, prime=not args.no_prime,
        timeout=args.timeout, confidence=args.confidence, noise_s=args.noise_s,
        max_trials=args.max_trials, target_width=args.target_width,
        time_budget=args.time_budget, min_compile_time=args.min_compile_time,
        min_entry_size=args.min_entry_size, workdir=args.workdir, out_dir=args.out_dir,
        report_path=args.report_path, json_path=args.json_path, plot_path=args.plot_path,
        echo=_emit, sealed=args.sealed, bucket=args.bucket, min_saving=args.min_saving,
        min_fraction=args.min_fraction)
    sys.exit(code)


def explain(args: argparse.Namespace, tail: list[str] | None) -> None:
    """Why modules were or were not cached, and why a later process missed.

      jaxcache explain cold.json warm.json     run records from `jaxcache run --record`
      jaxcache explain runs/                   a directory: every record in it (one per rank)
      jaxcache explain -- python train.py      run the job twice (fresh private cache) and explain

    For each compiled module: input shapes, compile seconds, entry size, outcome and the rule
    that applied (thresholds with both numbers, not process 0, host callbacks, cache disabled
    or set too late, a corrupt entry blocking its key...). Across records it names the cache-key
    component that changed and its likely cause. It suggests lowering a threshold only when
    what it leaves out is material (>= 10% of start-up and >= 1 s).

    Exit code: 0 everything that could be cached was; 1 something expensive was not cached;
    2 bad input (missing, malformed or newer-schema records).
    """
    if tail is not None and args.records:
        _usage(args, "give either record files or -- CMD, not both")
    if tail is not None and not tail:
        _usage(args, "no command after --")
    if tail is None and not args.records:
        _usage(args, "give run records (from jaxcache run --record) or -- CMD")
    from jaxcache import explain as explainmod

    if tail is not None:
        records = explainmod.run_twice(tail)
    else:
        from jaxcache import record as recordmod

        records = recordmod.load_all(args.records)
    for path, doc in records:
        if doc.get("unverified") and not args.unverified_jax:
            from jaxcache.display import safe

            raise JaxcacheError(f"{safe(path)}: {doc['unverified']}. Pass --unverified-jax to "
                                "explain it anyway, marked unverified")
    result = explainmod.explain_records(records)
    if args.fmt == "json":
        from jaxcache.report import explain_json
        _emit(explain_json.render(result))
    else:
        from jaxcache.report import explain_text
        _emit(explain_text.render(result))
    sys.exit(result.exit_code)


def decide(args: argparse.Namespace, tail: list[str] | None) -> None:
    """Should this cache be shared? Three tests, each shown with its evidence.

      jaxcache decide /srv/jax-cache --bench bench.json
      jaxcache decide /srv/jax-cache --user alice -- python train.py

      1. writers understood: audit PRIVATE, SHARED-BY-POLICY with every writer declared, or
         SEALED (only entries signed by declared key holders are loaded)
      2. compatible jobs: same key inputs (jaxlib, platform, devices, XLA flags, path) and
         warm runs that really hit
      3. noticeable saving: the interval's lower bound >= the larger of --min-saving and
         --min-fraction of the cold start-up (the same rule as bench's verdict)
    Decisions: SHARE, PRIVATE (separate directories per user or team), NOT-WORTH-IT (too small,
    or nothing measured), INCONCLUSIVE (the interval straddles the bar or the trials are too
    few: bench again with more trials), BLOCKED (uncontrolled or unverifiable writers: no
    saving justifies it). Exit code 0 for SHARE or PRIVATE, 1 for NOT-WORTH-IT, INCONCLUSIVE
    or BLOCKED (a CI gate never passes on an undecided saving), 2 for bad input.
    """

    from jaxcache import decide as decidemod

    command = tail or []
    rest = args.paths
    if len(rest) > 1:
        _usage(args, "give at most one PATH (then -- CMD to bench)")
    if args.audit_path and rest:
        _usage(args, "give PATH or --audit, not both")
    if args.audit_path:
        from jaxcache.documents import load_audit

        audit = load_audit(args.audit_path)
    elif rest:
        from jaxcache import api
        from jaxcache.report import json as auditjson

        audit = auditjson.audit_dict(api.audit(rest[0], policy=args.policy_path,
                                               as_user=args.as_user, sealed=args.sealed,
                                               sealed_keys=_public_keys(args)))
    else:
        _usage(args, "give the cache PATH (or --audit A.json)")
    from jaxcache.bench import command as benchcmd

    benches = [benchcmd.load_result(p) for p in args.bench_paths or ()]
    writers_ok = audit.get("verdict") in ("PRIVATE", "SHARED-BY-POLICY", "SEALED")
    if writers_ok and command:  # a sealed reader pays for verification: bench it sealed
        benches.append(benchcmd.measure(command, trials=args.trials, warm=args.warm,
                                        echo=sys.stderr.write,
                                        sealed=audit.get("verdict") == "SEALED",
                                        min_saving=args.min_saving,
                                        min_fraction=args.min_fraction))
    if writers_ok and not benches:
        _usage(args, "the writers are understood; to judge the saving give --bench B.json "
                     "or -- CMD")
    result = decidemod.decide(audit, benches, min_saving_s=args.min_saving,
                              min_fraction=args.min_fraction)
    if args.fmt == "json":
        from jaxcache.report import decide_json
        _emit(decide_json.render(result))
    else:
        from jaxcache.report import decide_text
        _emit(decide_text.render(result))
    sys.exit(result.exit_code)


def net(args: argparse.Namespace, tail: None) -> None:
    """JAX's network services: who can reach them. Cache permissions do not cover this.

      jaxcache net                      what jax.distributed would expose from this environment
      jaxcache net --pid 4242           listening sockets of a running JAX process
      jaxcache net --live               every JAX process you can see

    On JAX <= 0.10.2 process 0 binds the coordination service to [::]:<port> (every interface)
    unless JAX_COORDINATOR_BIND_ADDRESS says otherwise, with no authentication or encryption;
    jax.profiler.start_server listens on every interface too. The static check follows JAX's
    own auto-detection (JAX_COORDINATOR_ADDRESS, Slurm, Open MPI, Kubernetes, Cloud TPU,
    JAX_COORDINATOR_PORT).

    --pid P must be a JAX process (one that loaded jaxlib). --live looks at every process;
    one it cannot inspect (another user's, when you are not root) might be a JAX service, so
    the answer is UNVERIFIABLE (exit 1, naming how many processes of which users) unless you
    pass --partial, which accepts an answer about the processes you can see and says so.

    Exit code: 1 when a JAX service is (or will be) reachable beyond loopback without
    authentication, or --live could not inspect every process (without --partial); 0 when
    everything is loopback-only or protected by mTLS; 2 bad input (no such PID, not a JAX
    process, not permitted to inspect it).
    """
    from jaxcache import jaxcompat
    from jaxcache.net import assess, config, sockets

    pids = args.pids or []
    version = jaxcompat.installed_version("jax")
    env = dict(os.environ)
    plan = config.plan(env, version) if (args.static or not (pids or args.live)) else None
    scan = None
    if pids or args.live:
        supported = config.plan(env, version).mtls_supported
        scan = sockets.scan(list(pids) if pids else None, jax_version_ok_for_mtls=supported,
                            partial=args.partial)
    elif args.partial:
        _usage(args, "--partial goes with --live")
    report = assess.assess(plan, scan, env)
    if args.fmt == "json":
        from jaxcache.report import net_json
        _emit(net_json.render(report))
    elif args.fmt == "sarif":
        from jaxcache.report import sarif
        _emit(sarif.render_findings(report.findings, {"exposed": report.exposed},
                                    files=False))
    else:
        from jaxcache.report import net_text
        _emit(net_text.render(report))
    sys.exit(report.exit_code)


def demo(args: argparse.Namespace, tail: None) -> None:
    """The whole story on the bundled example: trust first, then what the cache buys.

    Makes a new private directory DIR/jaxcache-demo-N (--out DIR; N is the first number
    free, the folder is made with mkdir so it never existed), audits it and a deliberately
    unsafe one, then benches examples/mlp.py cold vs warm into it, explains it and decides. It
    writes nowhere else (besides temporary folders of its own) and deletes nothing it did not
    make. About a minute on 2 cores.
    """
    from jaxcache import demo as demomod

    sys.exit(demomod.run(out_dir=args.out_dir, trials=args.trials, warm=args.warm, echo=_emit))


def keygen(args: argparse.Namespace, tail: None) -> None:
    """Create an Ed25519 signing key for a sealed cache, and print its public key.

      jaxcache keygen /etc/jaxcache/ci.key

    The private key is written 0600 (never over an existing file, never inside a cache
    directory), the public key beside it as KEYFILE.pub. Readers trust the public key in their
    policy: trusted_keys = [{ holder = "ci-publisher", key = "ed25519:..." }] for the cache's
    path. See docs/sealed-cache.md.
    """
    from jaxcache.seal import keys

    key = keys.generate()
    path = keys.save(key, args.keyfile)
    _emit(f"wrote {path} (private, mode 0600) and {path}.pub\n"
          f"public key: {key.public.text}\n"
          f"key id:     {key.public.id}\n")


def _scan_output(result, action: str, fmt: str) -> None:
    if fmt == "json":
        from jaxcache.report import seal_json
        _emit(seal_json.render(result, action))
    else:
        from jaxcache.report import seal_text
        _emit(seal_text.render(result, action))
    sys.exit(0 if result.ok else 1)


def verify(args: argparse.Namespace, tail: None) -> None:
    """Check every entry of a sealed cache: valid, unsigned, bad signature, unknown key.

      jaxcache verify /shared/jax-cache
      jaxcache verify /shared/jax-cache --trusted-key ci.key.pub --format json

    Entries are read exactly as a sealed reader reads them (directory fd, no symlinks, one
    read), so "valid" means a sealed reader trusting these keys loads it. Trusted keys: every
    --trusted-key, plus the policy's trusted_keys for DIR. Nothing is changed.

    Entries a sealed reader would never hit (made with XLA's sub-caches on: another cache key)
    are named with why; they do not change the exit code.

    Exit code: 0 every entry is valid; 1 any is not; 2 bad input.
    """
    from jaxcache import sealing

    _scan_output(sealing.verify_dir(args.dir, tuple(args.trusted_keys or ()),
                                    args.policy_path), "verify", args.fmt)


def seal(args: argparse.Namespace, tail: None) -> None:
    """Sign the unsigned entries of a cache directory you trust (e.g. one CI just filled).

      jaxcache seal ci-cache/ --key /etc/jaxcache/ci.key

    Refused unless DIR's audit is PRIVATE or SHARED-BY-POLICY: sealing vouches for whatever
    any writer put there. Entries whose signature does not verify are reported, never
    replaced (that would delete a file). Entries a sealed reader would never hit (made with
    XLA's sub-caches on, which sealed readers turn off: another cache key) are left unsigned
    and reported, each with why, unless --allow-unhittable.

    Exit code: 0 every entry is now valid; 1 some are not, or some would never be hit
    (without --allow-unhittable); 2 bad input.
    """
    from jaxcache import sealing

    if "://" in args.dir:
        _scan_output(sealing.seal_bucket(args.dir, args.key, tuple(args.trusted_keys or ()),
                                         args.trust_bucket_writers, args.allow_unhittable),
                     "seal", args.fmt)
    if args.trust_bucket_writers:
        _usage(args, "--trust-bucket-writers is for gs:// prefixes only")
    _scan_output(sealing.seal_dir(args.dir, args.key, tuple(args.trusted_keys or ()),
                                  args.policy_path, args.allow_unhittable), "seal", args.fmt)


def records(args: argparse.Namespace, tail: None) -> None:
    """The run records in your state dir: list them, prune them, add them up.

      jaxcache records                          list, newest first (same as `records list`)
      jaxcache records prune --older-than 30    delete records made more than 30 days ago
      jaxcache records prune --keep 100 --dry-run
      jaxcache records stats                    cumulative, like `ccache -s`

    `jaxcache run` writes one record per run (and `explain -- CMD` two) into
    ~/.local/state/jaxcache/runs/. Only files named as jaxcache names them that also parse as
    run records are listed, counted or deleted; anything else there is left alone and named.
    Nothing follows a symlink: files are opened and deleted relative to the directory's
    descriptor. With --older-than and --keep together, prune deletes only records that are
    both old and beyond the newest N. stats' saving is an estimate: per hit, the compile time
    another record measured for the same cache key, minus the hit's load time.

    Exit code: 0 done (also when there is nothing to list or delete); 2 bad input (nothing is
    changed).
    """
    from jaxcache.records import store

    action = args.action or "list"
    pruning = args.older_than is not None or args.keep is not None or args.dry_run
    if action != "prune" and pruning:
        _usage(args, "--older-than, --keep and --dry-run go with `records prune`")
    if action == "prune" and args.older_than is None and args.keep is None:
        _usage(args, "records prune needs --older-than DAYS and/or --keep N")
    directory = args.records_dir if args.records_dir is not None else store.runs_dir()
    from jaxcache.report import records_json, records_text

    fmt = records_json if args.fmt == "json" else records_text
    if action == "prune":
        from jaxcache.records import prune

        _emit(fmt.render_prune(prune.prune(directory, older_than_days=args.older_than,
                                           keep=args.keep, dry_run=args.dry_run)))
    elif action == "stats":
        from jaxcache.records import stats

        _emit(fmt.render_stats(stats.compute(store.scan(directory))))
    else:
        _emit(fmt.render_list(store.scan(directory)))


def _public_keys(args: argparse.Namespace) -> tuple:
    """--trusted-key values (with --sealed) as public keys."""
    if args.trusted_keys and not args.sealed:
        _usage(args, "--trusted-key needs --sealed")
    if not args.trusted_keys:
        return ()
    from jaxcache.seal.keys import load_public

    return tuple(load_public(k) for k in args.trusted_keys)


def _seal_options_of(args: argparse.Namespace):
    """--sealed and friends as sealing.SealOptions, or None for an ordinary cache."""
    if not args.sealed:
        if args.signing_key or args.trusted_keys or args.local:
            _usage(args, "--signing-key, --trusted-key and --local need --sealed")
        return None
    from jaxcache.sealing import SealOptions

    return SealOptions(args.signing_key, tuple(args.trusted_keys or ()), args.local)


# --- the parser ------------------------------------------------------------------------------

class _Range:
    """A number within bounds; out of range is a usage error naming the bounds (exit 2)."""

    def __init__(self, kind: type, lo: float | None = None, hi: float | None = None) -> None:
        self.kind, self.lo, self.hi = kind, lo, hi

    def __str__(self) -> str:
        if self.hi is None:
            return f"x>={self.lo}"
        return f"{self.lo}<=x<={self.hi}" if self.lo is not None else f"x<={self.hi}"

    def __call__(self, text: str) -> float:
        try:
            value = self.kind(text)
        except ValueError:
            value = None
        if value is None or value != value:  # not a number, or NaN
            noun = "an integer" if self.kind is int else "a number"
            raise argparse.ArgumentTypeError(f"{text!r} is not {noun}")
        if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
            raise argparse.ArgumentTypeError(f"{text} is not in the range {self}")
        return value


class _Help(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written, so their example blocks keep their layout; option help is
    wrapped to the terminal, at most 100 columns."""

    def __init__(self, prog: str) -> None:
        import shutil

        width = max(min(shutil.get_terminal_size().columns, 100) - 2, 50)
        super().__init__(prog, max_help_position=30, width=width)


def _option(parser: argparse.ArgumentParser, *names: str, help: str = "",
            show_default: bool = False, **kwargs) -> None:
    """add_argument, with the default and any range shown after the help (`[default: 6;
    1<=x<=1000]`); `%` in help must be written `%%`."""
    notes = ["default: %(default)s"] if show_default else []
    if isinstance(kwargs.get("type"), _Range):
        notes.append(str(kwargs["type"]))
    if notes:
        help = f"{help}  [{'; '.join(notes)}]" if help else f"[{'; '.join(notes)}]"
    parser.add_argument(*names, help=help or None, **kwargs)


def _command(commands, handler, name: str, usage: str) -> argparse.ArgumentParser:
    doc = handler.__doc__ or ""
    first, _, rest = doc.partition("\n")
    lines = rest.splitlines()
    indent = min((len(line) - len(line.lstrip()) for line in lines if line.strip()), default=0)
    description = "\n".join([first, *(line[indent:] for line in lines)]).strip()
    parser = commands.add_parser(name, prog=f"jaxcache {name}", usage=f"%(prog)s {usage}",
                                 help=first.strip(), description=description,
                                 formatter_class=_Help, add_help=False, allow_abbrev=False)
    parser.add_argument("-h", "--help", action="help", help="Show this message and exit.")
    _option(parser, "--color", choices=("auto", "always", "never"), default="auto",
            show_default=True, help="Verdicts in colour: auto is on a terminal unless NO_COLOR "
            "is set.")
    parser.set_defaults(handler=handler, parser=parser)
    return parser



def _init_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", nargs="?", metavar="PATH")
    _option(p, "--name", default="jax", show_default=True, metavar="NAME",
            help="Sub-directory under your cache dir, when PATH is not given.")
    _option(p, "--policy", dest="policy_path", metavar="FILE",
            help="Trust policy (TOML); default: your config dir's jaxcache/policy.toml.")
    _option(p, "--format", dest="fmt", choices=TEXT_JSON, default="text", show_default=True)


def _audit_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", metavar="PATH")
    _option(p, "--policy", dest="policy_path", metavar="FILE",
            help="Trust policy (TOML); default: your config dir's jaxcache/policy.toml. "
                 "Never read from inside the audited tree.")
    _option(p, "--format", dest="fmt", choices=FORMATS, default="text", show_default=True)
    _option(p, "--user", dest="as_user", metavar="NAME",
            help="Judge for this user (who besides NAME and root can write). Default: you.")
    _option(p, "--no-processes", action="store_true",
            help="Skip the scan for other processes using it (and for write handles "
                 "other users' processes hold on it).")
    _option(p, "-v", "--verbose", action="store_true",
            help="Also list trusted writers and notes.")
    _option(p, "--must-exist", action="store_true",
            help="Exit 1 when PATH does not exist (a typo in a CI gate), whatever the verdict "
                 "its nearest existing ancestor gets.")
    _sealed_reader_options(p)


def _sealed_reader_options(p: argparse.ArgumentParser) -> None:
    _option(p, "--sealed", action="store_true",
            help="Judge for a sealed reader (run --sealed, enable(sealed=True)): one that loads "
                 "only entries signed by the policy's trusted_keys for this path or "
                 "--trusted-key. Only then can the verdict be SEALED.")
    _option(p, "--trusted-key", dest="trusted_keys", action="append", metavar="KEY",
            help="With --sealed: a public key the reader trusts (ed25519:... or a .pub file; "
                 "repeatable).")


def _ls_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", metavar="PATH")
    _option(p, "--format", dest="fmt", choices=TEXT_JSON, default="text", show_default=True)


def _run_options(p: argparse.ArgumentParser) -> None:
    # REMAINDER: the command starts at the first word that is not our option; from there on
    # nothing is ours (`jaxcache run python x.py --help` passes --help to x.py).
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="CMD",
                   help="The program and its arguments, passed on verbatim.")
    _option(p, "--cache-dir", metavar="DIR",
            help="Cache directory (default: $JAX_COMPILATION_CACHE_DIR, else the one "
                 "`jaxcache init` makes). Audited first; created private if missing.")
    _option(p, "--record", dest="record_path", metavar="FILE",
            help="Where to write the run record (JSON). Default: a new file under your "
                 "state dir (~/.local/state/jaxcache/runs/). Fields {rank}, {host}, {pid} are "
                 "filled in; under a launcher that started several ranks (srun, mpirun) "
                 "each rank writes FILE.rank<N>.json unless {rank} or {pid} is given.")
    _option(p, "--policy", dest="policy_path", metavar="FILE", help="Trust policy (TOML).")
    _option(p, "--allow-untrusted", action="store_true",
            help="Run even if the audit says UNSAFE or UNVERIFIABLE. Anyone who can write "
                 "the cache can then choose the code your job runs.")
    _option(p, "-q", "--quiet", action="store_true",
            help="No summary; only the record is written.")
    _unverified_option(p)
    _sealed_options(p)


def _unverified_option(p: argparse.ArgumentParser) -> None:
    _option(p, "--unverified-jax", action="store_true",
            help="Record a job whose JAX is outside the supported lines (0.5 to 0.10) "
                 "instead of refusing it (exit 2); the record and every report say "
                 "'unverified'. Never with --sealed.")


def _sealed_options(p: argparse.ArgumentParser) -> None:
    _option(p, "--sealed", action="store_true",
            help="Load only entries signed by a trusted key (docs/sealed-cache.md); others "
                 "may then write the directory. The job must be able to import jaxcache.")
    _option(p, "--signing-key", metavar="KEYFILE",
            help="With --sealed: sign what the job writes (from `jaxcache keygen`). Without "
                 "it the job writes nothing to the sealed directory.")
    _option(p, "--trusted-key", dest="trusted_keys", action="append", metavar="KEY",
            help="With --sealed: trust this public key (ed25519:... or a .pub file; "
                 "repeatable), besides the policy's trusted_keys for the directory.")
    _option(p, "--local", metavar="DIR",
            help="With --sealed: a private directory read first and written instead (tiers).")


def _keygen_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("keyfile", metavar="KEYFILE", help="Where to write the private key.")


def _scan_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", metavar="DIR")
    _option(p, "--trusted-key", dest="trusted_keys", action="append", metavar="KEY",
            help="A trusted public key (ed25519:... or a .pub file; repeatable).")
    _option(p, "--policy", dest="policy_path", metavar="FILE",
            help="Trust policy (TOML) whose trusted_keys for DIR count too.")
    _option(p, "--format", dest="fmt", choices=TEXT_JSON, default="text", show_default=True)


def _seal_options(p: argparse.ArgumentParser) -> None:
    _scan_options(p)
    _option(p, "--key", required=True, metavar="KEYFILE",
            help="The signing key (from `jaxcache keygen`).")
    _option(p, "--trust-bucket-writers", action="store_true",
            help="For gs://: you checked by hand that only your publisher can write there "
                 "(jaxcache cannot read a bucket's IAM); sealing vouches for every entry.")
    _option(p, "--allow-unhittable", action="store_true",
            help="Sign entries a sealed reader would never hit (made with XLA's sub-caches on) "
                 "instead of leaving them unsigned and exiting 1; each is still reported.")


def _bench_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="CMD",
                   help="The program and its arguments, passed on verbatim.")
    _option(p, "-t", "--trials", type=_Range(int, 1, 1000), default=5, show_default=True,
            metavar="N",
            help="Trials: each a fresh private cache, one cold process, then the warm ones. "
                 "The trial is the unit of the statistics: 4 is the fewest for a 95%% "
                 "interval.")
    _option(p, "-k", "--warm", type=_Range(int, 1, 100), default=1, show_default=True,
            metavar="N",
            help="Warm processes per trial (their median is compared with the cold run).")
    _option(p, "--no-prime", action="store_true",
            help="Skip the discarded first run that warms the OS file cache.")
    _option(p, "--timeout", type=_Range(float, 0.1), metavar="SECONDS",
            help="Kill a run that takes longer (and stop the bench).")
    _option(p, "--confidence", type=_Range(float, 0.5, 0.999), default=0.95,
            show_default=True, metavar="LEVEL")
    _option(p, "--noise", dest="noise_s", type=_Range(float, 0), default=0.1,
            show_default=True, metavar="SECONDS",
            help="A saving whose interval clears this is 'significant' (then the amortization "
                 "is shown); the verdict is the noticeable test (--min-saving, --min-fraction).")
    _noticeable_options(p)
    _option(p, "--max-trials", type=_Range(int, 1, 1000), metavar="N",
            help="Adaptive: after --trials, keep adding trials up to N until --until-width "
                 "or --time-budget is reached.")
    _option(p, "--until-width", dest="target_width", type=_Range(float, 0), metavar="SECONDS",
            help="Adaptive: stop when the saving's interval is at most this wide.")
    _option(p, "--time-budget", type=_Range(float, 1), metavar="SECONDS",
            help="Adaptive: stop adding trials after this much time.")
    _option(p, "--min-compile-time", type=_Range(float, 0), metavar="SECONDS",
            help="Set jax_persistent_cache_min_compile_time_secs for every run (JAX's "
                 "default 1.0). Reported, and marked when below the default.")
    _option(p, "--min-entry-size", type=_Range(int, -1), metavar="BYTES",
            help="Set jax_persistent_cache_min_entry_size_bytes for every run.")
    _option(p, "--workdir", metavar="DIR",
            help="Keep caches, records and job output here (a private dir you own; "
                 "audited). Default: a private temporary dir, removed afterwards.")
    _option(p, "--out", dest="out_dir", metavar="DIR",
            help="Write report.md, bench.json and chart.png into DIR (created private; an "
                 "existing DIR must be private) and keep runs in DIR/runs.")
    _option(p, "--report", dest="report_path", metavar="FILE.md",
            help="Markdown report. Like every output: created (empty) before the first trial, "
                 "so an unwritable or taken path fails at once; never written over a file "
                 "unless that is a jaxcache document of the same kind of yours (or empty).")
    _option(p, "--json", dest="json_path", metavar="FILE",
            help="Raw samples and results (JSON).")
    _option(p, "--plot", dest="plot_path", metavar="FILE.png",
            help="Chart of the phases, cold vs warm (needs matplotlib).")
    _option(p, "--compare", nargs=2, metavar=("A.json", "B.json"),
            help="Compare two earlier `--json` results instead of running anything.")
    _option(p, "--sealed", action="store_true",
            help="Seal each trial's cache (a throwaway signing key): warm runs pay for "
                 "verification, as a sealed consumer would (docs/sealed-cache.md).")
    _option(p, "--bucket", metavar="gs://BUCKET/PREFIX",
            help="With --sealed: each trial's cache is a new, empty prefix "
                 "PREFIX/jaxcache-bench-RANDOM/trial-N in this bucket (nothing else there is "
                 "touched; jaxcache deletes nothing: remove that prefix when done).")


def _explain_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("records", nargs="*", metavar="RECORD",
                   help="Run records (from jaxcache run --record), or directories of them.")
    _option(p, "--format", dest="fmt", choices=TEXT_JSON, default="text", show_default=True)
    _unverified_option(p)


def _net_options(p: argparse.ArgumentParser) -> None:
    _option(p, "--env", dest="static", action="store_true",
            help="Judge what a job started from this environment would expose (default "
                 "when no --pid/--live is given).")
    _option(p, "--pid", dest="pids", type=int, action="append", metavar="PID",
            help="Inspect the listening sockets of this process (repeatable).")
    _option(p, "--live", action="store_true",
            help="Inspect every JAX process. Fails closed (exit 1) when some process could "
                 "not be inspected (other users', unless you are root), naming whose.")
    _option(p, "--partial", action="store_true",
            help="With --live: accept an answer about the processes you can inspect; the "
                 "report says it is partial and whose processes it leaves out.")
    _option(p, "--format", dest="fmt", choices=FORMATS, default="text", show_default=True)


def _noticeable_options(p: argparse.ArgumentParser, default_note: str = "Default: ") -> None:
    """--min-saving / --min-fraction: the one noticeable bar (bench/noticeable.py) of bench and
    decide."""
    from jaxcache.bench import noticeable

    _option(p, "--min-saving", type=_Range(float, 0), default=None, metavar="SECONDS",
            help="A saving is noticeable when its interval's lower bound reaches this many "
                 f"seconds... {default_note}{noticeable.MIN_SAVING_S:g}.")
    _option(p, "--min-fraction", type=_Range(float, 0, 1), default=None, metavar="FRACTION",
            help="...and this share of the cold start-up (wall time). "
                 f"{default_note}{noticeable.MIN_FRACTION:g}.")


def _decide_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="The cache directory (audited now).")
    _option(p, "--audit", dest="audit_path", metavar="A.json",
            help="An earlier `audit --format json`.")
    _option(p, "--bench", dest="bench_paths", action="append", metavar="B.json",
            help="An earlier `bench --json` (repeatable: one per job that would share).")
    _option(p, "--policy", dest="policy_path", metavar="FILE", help="Trust policy (TOML).")
    _option(p, "--user", dest="as_user", metavar="NAME",
            help="Decide for this user (whose processes would trust the cache).")
    _noticeable_options(p, "Default: the bar the bench used (its --json), else ")
    _option(p, "-t", "--trials", type=_Range(int, 1, 100), default=6, show_default=True,
            metavar="N", help="Trials when benching CMD.")
    _option(p, "-k", "--warm", type=_Range(int, 1, 20), default=1, show_default=True,
            metavar="N")
    _option(p, "--format", dest="fmt", choices=TEXT_JSON, default="text", show_default=True)
    _sealed_reader_options(p)


def _records_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", nargs="?", choices=("list", "prune", "stats"), metavar="ACTION",
                   help="list (default), prune or stats.")
    _option(p, "--dir", dest="records_dir", metavar="DIR",
            help="The records directory (default: your state dir's jaxcache/runs).")
    _option(p, "--older-than", type=_Range(float, 0), metavar="DAYS",
            help="prune: records made more than DAYS days ago.")
    _option(p, "--keep", type=_Range(int, 0), metavar="N",
            help="prune: all but the newest N records (with --older-than: only old ones "
                 "beyond the newest N).")
    _option(p, "--dry-run", action="store_true",
            help="prune: say what would be deleted, delete nothing.")
    _option(p, "--format", dest="fmt", choices=TEXT_JSON, default="text", show_default=True)


def _demo_options(p: argparse.ArgumentParser) -> None:
    _option(p, "--out", dest="out_dir", default="demo-output", show_default=True, metavar="DIR",
            help="Where the demo makes its own new folder DIR/jaxcache-demo-N (mkdir, 0700; "
                 "DIR is made if missing): report.md, chart.png, bench.json, runs/. Nothing "
                 "that exists is reused, replaced or deleted.")
    _option(p, "-t", "--trials", type=_Range(int, 1, 100), default=8, show_default=True,
            metavar="N")
    _option(p, "-k", "--warm", type=_Range(int, 1, 20), default=1, show_default=True,
            metavar="N")


# name, handler, usage (after `jaxcache NAME `), options; in the order the overview tells them
COMMANDS = (
    ("init", init, "[OPTIONS] [PATH]", _init_options),
    ("audit", audit, "[OPTIONS] PATH", _audit_options),
    ("ls", ls_command, "[OPTIONS] PATH", _ls_options),
    ("run", run, "[OPTIONS] [--] CMD [ARGS...]", _run_options),
    ("bench", bench, "[OPTIONS] [--] CMD [ARGS...]\n"
                     "       jaxcache bench --compare A.json B.json", _bench_options),
    ("explain", explain, "[OPTIONS] RECORD...\n"
                         "       jaxcache explain [OPTIONS] -- CMD [ARGS...]", _explain_options),
    ("net", net, "[OPTIONS]", _net_options),
    ("decide", decide, "[OPTIONS] (PATH | --audit A.json) [-- CMD [ARGS...]]", _decide_options),
    ("demo", demo, "[OPTIONS]", _demo_options),
    ("keygen", keygen, "KEYFILE", _keygen_options),
    ("seal", seal, "--key KEYFILE [OPTIONS] DIR", _seal_options),
    ("verify", verify, "[OPTIONS] DIR", _scan_options),
    ("records", records, "[list | prune | stats] [OPTIONS]", _records_options),
)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with `only` (a command's name), that command alone: less to build before
    the user's job starts. Help and errors for the whole command line need all of them."""
    top = argparse.ArgumentParser(prog="jaxcache", description=OVERVIEW, formatter_class=_Help,
                                  add_help=False, allow_abbrev=False)
    top.add_argument("--version", action="version", version=f"jaxcache {__version__}",
                     help="Show the version and exit.")
    top.add_argument("-h", "--help", action="help", help="Show this message and exit.")
    commands = top.add_subparsers(title="commands", metavar="COMMAND", dest="name",
                                   required=True)
    for name, handler, usage, options in COMMANDS:
        if only in (None, name):
            options(_command(commands, handler, name, usage))
    return top


RUNS_A_COMMAND = ("run", "bench", "explain", "decide")


def split_command(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """Our arguments, and what followed the first `--` (None without one) for the commands
    that run a command: that part is the user's, verbatim, never parsed as ours. Elsewhere
    `--` keeps argparse's meaning (what follows is positional)."""
    if argv and argv[0] in RUNS_A_COMMAND and "--" in argv:
        cut = argv.index("--")
        return argv[:cut], argv[cut + 1:]
    return argv, None


def main(argv: list[str] | None = None) -> None:
    try:
        ours, tail = split_command(sys.argv[1:] if argv is None else list(argv))
        names = [name for name, *_ in COMMANDS]
        parser = build_parser(only=ours[0] if ours and ours[0] in names else None)
        if not ours:
            parser.print_help(sys.stderr)
            sys.exit(2)
        args, extra = parser.parse_known_args(ours)
        if extra:  # named by the command's parser, not the top level's (argparse's default)
            getattr(args, "parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
        if getattr(args, "color", "auto") != "auto":  # auto costs `run` no import
            from jaxcache.report import style

            style.set_color(args.color)
        args.handler(args, tail)
    except JaxcacheError as exc:
        _fail(str(exc), exc.exit_code)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except OSError as exc:
        _fail(f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else ""))
    except Exception as exc:  # a bug: fail closed with one line, never a verdict
        if os.environ.get("JAXCACHE_DEBUG"):
            raise
        _fail(f"internal error ({type(exc).__name__}: {exc}); nothing was judged. "
              "Set JAXCACHE_DEBUG=1 for the traceback and report it")
    sys.exit(0)
