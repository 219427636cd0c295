"""`jaxcache decide`: share the cache or not, with the evidence for each test."""

from __future__ import annotations

import argparse
import sys

from jaxcache.cli import common
from jaxcache.text import safe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.decide.across import Source


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="The cache directory (audited now).")
    opt = common.option
    opt(p, "--audit", dest="audit_path", metavar="A.json",
        help="An earlier `audit --format json`.")
    opt(p, "--bench", dest="bench_paths", action="append", metavar="B.json",
        help="An earlier `bench --json` (repeatable: one per job that would share). Default: "
             "the last kept bench of a job that used PATH (its run record says so, or "
             "`decide PATH -- CMD` benched it); never another job's.")
    opt(p, "--records", dest="record_paths", nargs="+", action="extend", metavar="DIR",
        help="Run records of the jobs that would share the cache, a folder or file per team "
             "or host (repeatable): the compatible test compares their builds, hosts, "
             "versions, devices, flags and shapes.")
    opt(p, "--policy", dest="policy_path", metavar="FILE", help="Trust policy (TOML).")
    opt(p, "--user", dest="as_user", metavar="NAME",
        help="Decide for this user (whose processes would trust the cache).")
    common.noticeable_flags(p, "Default: the bar the bench used (its --json), else ")
    common.trials_flags(p, " when benching CMD")
    common.threshold_flags(p, "the bench of CMD")
    common.format_flag(p)
    common.sealed_reader_flags(p)


def handle(args: argparse.Namespace, tail: list[str] | None) -> None:
    """Should this cache be shared? Three tests, each shown with its evidence.

      jaxcache decide /srv/jax-cache --bench bench.json
      jaxcache decide /srv/jax-cache --user alice -- python train.py
      jaxcache decide /srv/jax-cache --records team-a/ team-b/ --bench bench.json

      1. writers understood: audit PRIVATE, SHARED-BY-POLICY with every writer declared, or
         SEALED (only entries signed by declared key holders are loaded)
      2. compatible jobs: same key inputs (jaxlib, platform, devices, XLA flags, path) and
         warm runs that really hit; with --records, the jobs of every record run one build on
         one kind of host (a jaxlib digest and CPU features JAX's key leaves out: BLOCKED
         where they differ or are unknown) with the same versions, devices, flags and shapes
      3. noticeable saving: the interval's lower bound >= the larger of --min-saving and
         --min-fraction of the cold start-up (the same rule as bench's verdict)
    Decisions: SHARE, PRIVATE (separate directories per user or team), NOT-WORTH-IT (too small,
    or nothing measured), INCONCLUSIVE (the interval straddles the bar or the trials are too
    few: bench again with more trials), BLOCKED (uncontrolled or unverifiable writers: no
    saving justifies it). Exit code 0 for SHARE or PRIVATE, 1 for NOT-WORTH-IT, INCONCLUSIVE
    or BLOCKED (a CI gate never passes on an undecided saving), 2 for bad input; with -- CMD,
    126 the program is not executable, 127 not found.
    """
    from jaxcache import decide as decidemod
    from jaxcache.decide.facts import AuditFacts, BenchFacts

    command = tail or []
    rest = args.paths
    trusted: frozenset[int] = frozenset()  # whose records --records reads besides yours
    if len(rest) > 1:
        common.usage(args, "give at most one PATH (then -- CMD to bench)")
    if args.audit_path and rest:
        common.usage(args, "give PATH or --audit, not both")
    if args.audit_path:
        from jaxcache.documents.read import load_audit

        audit = AuditFacts.from_json(load_audit(args.audit_path))
    elif rest:
        from jaxcache import api
        from jaxcache.trust.inputs import policy as policymod
        from jaxcache.trust.judgement.origin_findings import trusted_writers
        from jaxcache.trust.kernel.principals import Accounts

        accounts = Accounts()
        pol = policymod.load(args.policy_path, accounts)  # loaded once, for both uses
        report = api.audit(rest[0], policy=pol, as_user=args.as_user, sealed=args.sealed,
                           sealed_keys=common.public_keys(args))
        audit = AuditFacts.of(report)
        # whose run records --records reads as yours: the users the policy trusts to write
        # this cache, as for their ledgers (trusted_ledgers)
        trusted = trusted_writers(pol.declared(report.resolved or report.path or rest[0]),
                                  accounts)
    else:
        common.usage(args, "give the cache PATH (or --audit A.json)")
    from jaxcache.bench.bench_document import BenchDocument
    from jaxcache.cli import bench as benchcmd
    from jaxcache.decide.bench_choice import BenchUsed, How, KeptChoice, pick
    from jaxcache.documents.read import load_bench

    given = [(p, BenchDocument.from_json(load_bench(p))) for p in args.bench_paths or ()]
    benches = [BenchFacts.of(doc) for _, doc in given]
    used = [BenchUsed(How.GIVEN, doc.command, p) for p, doc in given]
    sources = _sources(args, args.record_paths or [], trusted)
    writers_ok = audit.verdict.ok
    kept: KeptChoice | None = None
    if writers_ok and not command and not benches:  # a kept bench of this cache's jobs
        found = pick(audit.shown or "")
        kept = found.kept
        if found.used is not None and found.bench is not None:
            benches.append(BenchFacts.of(found.bench))
            used.append(found.used)
            as_runs = ("measured as the runs on this directory run" if kept.judged_as_runs
                       else "measured otherwise than the runs on this directory: see below")
            folder = kept.judged.cwd if kept.judged is not None else None
            newer = f"; {kept.newer} newer of other jobs not judged" if kept.newer else ""
            common.note(args, f"decide: judging the last bench of a job that used this "
                              f"directory, `{safe(' '.join(found.used.command)) or '?'}`"
                              + (f" in {safe(folder)}" if folder else "") +
                              f" ({safe(found.used.path or '')}), {as_runs}{newer}; --bench "
                              "FILE or -- CMD for another\n")
    if writers_ok and command:  # a sealed reader pays for verification: bench it sealed
        from jaxcache.trust.findings import Verdict

        kept_at, measured = benchcmd.measure(
            command, trials=args.trials, warm=args.warm,
            echo=lambda text: common.note(args, text),
            sealed=audit.verdict is Verdict.SEALED,
            quiet=args.quiet, min_saving=args.min_saving, min_fraction=args.min_fraction,
            thresholds=common.threshold_env(args), for_cache=audit.shown)
        benches.append(BenchFacts.of(measured))
        used.append(BenchUsed(How.RUN, measured.command, kept_at))
    result = decidemod.decide(audit, benches, min_saving_s=args.min_saving,
                              min_fraction=args.min_fraction, records=sources or None,
                              used=tuple(used), kept=kept)
    from jaxcache.report import decide as formats

    shown = formats.FORMATS[args.fmt](result)
    sys.stdout.flush()
    common.finish(args, shown, result.exit_code)


def _sources(args: argparse.Namespace, paths: list[str],
             trusted: frozenset[int] = frozenset()) -> list[Source]:
    """Each --records folder or file, its records read (a bad one named on the command line
    ends it, exit 2; one in a folder is skipped and named on stderr) and their processes;
    `trusted`: owners besides you and root whose records are read (trusted_writers)."""
    import os

    from jaxcache.decide.across import Source
    from jaxcache.records import run_record
    from jaxcache.records.run_document import facts_of

    out = []
    for path in paths:
        skipped: list[tuple[str, str]] = []
        records = run_record.load_all([path], skipped, trusted)
        for where, why in skipped:
            common.note(args, f"jaxcache: skipped {safe(os.path.basename(where))}: {why}\n")
        out.append(Source(path, tuple(facts_of(records))))
    return out
