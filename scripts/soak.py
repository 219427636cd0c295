"""`make soak`: the fault campaign, bounded by counts, not by time (issue 42).

Each kind's writer (tests/support/faults.py) is killed before every `--stride`-th step in turn
(`--rounds` times, each round one step further: `--rounds 2 --stride 2` or `--stride 1` kill
before every step), and its disk fails under it (EIO, ENOSPC) from a seeded sample of its
steps (`--errors` per kind and error); the state left is checked each time (no wrong load, no
lost acknowledged line, no internal error, the next writer completes); after each kind a real
JAX job reads a state the kills left. Then each object store (fake-gcs-server, SeaweedFS)
behind the fault proxy: seeded request faults (`--buckets` rounds), a publisher, `seal` and
`gc` killed at every request; and 8 processes at once on one directory and one prefix of each
store (`--crowd` rounds), then the same again with one busy loop per core beside them (as
scripts/test-under-load.sh loads the machine; `--no-load` skips it). Prints the table
docs/explanation/reliability.md quotes.

    .venv/bin/python scripts/soak.py [--rounds 1] [--stride 2] [--errors 20] [--buckets 4]
                                     [--crowd 40] [--no-load] [--kinds publish lru ...]
                                     [--stores gcs s3] [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))

from support import bucket_faults, crowd, faultproxy, faults, killpoints  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=1, help="times every step is killed")
    ap.add_argument("--stride", type=int, default=2,
                    help="kill before every Nth step (1: every step; each round starts one "
                         "step further, so --rounds 2 --stride 2 covers every step)")
    ap.add_argument("--kinds", nargs="+", choices=sorted(faults.KINDS),
                    default=list(faults.KINDS))
    ap.add_argument("--errors", type=int, default=20,
                    help="failing steps per kind for each of EIO and ENOSPC (seeded; 0: none)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--buckets", type=int, default=4,
                    help="seeded rounds of request faults per object store (0: none); "
                         "a publisher is also killed at every request, before and after")
    ap.add_argument("--crowd", type=int, default=40,
                    help="rounds of each reader when 8 processes share one directory and one "
                         "bucket prefix (three times on the directory; 0: none)")
    ap.add_argument("--no-load", action="store_true",
                    help="skip the second crowd, the one beside a busy loop per core")
    ap.add_argument("--stores", nargs="*", default=bucket_faults.available(),
                    choices=["gcs", "s3"], help="object stores for the bucket rounds")
    ap.add_argument("--json", help="also write the table here")
    args = ap.parse_args()
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="jaxcache-soak-") as tmp:
        root = Path(tmp)
        w = faults.world(root)
        golden = faults.sealed_job(root / "plain", w.pub, "--unsealed")["results"]
        tallies = []
        for name in args.kinds:
            kind = faults.KINDS[name]
            work = root / name
            work.mkdir()
            tally = faults.Tally(kind.name)
            steps = faults.steps(kind, w, work)
            for r in range(args.rounds):
                points = range(1 + r % args.stride, steps + 1, args.stride)
                for k in points:
                    shutil.rmtree(faults.trial(kind, w, work, k, tally))
                print(f"  {kind.name}: round {r + 1}/{args.rounds}, {len(points)} of {steps} "
                      f"kill points, {len(tally.failures)} failures", file=sys.stderr,
                      flush=True)
            if kind.cache:  # a real JAX job reads a state a kill left half way
                left = work / "left"
                kind.start(w, left)
                killpoints.run(kind.writer, steps // 2, work, *kind.args(w, left),
                               env=faults.fresh_state(work / "left-state"))
                for problem in faults.real_job_reads(left / "cache", w.pub, golden):
                    tally.internal_errors += 1
                    tally.fail(problem)
            tallies.append(tally)
            for error in ("EIO", "ENOSPC") if args.errors else ():
                failing = faults.Tally(kind.name, error)
                for k in faults.points(steps, args.errors, args.seed, last=False):
                    shutil.rmtree(faults.trial(kind, w, work, k, failing))
                print(f"  {kind.name}: {error} from {failing.trials} steps on, "
                      f"{len(failing.failures)} failures", file=sys.stderr, flush=True)
                tallies.append(failing)
        if args.buckets:
            for name in args.stores:
                tallies += _buckets(w, golden, name, root / name, args)
        if args.crowd:
            tallies += _crowds(w, root / "crowd", args)
            if not args.no_load:
                with _busy_cores() as n:
                    tallies += _crowds(w, root / "crowd-loaded", args,
                                       f", {n} busy loops beside it")
    took = time.monotonic() - start
    _table(tallies, took, args)
    if any(t.failures for t in tallies):
        for t in tallies:
            for f in t.failures[:10]:
                print(f"FAIL {t.kind}: {f}", file=sys.stderr)
        sys.exit(1)


def _buckets(w: faults.World, golden: dict, name: str, root: Path,
             args: argparse.Namespace) -> list[faults.Tally]:
    """One object store behind the fault proxy: seeded request faults on a publisher and its
    readers, a real job reading through them, a publisher killed at every request (before and
    after the server applies it), `seal` and `gc` at every request (before or after by turns)."""
    b = bucket_faults.start(name, root)
    try:
        noise = faults.Tally(f"{name}: publisher and readers", "http")
        for r in range(args.buckets):
            bucket_faults.publish_reads(w, b, f"noise-{r}", args.seed + r, 0.3, noise)
        bucket_faults.job_reads(w, b, "noise-0", args.seed, golden, noise)
        kills = faults.Tally(f"{name}: publisher", "request")
        n = bucket_faults.requests_of_publish(w, b, "count")
        for k in range(1, n + 1):  # every request: before the server sees it and after
            for after in (False, True):
                bucket_faults.killed_publisher(w, b, f"kill-{k}-{after}", k, after, kills)
        out = [noise, kills]
        for what in bucket_faults.COMMANDS:
            tally = faults.Tally(f"{name}: {what}", "turns")
            n = bucket_faults.requests_of(what, w, b, f"{what}-count")
            for k in range(1, n + 1):  # every request, before and after by turns
                bucket_faults.killed_command(what, w, b, f"{what}-{k}", k, k % 2 == 0, tally)
            out.append(tally)
        print(f"  {name}: {noise.faults} request faults, "
              f"{sum(t.faults for t in out[1:])} kills, "
              f"{sum(len(t.failures) for t in out)} failures", file=sys.stderr, flush=True)
        return out
    finally:
        b.stop()


@contextlib.contextmanager
def _busy_cores() -> Iterator[int]:
    """One busy loop per core, as scripts/test-under-load.sh starts them; killed by PID."""
    n = os.cpu_count() or 2
    hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(n)]
    try:
        yield n
    finally:
        for h in hogs:
            h.kill()
            h.wait()


def _crowds(w: faults.World, root: Path, args: argparse.Namespace,
            load: str = "") -> list[faults.Tally]:
    """8 processes at once on one directory (three times) and on one prefix of each store."""
    root.mkdir()
    here = faults.Tally(f"one sealed directory{load}", "crowd")
    for r in range(3):
        (root / f"dir-{r}").mkdir()
        crowd.directory(w, root / f"dir-{r}", args.crowd, here)
    out = [here]
    for name in args.stores:
        b = bucket_faults.start(name, root / name)
        try:
            tally = faults.Tally(f"one {name} prefix{load}", "crowd")
            with faultproxy.Proxy(b.upstream) as proxy:
                env = b.env(proxy, deadline_s=60)
                crowd.crowd(w, b.url("crowd"), env, args.crowd, tally)
                crowd.settle(w, b.url("crowd"), env, tally)
            out.append(tally)
        finally:
            b.stop()
    print(f"  8 at once{load}: {sum(t.faults for t in out)} loads checked, "
          f"{sum(len(t.failures) for t in out)} failures", file=sys.stderr, flush=True)
    return out


def _table(tallies: list[faults.Tally], took: float, args: argparse.Namespace) -> None:
    what = {"kill": "SIGKILL before each step", "EIO": "EIO from a step on",
            "ENOSPC": "ENOSPC from a step on", "http": "seeded 5xx, resets, cut or flipped "
            "bodies on 30 % of requests", "request": "SIGKILL at each request, before and "
            "after the server applies it", "turns": "SIGKILL at each request, before or after "
            "the server applies it by turns",
            "crowd": "8 processes at once (the column counts loads checked while publishers, "
            "the LRU or a reader, and verify ran)"}
    rows = [{"fault": f"{what[t.fault]}: {t.kind}", "trials": t.trials,
             "faults": t.faults, "wrong_loads": t.wrong_loads, "lost_lines": t.lost_lines,
             "hangs": t.hangs, "internal_errors": t.internal_errors,
             "failures": len(t.failures)} for t in tallies]
    print("| fault | trials | faults injected | wrong loads | lost lines | hangs | "
          "internal errors |\n|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['fault']} | {r['trials']} | {r['faults']} | {r['wrong_loads']} | "
              f"{r['lost_lines']} | {r['hangs']} | {r['internal_errors']} |")
    total = sum(t.faults for t in tallies if t.fault != "crowd")
    loads = sum(t.faults for t in tallies if t.fault == "crowd")
    print(f"\n{total} faults injected and {loads} loads checked under contention in "
          f"{took:.0f} s (`python scripts/soak.py --rounds {args.rounds} --stride {args.stride} "
          f"--errors {args.errors} --buckets {args.buckets} --crowd {args.crowd}"
          f"{' --no-load' if args.no_load else ''}`)")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "seconds": took}, indent=1))


if __name__ == "__main__":
    main()
