"""What does `jaxcache run` cost on top of the bare job?

Runs the bundled example (examples/train.py) three ways, interleaved round by round so machine
drift hits every arm alike, all against the same warm private cache (so the job itself is the
same every time):
  bare   the job alone;
  probe  the job with only the in-process probe injected (sitecustomize on PYTHONPATH), as
         `jaxcache run` injects it: what the probe costs inside the job;
  run    `jaxcache run --quiet`: probe plus jaxcache's own start-up, audit and record.
Reports the median wall time of each arm and each overhead against the bare median (the
issue's ratio of medians), and, because one arm varies by +-100 ms between rounds on a busy
2-core machine, also the paired estimate: the Hodges-Lehmann median of the per-round
differences with its exact 95% interval (jaxcache.bench.estimates, the statistics of `bench`).
Target (issue 3): overhead <= 2% of the bare wall time or <= 50 ms, whichever is larger.

The cache is filled by `jaxcache run` itself, so every entry is in the origin ledger (issue 23:
a temporary state directory): the warm `run` then judges each entry's origin as it does for a
user's own cache. `--against SRC` adds the arm `base`: the same `jaxcache run` from another
source tree (its src/, compiled: python -m compileall; e.g. a checkout of the previous main)
through the same entry point (PYTHONPATH first), and the paired estimate of run - base,
which issue 23 wants to include 0 (what the origin ledger costs a warm start).

    .venv/bin/python benchmarks/probe_overhead.py [--rounds 11] [--json FILE] [--against SRC]
        [-- JOB ARGS]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jaxcache.probe.launch import probe_files

EXAMPLE = str(Path(__file__).resolve().parent.parent / "examples" / "train.py")
# the command users run: the installed entry point beside this interpreter (else -m jaxcache)
_SCRIPT = Path(sys.executable).with_name("jaxcache")
JAXCACHE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "jaxcache"]


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{proc.stderr.decode(errors='replace')[-2000:]}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--json", help="write samples and medians here")
    ap.add_argument("--against", metavar="SRC",
                    help="another jaxcache source tree (its src/ folder) to compare run with")
    ap.add_argument("job", nargs="*", help="job argv (default: python examples/train.py)")
    args = ap.parse_args()
    job = args.job or [sys.executable, EXAMPLE]
    work = tempfile.mkdtemp(prefix="jaxcache-overhead-")
    try:
        cache = os.path.join(work, "cache")
        os.mkdir(cache, 0o700)
        state = os.path.join(work, "state")
        os.mkdir(state, 0o700)
        env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_COMPILATION_CACHE_DIR": cache,
               "XDG_STATE_HOME": state}
        record = os.path.join(work, "record.json")
        probe_dir = os.path.join(work, "probe")
        os.mkdir(probe_dir, 0o700)
        for source, name in probe_files():  # the files `jaxcache run` puts beside the probe
            shutil.copy(source, os.path.join(probe_dir, name))
        probe_env = {**env, "JAXCACHE_PROBE_DIR": probe_dir, "PYTHONPATH": probe_dir}
        run_argv = ["run", "--quiet", "--cache-dir", cache, "--record", record, "--", *job]
        arms = {
            "run": ([*JAXCACHE, *run_argv], env),  # first: it fills the cache and the ledger
            "bare": (job, env),
            "probe": (job, probe_env),
        }
        if args.against:
            base_env = {**env, "PYTHONPATH": os.path.abspath(args.against)}
            arms["base"] = ([*JAXCACHE, *run_argv], base_env)  # the same entry point
        for argv, arm_env in arms.values():  # fills the cache, warms the OS file cache
            timed(argv, arm_env)
        samples: dict[str, list[float]] = {name: [] for name in arms}
        names = list(arms)
        for i in range(args.rounds):
            for name in names[i % len(names):] + names[:i % len(names)]:  # rotate the order
                samples[name].append(timed(*arms[name]))
        med = {name: statistics.median(v) for name, v in samples.items()}
        allowed = max(0.02 * med["bare"], 0.050)
        print(f"job: {' '.join(job)}; rounds: {args.rounds}; cpus: {os.cpu_count()}")
        from jaxcache.bench.estimates import paired_shift

        paired = {name: paired_shift([a - b for a, b in zip(samples[name], samples["bare"],
                                                            strict=True)])
                  for name in names if name != "bare"}
        for name, v in samples.items():
            extra = "" if name == "bare" else (
                f"  overhead {(med[name] - med['bare']) * 1000:+6.1f} ms, ratio "
                f"{med[name] / med['bare']:.3f}; paired {paired[name].estimate * 1000:+6.1f} ms "
                f"[{paired[name].low * 1000:+.1f}, {paired[name].high * 1000:+.1f}]")
            print(f"  {name:6s} median {med[name]:.3f} s  [{min(v):.3f} - {max(v):.3f}]{extra}")
        if args.against:
            vs = paired_shift([a - b for a, b in zip(samples["run"], samples["base"],
                                                     strict=True)])
            paired["run-base"] = vs
            print(f"  run - base (this tree vs {args.against}): paired "
                  f"{vs.estimate * 1000:+6.1f} ms [{vs.low * 1000:+.1f}, {vs.high * 1000:+.1f}]"
                  f"; the interval {'includes' if vs.low <= 0 <= vs.high else 'excludes'} 0")
        result = {name: med[name] - med["bare"] <= allowed for name in ("probe", "run")}
        print(f"target: overhead <= {allowed * 1000:.0f} ms (max of 2% of bare, 50 ms): "
              f"probe {'met' if result['probe'] else 'MISSED'}, "
              f"jaxcache run {'met' if result['run'] else 'MISSED'}")
        if args.json:
            Path(args.json).write_text(json.dumps(
                {"job": job, "samples_s": samples, "median_s": med, "allowed_s": allowed,
                 "paired_s": {k: [v.estimate, v.low, v.high] for k, v in paired.items()},
                 "met": result}, indent=2))
        sys.exit(0 if result["run"] else 1)
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
