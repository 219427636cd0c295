"""`jaxcache net`: JAX's network services and who can reach them."""

from __future__ import annotations

import argparse
import os

from jaxcache.cli import common


def options(p: argparse.ArgumentParser) -> None:
    common.option(p, "--env", dest="static", action="store_true",
                  help="Judge what a job started from this environment would expose "
                       "(default when no --pid/--live is given).")
    common.option(p, "--pid", dest="pids", type=int, action="append", metavar="PID",
                  help="Inspect the listening sockets of this process (repeatable).")
    common.option(p, "--live", action="store_true",
                  help="Inspect every JAX process. Fails closed (exit 1) when some process "
                       "could not be inspected (other users', unless you are root), naming "
                       "whose.")
    common.option(p, "--partial", action="store_true",
                  help="With --live: accept an answer about the processes you can inspect; "
                       "the report says it is partial and whose processes it leaves out.")
    common.format_flag(p, common.FORMATS)


def handle(args: argparse.Namespace, tail: None) -> None:
    """JAX's network services: who can reach them. Cache permissions do not cover this.

      jaxcache net                      what jax.distributed would expose from this environment
      jaxcache net --pid 4242           listening sockets of a running JAX process
      jaxcache net --live               every JAX process you can see

    On every JAX line jaxcache supports (0.5 to 0.12) process 0 binds the coordination service
    to [::]:<port> (every interface) unless JAX_COORDINATOR_BIND_ADDRESS says otherwise; up to
    0.10 with no authentication or encryption (0.11 adds mTLS: JAX_MTLS_* variables);
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
    if args.partial and not (pids or args.live):
        common.usage(args, "--partial goes with --live")
    version = jaxcompat.installed_version("jax")
    env = dict(os.environ)
    plan = config.plan(env, version) if (args.static or not (pids or args.live)) else None
    scan = None
    if pids or args.live:
        supported = config.plan(env, version).mtls_supported
        scan = sockets.scan(list(pids) if pids else None, jax_version_ok_for_mtls=supported,
                            partial=args.partial)
    report = assess.assess(plan, scan, env)
    from jaxcache.report import net as formats

    common.finish(args, formats.FORMATS[args.fmt](report), report.exit_code)
