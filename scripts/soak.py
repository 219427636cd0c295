"""`make soak`: the kill campaign at every step, for a count of rounds (issue 42).

Each kind's writer (tests/support/faults.py) is killed before each of its steps in turn, and
the state it left is checked (no wrong load, no lost acknowledged line, no internal error, the
next writer completes); after each kind a real JAX job reads a state the kills left. Bounded
by counts, not by time. Prints the table docs/reliability.md quotes.

    .venv/bin/python scripts/soak.py [--rounds 3] [--kinds publish witness gc] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))

from support import faults, killpoints, paths  # noqa: E402

JOB = str(paths.PROGRAMS / "sealed_job.py")
KINDS = ("publish", "witness", "gc")


def job(cache: Path, pub: str, *extra: str) -> dict:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    proc = subprocess.run([sys.executable, JOB, str(cache), pub, *extra], env=env,
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        sys.exit(f"the JAX job failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="times every step is killed")
    ap.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    ap.add_argument("--json", help="also write the table here")
    args = ap.parse_args()
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="jaxcache-soak-") as tmp:
        root = Path(tmp)
        w = faults.world(root, job)
        golden = job(root / "plain", w.pub, "--unsealed")["results"]
        tallies = []
        for kind in args.kinds:
            work = root / kind
            work.mkdir()
            tally = faults.Tally(kind)
            steps = _steps(kind, w, work)
            for r in range(args.rounds):
                for k in range(1, steps + 1):
                    if kind == "publish":
                        faults.publish_trial(w, work, k, tally)
                    elif kind == "witness":
                        faults.witness_trial(work, k, 4, tally)
                    else:
                        faults.gc_trial(w, work, k, tally)
                print(f"  {kind}: round {r + 1}/{args.rounds}, {steps} kill points, "
                      f"{len(tally.failures)} failures", file=sys.stderr, flush=True)
            if kind != "witness":  # a real job reads a state the kills left
                left = work / "left"
                _leave(kind, w, work, left, steps // 2)
                for problem in faults.real_job_reads(job, left, w.pub, golden):
                    tally.internal_errors += 1
                    tally.fail(problem)
            tallies.append(tally)
    took = time.monotonic() - start
    _table(tallies, took, args)
    if any(t.failures for t in tallies):
        for t in tallies:
            for f in t.failures[:10]:
                print(f"FAIL {t.kind}: {f}", file=sys.stderr)
        sys.exit(1)


def _steps(kind: str, w: faults.World, work: Path) -> int:
    probe = work / "probe"
    env = faults.fresh_state(work / "probe-state")
    if kind == "publish":
        probe.mkdir(mode=0o700)
        listing = work / "entries.json"
        listing.write_text(json.dumps([(k, d.hex()) for k, d in w.entries]))
        return killpoints.count(faults.PUBLISH, work, str(probe), str(w.key), str(listing),
                                env=env)
    if kind == "witness":
        return killpoints.count(faults.WITNESS, work, str(probe / "l"), "4")
    import shutil

    shutil.copytree(w.sealed, probe)
    return killpoints.count(faults.COLLECT, work, str(probe), "0", env=env)


def _leave(kind: str, w: faults.World, work: Path, left: Path, kill_at: int) -> None:
    """A state a kill left half way (the writer killed before its middle step)."""
    import shutil

    env = faults.fresh_state(work / "left-state")
    if kind == "publish":
        left.mkdir(mode=0o700)
        killpoints.run(faults.PUBLISH, kill_at, work, str(left), str(w.key),
                       str(work / "entries.json"), env=env)
    else:
        shutil.copytree(w.sealed, left)
        killpoints.run(faults.COLLECT, kill_at, work, str(left), "0", env=env)


def _table(tallies: list[faults.Tally], took: float, args: argparse.Namespace) -> None:
    rows = [{"fault": f"SIGKILL before each step: {t.kind}", "trials": t.trials,
             "faults": t.kills, "wrong_loads": t.wrong_loads, "lost_lines": t.lost_lines,
             "hangs": t.hangs, "internal_errors": t.internal_errors, "failures": len(t.failures)}
            for t in tallies]
    print("| fault | trials | faults injected | wrong loads | lost lines | hangs | "
          "internal errors |\n|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['fault']} | {r['trials']} | {r['faults']} | {r['wrong_loads']} | "
              f"{r['lost_lines']} | {r['hangs']} | {r['internal_errors']} |")
    total = sum(r["faults"] for r in rows)
    print(f"\n{total} faults in {took:.0f} s (rounds {args.rounds}; "
          f"`python scripts/soak.py --rounds {args.rounds}`)")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "seconds": took}, indent=1))


if __name__ == "__main__":
    main()
