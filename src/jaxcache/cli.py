"""The `jaxcache` command: parse, call, format, exit. No logic lives here.

Exit codes everywhere: 0 fine, 1 a finding you must act on, 2 usage or input error.
"""

from __future__ import annotations

import os
import sys

import click

from jaxcache import __version__
from jaxcache.errors import JaxcacheError

FORMATS = click.Choice(["text", "json", "sarif"])


def _fail(message: str, code: int = 2) -> None:
    click.echo(f"jaxcache: {message}", err=True)
    sys.exit(code)


def _after_dashdash() -> list[str] | None:
    """What followed `--` on our command line (click drops the `--` itself), or None."""
    return sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv[1:] else None


def _emit(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="jaxcache")
def cli() -> None:
    """Use JAX's persistent compilation cache safely, and know what it buys you.

    Every cache entry is a compiled executable that JAX loads unchecked: whoever can write the
    cache directory, or replace it through any parent, decides what your process runs.
    Start with the trust boundary:

    \b
      jaxcache init                 make a private cache directory and print how to use it
      jaxcache audit PATH           who can change what JAX loads from PATH, and why
      jaxcache ls PATH              inventory of the entries in a cache directory
      jaxcache run -- CMD...        run a job with the cache on and record what JAX did
      jaxcache bench -- CMD...      cold vs warm in separate processes: what the cache buys
      jaxcache explain REC...       why modules were or were not cached, and cross-run misses
      jaxcache net [--pid P]        JAX's network services: a trust boundary of their own
      jaxcache decide PATH ...      share the cache? writers, compatibility, saving

    Exit codes: 0 fine, 1 a finding you must act on, 2 usage or input error.
    """


@cli.command()
@click.argument("path", required=False)
@click.option("--name", default="jax", show_default=True,
              help="Sub-directory under your cache dir, when PATH is not given.")
@click.option("--policy", "policy_path", metavar="FILE",
              help="Trust policy (TOML); default: your config dir's jaxcache/policy.toml.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def init(path: str | None, name: str, policy_path: str | None, fmt: str) -> None:
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

    target = path if path is not None else create.default_dir(name)
    result = create.init(target, policy=policy.load(policy_path, Accounts()))
    if fmt == "json":
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


@cli.command()
@click.argument("path")
@click.option("--policy", "policy_path", metavar="FILE",
              help="Trust policy (TOML); default: your config dir's jaxcache/policy.toml. "
                   "Never read from inside the audited tree.")
@click.option("--format", "fmt", type=FORMATS, default="text", show_default=True)
@click.option("--user", "as_user", metavar="NAME",
              help="Judge for this user (who besides NAME and root can write). Default: you.")
@click.option("--no-processes", is_flag=True, help="Skip the scan for other processes using it.")
@click.option("-v", "--verbose", is_flag=True, help="Also list trusted writers and notes.")
def audit(path: str, policy_path: str | None, fmt: str, as_user: str | None,
          no_processes: bool, verbose: bool) -> None:
    """Who can change what JAX loads from PATH, through which path, on which filesystem.

    PATH is read as JAX reads it: '~' is not expanded, a relative path is relative to the
    current directory, a path that does not exist yet is judged by its nearest existing
    ancestor, and URLs (gs://...) are UNVERIFIABLE.

    \b
    Verdicts:
      PRIVATE           only you and root can create, replace or rename entries or any parent
      SHARED-BY-POLICY  extra writers exist and your policy declares every one trusted
      UNSAFE            undeclared writers; each shown with its chain of reasons
      UNVERIFIABLE      network filesystem, URL, unreadable parent... fails closed
    Exit code 0 for PRIVATE / SHARED-BY-POLICY, 1 for UNSAFE / UNVERIFIABLE, 2 for bad input.
    """
    from jaxcache import api

    report = api.audit(path, policy=policy_path, as_user=as_user,
                       scan_processes=not no_processes)
    if fmt == "json":
        from jaxcache.report import json as out
        _emit(out.render_audit(report))
    elif fmt == "sarif":
        from jaxcache.report import sarif
        _emit(sarif.render_audit(report))
    else:
        from jaxcache.report import text
        _emit(text.render_audit(report, verbose=verbose))
    sys.exit(0 if report.verdict.ok else 1)


@cli.command(name="ls")
@click.argument("path")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def ls_command(path: str, fmt: str) -> None:
    """Inventory of a cache directory: module, size, owner, mode, age, links and flags.

    Flags mark what JAX would not have made: entries owned by other users, group- or
    other-writable entries, hard links, symlinks, non-regular files, ACLs, unexpected names.
    Exit code 1 when any entry is flagged beyond an unexpected name.
    """
    from jaxcache.trust import listing

    inv, resolved = listing.list_dir(path)
    if fmt == "json":
        from jaxcache.report import json as out
        _emit(out.render_ls(resolved, inv))
    else:
        from jaxcache.report import text
        _emit(text.render_ls(resolved, inv))
    sys.exit(1 if listing.needs_attention(inv) else 0)


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--cache-dir", metavar="DIR",
              help="Cache directory (default: $JAX_COMPILATION_CACHE_DIR, else the one "
                   "`jaxcache init` makes). Audited first; created private if missing.")
@click.option("--record", "record_path", metavar="FILE",
              help="Where to write the run record (JSON). Default: a new file under your "
                   "state dir (~/.local/state/jaxcache/runs/).")
@click.option("--policy", "policy_path", metavar="FILE", help="Trust policy (TOML).")
@click.option("--allow-untrusted", is_flag=True,
              help="Run even if the audit says UNSAFE or UNVERIFIABLE. Anyone who can write "
                   "the cache can then choose the code your job runs.")
@click.option("-q", "--quiet", is_flag=True, help="No summary; only the record is written.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def run(cache_dir: str | None, record_path: str | None, policy_path: str | None,
        allow_untrusted: bool, quiet: bool, command: tuple[str, ...]) -> None:
    """Run a JAX job unmodified, with the cache enabled and a probe that records what JAX did.

    \b
      jaxcache run -- python train.py --epochs 1
      jaxcache run --cache-dir /srv/jax-cache --record run.json -- ./job.sh

    The cache directory is audited first and refused unless PRIVATE or SHARED-BY-POLICY. The
    probe (a sitecustomize that chains yours) does not import jax before your program does and
    does not touch its output. After the program ends a summary goes to stderr: modules
    compiled, hits, written, skipped and why, seconds compiling vs loading.

    Exit code: the program's own (128+N if killed by signal N); 127 command not found, 126
    not executable; 1 cache refused; 2 usage or input error.
    """
    from jaxcache import run as runmod
    from jaxcache.report import run_text

    argv = list(command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    result = runmod.run_job(argv, cache_dir=cache_dir, record_path=record_path,
                            policy=policy_path, allow_untrusted=allow_untrusted)
    if not quiet:
        sys.stderr.write(run_text.render(result.record, result.record_path))
    sys.exit(result.outcome.status)


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("-t", "--trials", type=click.IntRange(1, 1000), default=6, show_default=True,
              help="Trials: each a fresh private cache, one cold process, then the warm ones. "
                   "The trial is the unit of the statistics: 6 is the fewest for a 95% "
                   "interval.")
@click.option("-k", "--warm", type=click.IntRange(1, 100), default=2, show_default=True,
              help="Warm processes per trial (their median is compared with the cold run).")
@click.option("--no-prime", is_flag=True,
              help="Skip the discarded first run that warms the OS file cache.")
@click.option("--timeout", type=click.FloatRange(min=0.1), metavar="SECONDS",
              help="Kill a run that takes longer (and stop the bench).")
@click.option("--confidence", type=click.FloatRange(0.5, 0.999), default=0.95,
              show_default=True)
@click.option("--noise", "noise_s", type=click.FloatRange(min=0), default=0.1,
              show_default=True, metavar="SECONDS",
              help="A saving whose interval reaches below this is 'no significant difference'.")
@click.option("--max-trials", type=click.IntRange(1, 1000), metavar="N",
              help="Adaptive: after --trials, keep adding trials up to N until --until-width "
                   "or --time-budget is reached.")
@click.option("--until-width", "target_width", type=click.FloatRange(min=0), metavar="SECONDS",
              help="Adaptive: stop when the saving's interval is at most this wide.")
@click.option("--time-budget", type=click.FloatRange(min=1), metavar="SECONDS",
              help="Adaptive: stop adding trials after this much time.")
@click.option("--min-compile-time", type=click.FloatRange(min=0), metavar="SECONDS",
              help="Set jax_persistent_cache_min_compile_time_secs for every run (JAX's "
                   "default 1.0). Reported, and marked when below the default.")
@click.option("--min-entry-size", type=click.IntRange(min=-1), metavar="BYTES",
              help="Set jax_persistent_cache_min_entry_size_bytes for every run.")
@click.option("--workdir", metavar="DIR",
              help="Keep caches, records and job output here (a private dir you own; "
                   "audited). Default: a private temporary dir, removed afterwards.")
@click.option("--out", "out_dir", metavar="DIR",
              help="Write report.md, bench.json and chart.png into DIR (created private).")
@click.option("--report", "report_path", metavar="FILE.md", help="Markdown report.")
@click.option("--json", "json_path", metavar="FILE", help="Raw samples and results (JSON).")
@click.option("--plot", "plot_path", metavar="FILE.png",
              help="Chart of the phases, cold vs warm (needs matplotlib).")
@click.option("--compare", nargs=2, metavar="A.json B.json",
              help="Compare two earlier `--json` results instead of running anything.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def bench(command: tuple[str, ...], trials: int, warm: int, no_prime: bool,
          timeout: float | None, confidence: float, noise_s: float, max_trials: int | None,
          target_width: float | None, time_budget: float | None,
          min_compile_time: float | None, min_entry_size: int | None, workdir: str | None,
          out_dir: str | None, report_path: str | None, json_path: str | None,
          plot_path: str | None, compare: tuple[str, str] | None) -> None:
    """Measure what the cache buys: cold versus warm, each in its own process.

    \b
      jaxcache bench -- python train.py
      jaxcache bench -t 3 -k 2 --out bench-out -- python examples/mlp.py
      jaxcache bench --compare before.json after.json

    Each trial makes a fresh private cache, runs the job once cold and K times warm against
    it, and checks the cache really filled and was hit. Per process it reports import jax,
    trace, lower, compile-or-load and the rest from inside (the probe of `jaxcache run`), and
    wall, CPU and memory from outside. The saving per start comes with an exact
    distribution-free interval, paired by trial (Hodges-Lehmann / Wilcoxon signed-rank; 6
    trials are the fewest for 95%). JAX's thresholds are never
    lowered unless you ask, and always reported.

    Exit code: 0 a significant saving; 1 none (nothing cached, warm runs missed, or no
    significant difference); 2 usage error or a run that failed or timed out; 130 interrupted
    (the runs that finished are still reported).
    """
    from jaxcache.bench import command as benchcmd

    if compare:
        if command:
            raise click.UsageError("--compare takes two JSON files and no command")
        _emit(benchcmd.compare(*compare))
        sys.exit(0)
    argv = list(command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise click.UsageError("no command to bench: jaxcache bench [OPTIONS] -- CMD [ARGS...]")
    code = benchcmd.run(
        argv, trials=trials, warm=warm, prime=not no_prime, timeout=timeout,
        confidence=confidence, noise_s=noise_s, max_trials=max_trials,
        target_width=target_width, time_budget=time_budget,
        min_compile_time=min_compile_time, min_entry_size=min_entry_size, workdir=workdir,
        out_dir=out_dir, report_path=report_path, json_path=json_path, plot_path=plot_path,
        echo=_emit)
    sys.exit(code)


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.argument("inputs", nargs=-1, type=click.UNPROCESSED)
def explain(fmt: str, inputs: tuple[str, ...]) -> None:
    """Why modules were or were not cached, and why a later process missed.

    \b
      jaxcache explain cold.json warm.json     run records from `jaxcache run --record`
      jaxcache explain -- python train.py      run the job twice (fresh private cache) and explain

    For each compiled module: input shapes, compile seconds, entry size, outcome and the rule
    that applied (thresholds with both numbers, not process 0, host callbacks, cache disabled
    or set too late, a corrupt entry blocking its key...). Across records it names the cache-key
    component that changed and its likely cause. It suggests lowering a threshold only when
    what it leaves out is material (>= 10% of start-up and >= 1 s).

    Exit code: 0 everything that could be cached was; 1 something expensive was not cached;
    2 bad input (missing, malformed or newer-schema records).
    """
    from jaxcache import explain as explainmod
    from jaxcache import record as recordmod

    args = list(inputs)
    tail = _after_dashdash()
    if tail is not None and tail == args:
        if not args:
            raise click.UsageError("no command after --")
        records = explainmod.run_twice(args)
    elif tail is not None:
        raise click.UsageError("give either record files or -- CMD, not both")
    else:
        if not args:
            raise click.UsageError("give run records (from jaxcache run --record) or -- CMD")
        records = [(path, recordmod.load(path)) for path in args]
    result = explainmod.explain_records(records)
    if fmt == "json":
        from jaxcache.report import explain_json
        _emit(explain_json.render(result))
    else:
        from jaxcache.report import explain_text
        _emit(explain_text.render(result))
    sys.exit(result.exit_code)


@cli.command()
@click.option("--audit", "audit_path", metavar="A.json", help="An earlier `audit --format json`.")
@click.option("--bench", "bench_paths", multiple=True, metavar="B.json",
              help="An earlier `bench --json` (repeatable: one per job that would share).")
@click.option("--policy", "policy_path", metavar="FILE", help="Trust policy (TOML).")
@click.option("--user", "as_user", metavar="NAME",
              help="Decide for this user (whose processes would trust the cache).")
@click.option("--min-saving", type=click.FloatRange(min=0), default=1.0, show_default=True,
              metavar="SECONDS", help="A saving is noticeable from this many seconds...")
@click.option("--min-fraction", type=click.FloatRange(0, 1), default=0.05, show_default=True,
              help="...and this share of start-up (the lower bound of its interval counts).")
@click.option("-t", "--trials", type=click.IntRange(1, 100), default=6, show_default=True,
              help="Trials when benching CMD.")
@click.option("-k", "--warm", type=click.IntRange(1, 20), default=1, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.argument("inputs", nargs=-1, type=click.UNPROCESSED)
def decide(audit_path: str | None, bench_paths: tuple[str, ...], policy_path: str | None,
           as_user: str | None, min_saving: float, min_fraction: float, trials: int, warm: int,
           fmt: str, inputs: tuple[str, ...]) -> None:
    """Should this cache be shared? Three tests, each shown with its evidence.

    \b
      jaxcache decide /srv/jax-cache --bench bench.json
      jaxcache decide /srv/jax-cache --user alice -- python train.py

    \b
      1. writers understood: audit PRIVATE, or SHARED-BY-POLICY with every writer declared
      2. compatible jobs: same key inputs (jaxlib, platform, devices, XLA flags, path) and
         warm runs that really hit
      3. noticeable saving: the interval's lower bound >= --min-saving and --min-fraction
    Decisions: SHARE, PRIVATE (separate directories per user or team), NOT-WORTH-IT, BLOCKED
    (uncontrolled or unverifiable writers: no saving justifies it). Exit code 0 for SHARE or
    PRIVATE, 1 for NOT-WORTH-IT or BLOCKED, 2 for bad input.
    """
    import json as jsonlib

    from jaxcache import decide as decidemod
    from jaxcache.errors import JaxcacheError

    args = list(inputs)
    tail = _after_dashdash() or []
    if tail and args[-len(tail):] != tail:
        tail = []
    command = args[len(args) - len(tail):] if tail else []
    rest = args[:len(args) - len(tail)] if tail else args
    if len(rest) > 1:
        raise click.UsageError("give at most one PATH (then -- CMD to bench)")
    if audit_path and rest:
        raise click.UsageError("give PATH or --audit, not both")
    if audit_path:
        try:
            with open(audit_path, encoding="utf-8") as f:
                audit = jsonlib.load(f)
        except (OSError, ValueError) as exc:
            raise JaxcacheError(f"cannot read audit {audit_path}: {exc}") from None
        if not isinstance(audit, dict) or audit.get("schema") != "jaxcache.audit/1":
            raise JaxcacheError(f"{audit_path} is not a jaxcache audit (jaxcache.audit/1)")
    elif rest:
        from jaxcache import api
        from jaxcache.report import json as auditjson

        audit = auditjson.audit_dict(api.audit(rest[0], policy=policy_path, as_user=as_user))
    else:
        raise click.UsageError("give the cache PATH (or --audit A.json)")
    from jaxcache.bench import command as benchcmd

    benches = [benchcmd.load_result(p) for p in bench_paths]
    writers_ok = audit["verdict"] in ("PRIVATE", "SHARED-BY-POLICY")
    if writers_ok and command:
        benches.append(benchcmd.measure(command, trials=trials, warm=warm,
                                        echo=sys.stderr.write))
    if writers_ok and not benches:
        raise click.UsageError("the writers are understood; to judge the saving give --bench "
                               "B.json or -- CMD")
    result = decidemod.decide(audit, benches, min_saving_s=min_saving,
                              min_fraction=min_fraction)
    if fmt == "json":
        from jaxcache.report import decide_json
        _emit(decide_json.render(result))
    else:
        from jaxcache.report import decide_text
        _emit(decide_text.render(result))
    sys.exit(result.exit_code)


@cli.command()
@click.option("--env", "static", is_flag=True,
              help="Judge what a job started from this environment would expose (default "
                   "when no --pid/--live is given).")
@click.option("--pid", "pids", type=int, multiple=True, metavar="PID",
              help="Inspect the listening sockets of this process (repeatable).")
@click.option("--live", is_flag=True, help="Inspect every JAX process you can see.")
@click.option("--format", "fmt", type=FORMATS, default="text", show_default=True)
def net(static: bool, pids: tuple[int, ...], live: bool, fmt: str) -> None:
    """JAX's network services: who can reach them. Cache permissions do not cover this.

    \b
      jaxcache net                      what jax.distributed would expose from this environment
      jaxcache net --pid 4242           listening sockets of a running JAX process
      jaxcache net --live               every JAX process you can see

    On JAX <= 0.10.2 process 0 binds the coordination service to [::]:<port> (every interface)
    unless JAX_COORDINATOR_BIND_ADDRESS says otherwise, with no authentication or encryption;
    jax.profiler.start_server listens on every interface too. The static check follows JAX's
    own auto-detection (JAX_COORDINATOR_ADDRESS, Slurm, Open MPI, Kubernetes, Cloud TPU,
    JAX_COORDINATOR_PORT).

    Exit code: 1 when a JAX service is (or will be) reachable beyond loopback without
    authentication; 0 when everything is loopback-only or protected by mTLS; 2 bad input
    (no such PID, not permitted to inspect it).
    """
    import os

    from jaxcache import jaxcompat
    from jaxcache.net import assess, config, sockets

    version = jaxcompat.installed_version("jax")
    env = dict(os.environ)
    plan = config.plan(env, version) if (static or not (pids or live)) else None
    scan = None
    if pids or live:
        supported = config.plan(env, version).mtls_supported
        scan = sockets.scan(list(pids) if pids else None, jax_version_ok_for_mtls=supported)
    report = assess.assess(plan, scan, env)
    if fmt == "json":
        from jaxcache.report import net_json
        _emit(net_json.render(report))
    elif fmt == "sarif":
        from jaxcache.report import sarif
        _emit(sarif.render_findings(report.findings, {"exposed": report.exposed},
                                    files=False))
    else:
        from jaxcache.report import net_text
        _emit(net_text.render(report))
    sys.exit(report.exit_code)


@cli.command()
@click.option("--out", "out_dir", default="demo-output", show_default=True, metavar="DIR",
              help="Private output folder (created): report.md, chart.png, bench.json, runs/.")
@click.option("-t", "--trials", type=click.IntRange(1, 100), default=8, show_default=True)
@click.option("-k", "--warm", type=click.IntRange(1, 20), default=1, show_default=True)
def demo(out_dir: str, trials: int, warm: int) -> None:
    """The whole story on the bundled example: trust first, then what the cache buys.

    Makes a private directory (init), audits it and a deliberately unsafe one, then benches
    examples/mlp.py cold vs warm into the private directory, explains it and decides. About a
    minute on 2 cores.
    """
    from jaxcache import demo as demomod

    sys.exit(demomod.run(out_dir=out_dir, trials=trials, warm=warm, echo=_emit))


def main() -> None:
    try:
        cli.main(standalone_mode=False, prog_name="jaxcache")
    except click.exceptions.Abort:
        _fail("aborted", 130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
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
