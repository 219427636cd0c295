"""A warm start from a bucket, as users wait for it: JAX's own unsigned gs:// (s3://) cache vs
`jaxcache run --sealed` without and with prefetch, behind a store that is a round trip away.

A job of 40 cached modules of mixed sizes (10 KB to 20 MB, log-spaced: one jitted function
each, whose executable embeds a random constant of that size) runs as a fresh process; its time
to first step is from the moment the command is started (python, or `jaxcache run`) to the
moment the job has run every module once, which it prints. The store is fake-gcs-server (or,
with `--store s3`, SeaweedFS) on loopback, started here and stopped by PID, behind the loopback
proxy of the fault tests (tests/support/faultproxy.py) holding every request for a set round
trip (this kernel has no `tc netem`). Arms, each on its own prefix of one bucket, filled once:
  a  JAX's own cache (JAX_COMPILATION_CACHE_DIR=gs://..., through etils.epath and gcsfs/s3fs)
  b  jaxcache run --sealed --no-prefetch (a reader with only the public key, no local tier)
  c  jaxcache run --sealed --prefetch-from RECORD (the record of an earlier warm run of b)
  d  jaxcache run --sealed --generation current --prefetch-from RECORD: a generation (one
     signed manifest, entries by digest: docs/how-to/generations.md) published from a local
     sealed run of the same job, read with the record of an earlier warm run of d
Every warm run must hit all 40 modules. Round 0 is untimed (connections, page cache). Then,
round by round, each delay in turn, the three arms in an order that rotates: interleaved, so
that drift hits them alike. Reported per delay: medians, and c/a, b/a and d/a as paired ratios
(Hodges-Lehmann with the exact Wilcoxon interval, bench/estimates.py).

    .venv/bin/pip install -c constraints.txt -e '.[bench-gcs]'    # or '.[bench-s3]'
    .venv/bin/python benchmarks/bucket_warm_start.py [--store gs|s3] [--rounds 8]
                                                     [--delays-ms 0 20 50] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from bucket_load import client_env, needs_store, start_store  # noqa: E402
from support import faultproxy  # noqa: E402

BUCKET = "jaxwarm"
MODULES = 40
ARMS = ("a", "b", "c", "d")
NAMES = {"a": "JAX's own cache, unsigned", "b": "run --sealed, no prefetch",
         "c": "run --sealed, prefetch", "d": "a generation, prefetch"}

JOB = r'''
import json, sys, time
import jax, jax.numpy as jnp, numpy as np

jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_enable_xla_caches", "none")
hits = []
jax.monitoring.register_event_listener(
    lambda event, **_: hits.append(1) if event == "/jax/compilation_cache/cache_hits" else None)
total = 0.0
for i, nbytes in enumerate(json.loads(sys.argv[1])):
    n = max(1, nbytes // 4)
    const = np.random.default_rng(i).standard_normal(n).astype(np.float32)

    def step(x, const=const, i=i):
        return (x + jnp.asarray(const)).sum() * (i + 1)

    total += float(jax.jit(step)(np.zeros(n, np.float32)))  # no module but the step's
print(json.dumps({"done": time.time(), "hits": len(hits), "total": total}), flush=True)
'''


def sizes() -> list[int]:
    """40 entry sizes, log-spaced from 10 KB to 20 MB, in a fixed shuffled order."""
    import random

    lo, hi = 10_000, 20_000_000
    out = [int(lo * (hi / lo) ** (i / (MODULES - 1))) for i in range(MODULES)]
    random.Random(45).shuffle(out)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", choices=("gs", "s3"), default="gs")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--delays-ms", type=float, nargs="+", default=[0, 20, 50])
    ap.add_argument("--json", help="write the samples and estimates here")
    args = ap.parse_args()
    needs_store("bucket_warm_start", args.store)
    work = Path(tempfile.mkdtemp(prefix="jaxcache-warm-start-"))
    srv = start_store(args.store, work, (BUCKET,))
    try:
        with faultproxy.Proxy(("127.0.0.1", srv.port)) as proxy:
            result = measure(args, work, srv, proxy)
    finally:
        srv.stop()
    report(args, result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


def _env(args, srv, proxy, work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JAX_", "JAXCACHE_", "XLA_"))}
    env["JAX_PLATFORMS"] = "cpu"
    env.update(client_env(args.store, srv, proxy.url))
    env["XDG_STATE_HOME"] = str(work / "state")  # records of our own
    return env


def _jaxcache() -> list[str]:
    return [sys.executable, "-m", "jaxcache"]


def measure(args, work: Path, srv, proxy) -> dict:
    env = _env(args, srv, proxy, work)
    job = work / "job.py"
    job.write_text(JOB)
    plan = json.dumps(sizes())
    keys = work / "keys"
    subprocess.run([*_jaxcache(), "keygen", str(keys / "pub.key")], check=True, env=env,
                   capture_output=True)
    pub = (keys / "pub.key.pub").read_text().strip()
    url = {arm: f"{args.store}://{BUCKET}/{arm}" for arm in ARMS}
    url["c"] = url["b"]  # b and c read the same sealed prefix
    sealed = ["--sealed", "--cache-dir", url["b"]]
    job_argv = [sys.executable, str(job), plan]
    first = work / "warm-b.json"
    first_d = work / "warm-d.json"

    def argv(arm: str, record: Path) -> tuple[list[str], dict[str, str]]:
        if arm == "a":
            return job_argv, {**env, "JAX_COMPILATION_CACHE_DIR": url["a"]}
        if arm == "d":
            how = ["--prefetch-from", str(first_d)] if first_d.exists() else ["--no-prefetch"]
            return [*_jaxcache(), "run", "--quiet", "--sealed", "--generation", "current",
                    "--cache-dir", url["d"], "--trusted-key", pub, "--record", str(record),
                    *how, "--", *job_argv], env
        how = ["--no-prefetch"] if arm == "b" else ["--prefetch-from", str(first)]
        return [*_jaxcache(), "run", "--quiet", *sealed, "--trusted-key", pub, "--record",
                str(record), *how, "--", *job_argv], env

    def run(arm: str, record: Path) -> float:
        cmd, e = argv(arm, record)
        started = time.time()
        proc = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            sys.exit(f"arm {arm} failed ({proc.returncode}): {proc.stderr[-2000:]}")
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        if out["hits"] < MODULES:
            sys.exit(f"arm {arm}: {out['hits']} of {MODULES} modules were cache hits")
        return float(out["done"]) - started

    print(f"filling {url['a']} (JAX) and {url['b']} (sealed publisher), {MODULES} modules "
          f"of {sum(sizes()) / 1e6:.0f} MB", flush=True)
    proxy.delay_s = 0.0
    fill = subprocess.run(job_argv, env={**env, "JAX_COMPILATION_CACHE_DIR": url["a"]},
                          capture_output=True, text=True, timeout=900)
    assert fill.returncode == 0, fill.stderr[-2000:]
    pubfill = subprocess.run([*_jaxcache(), "run", "--quiet", *sealed, "--signing-key",
                              str(keys / "pub.key"), "--record", str(work / "fill.json"), "--",
                              *job_argv], env=env, capture_output=True, text=True, timeout=900)
    assert pubfill.returncode == 0, pubfill.stderr[-2000:]
    warm_d = work / "warm-d"  # the generation's source: a local sealed run of the same job
    for step in ([*_jaxcache(), "run", "--quiet", "--sealed", "--signing-key",
                  str(keys / "pub.key"), "--cache-dir", str(warm_d), "--", *job_argv],
                 [*_jaxcache(), "seal", str(warm_d), "--signing-key", str(keys / "pub.key"),
                  "--generation", url["d"]]):
        done = subprocess.run(step, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-2000:]
    run("b", first)  # its record is what c prefetches from
    run("d", first_d)  # and this one what d prefetches from
    for arm in ("a", "c"):
        run(arm, work / f"warm-{arm}.json")
    run("d", work / "warm-d2.json")
    samples: dict[str, dict[str, list[float]]] = {
        f"{d:g}": {arm: [] for arm in ARMS} for d in args.delays_ms}
    counts: list[dict] = []
    n = 0
    for r in range(args.rounds):
        for d in args.delays_ms:
            proxy.delay_s = d / 1000
            order = ARMS[n % len(ARMS):] + ARMS[:n % len(ARMS)]
            order = order if r % 2 == 0 else order[::-1]
            n += 1
            for arm in order:
                rec = work / f"r{r}-{d:g}-{arm}.json"
                samples[f"{d:g}"][arm].append(run(arm, rec))
                if arm == "c":
                    counts.append(json.loads(rec.read_text())["seal"]["prefetch"])
            got = {a: samples[f"{d:g}"][a][-1] for a in ARMS}
            print(f"round {r + 1}/{args.rounds}, {d:g} ms: " + ", ".join(
                f"{a} {got[a]:.2f} s" for a in ARMS), flush=True)
    return {"store": args.store, "rounds": args.rounds, "modules": MODULES,
            "entry_bytes": sizes(), "samples_s": samples, "prefetch": counts,
            "command": "benchmarks/bucket_warm_start.py " + " ".join(sys.argv[1:])}


def report(args, result: dict) -> None:
    import jax

    from jaxcache.bench.estimates import paired_ratio

    print(f"\njax {jax.__version__}, {os.cpu_count()} cpus, {result['rounds']} interleaved "
          f"rounds; {'fake-gcs-server' if args.store == 'gs' else 'SeaweedFS'} on loopback "
          f"behind a proxy adding a round trip per request; {MODULES} modules, "
          f"{sum(result['entry_bytes']) / 1e6:.0f} MB; time to first step, median")
    print(f"{'delay':>6} | {'a ' + NAMES['a']:>31} | {'b ' + NAMES['b']:>28} | "
          f"{'c ' + NAMES['c']:>25} | {'d ' + NAMES['d']:>25} | {'c/a [95% interval]':>22} | "
          f"{'d/a [95% interval]':>22} | {'b/a':>6}")
    est: dict[str, dict] = {}
    for d, arms in result["samples_s"].items():
        med = {a: statistics.median(v) for a, v in arms.items()}
        ca = paired_ratio(arms["a"], arms["c"])
        ba = paired_ratio(arms["a"], arms["b"])
        da = paired_ratio(arms["a"], arms["d"])
        est[d] = {"median_s": med, "c_over_a": [ca.estimate, ca.low, ca.high],
                  "b_over_a": [ba.estimate, ba.low, ba.high],
                  "d_over_a": [da.estimate, da.low, da.high]}
        print(f"{d + ' ms':>6} | {med['a']:>29.2f} s | {med['b']:>26.2f} s | "
              f"{med['c']:>23.2f} s | {med['d']:>23.2f} s | "
              f"{ca.estimate:>6.2f} [{ca.low:.2f}, {ca.high:.2f}] | "
              f"{da.estimate:>6.2f} [{da.low:.2f}, {da.high:.2f}] | {ba.estimate:>6.2f}")
    used = [p["used"] for p in result["prefetch"] if p]
    wasted = [p["wasted"] for p in result["prefetch"] if p]
    saved = [p["saved_s"] for p in result["prefetch"] if p]
    if used:
        print(f"prefetch (c): {statistics.median(used):g} of {MODULES} entries used, "
              f"{statistics.median(wasted):g} wasted, {statistics.median(saved):.2f} s of "
              "fetching not waited for (medians over c's runs)")
    result["estimates"] = est


if __name__ == "__main__":
    main()
