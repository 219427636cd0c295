"""How many processes does `jaxcache bench` need before it can call a saving significant?

One `jaxcache bench -t T -k 2` run of a job whose warm start saves >= 20 % gives, per trial,
one cold process and two warm ones. From the same samples, for T = 1, 2, ... trials this
script asks both designs for a 95% verdict on the wall-time saving:
  old  paired by trial: per trial d = cold - median of its 2 warm runs, one-sample
       Hodges-Lehmann with the exact Wilcoxon signed-rank interval (3 processes per trial);
  new  two-sample over trials: the T cold values against the T values of each trial's first
       warm run, Hodges-Lehmann with the exact Mann-Whitney interval (2 processes per trial).
and prints the fewest processes each needed to resolve it (interval above the noise band).

    .venv/bin/python benchmarks/bench_design.py [--trials 6] [--noise 0.1] [-- JOB ARGS]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from jaxcache.bench import stats

EXAMPLE = str(Path(__file__).resolve().parent.parent / "examples" / "train.py")


def bench(trials: int, job: list[str], out: Path) -> dict:
    subprocess.run([sys.executable, "-m", "jaxcache", "bench", "-t", str(trials), "-k", "2",
                    "--json", str(out), "--", *job], check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def by_trial(doc: dict) -> dict[int, dict[str, list[float]]]:
    out: dict[int, dict[str, list[float]]] = {}
    for s in doc["samples"]:
        out.setdefault(s["trial"], {"cold": [], "warm": []})[s["kind"]].append(s["wall_s"])
    return {t: v for t, v in sorted(out.items()) if v["cold"] and len(v["warm"]) >= 2}


def resolved(shift: stats.Shift, noise: float) -> bool:
    return shift.resolved and shift.low > noise


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=6)
    ap.add_argument("--noise", type=float, default=0.1)
    ap.add_argument("job", nargs="*", default=[sys.executable, EXAMPLE])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        doc = bench(args.trials, args.job, Path(tmp) / "bench.json")
    trials = by_trial(doc)
    cold_median = statistics.median(v["cold"][0] for v in trials.values())
    warm_median = statistics.median(statistics.median(v["warm"]) for v in trials.values())
    print(f"job: {' '.join(args.job)}; {len(trials)} trials x (1 cold + 2 warm); median cold "
          f"{cold_median:.2f} s, warm {warm_median:.2f} s (saving "
          f"{1 - warm_median / cold_median:.0%})")
    first = {"old": None, "new": None}
    for t in range(1, len(trials) + 1):
        rows = list(trials.values())[:t]
        old = stats.paired_shift([v["cold"][0] - statistics.median(v["warm"]) for v in rows])
        new = stats.two_sample_shift([v["cold"][0] for v in rows], [v["warm"][0] for v in rows])
        for name, shift, per in (("old", old, 3), ("new", new, 2)):
            ok = resolved(shift, args.noise)
            if ok and first[name] is None:
                first[name] = t * per
            low = f"{shift.low:.2f}" if shift.resolved else "-"
            print(f"  T={t} {name}: {t * per:2d} processes, estimate {shift.estimate:.2f} s, "
                  f"lower bound {low}, min p {shift.min_p:.3f}: "
                  f"{'significant' if ok else 'not resolved'}")
    print(f"fewest processes to a significant verdict: old design {first['old']}, new design "
          f"{first['new']}")


if __name__ == "__main__":
    main()
