"""How many processes does `jaxcache bench` need before it can decide?

Two studies, each on runs recorded in one go on this machine.

Default (the design): one `jaxcache bench -t T -k 2` run of a job whose warm start saves
>= 20 % gives, per trial, one cold process and two warm ones. From the same samples, for
T = 1, 2, ... trials this script asks both designs for a 95% verdict on the wall-time saving:
  old  paired by trial: per trial d = cold - median of its 2 warm runs, one-sample
       Hodges-Lehmann with the exact Wilcoxon signed-rank interval (3 processes per trial);
  new  two-sample over trials: the T cold values against the T values of each trial's first
       warm run, Hodges-Lehmann with the exact Mann-Whitney interval (2 processes per trial).
and prints the fewest processes each needed to resolve it (interval above the noise band).

--adjust (issue 26, the covariate adjustment of bench/adjust.py): records R trials x (1 cold +
1 warm) of benchmarks/covariate_job.py (one cached module, ~50 that compile in every run) under
a bursty background load (--load burners), then, on that recorded noise:
  1. every 4 of the R trials, as `bench -t 4 -k 1` would see them: how often the unadjusted
     (exact Mann-Whitney) and the adjusted (ANCOVA, t on 5 df) intervals decide the 1 s bar;
  2. coverage with a known saving: 4 + 4 processes drawn from one arm's recorded runs (so the
     truth is known), DELTA added to one side: how often each interval holds DELTA;
  3. a hit that changes other work: the same, with the "warm" side's covariate and wall time
     both raised by SHIFT (the truth becomes DELTA - SHIFT): how often the balance check falls
     back, and the coverage with and without it;
and finally runs one real `jaxcache bench -t 4 -k 1` under the same load and prints both of its
figures and its verdict.

    .venv/bin/python benchmarks/bench_design.py [--trials 6] [--noise 0.1] [-- JOB ARGS]
    .venv/bin/python benchmarks/bench_design.py --adjust [--trials 12] [--load 3] [-- JOB ARGS]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from jaxcache.bench import adjust, noticeable
from jaxcache.bench import estimates as stats

HERE = Path(__file__).resolve().parent
EXAMPLE = str(HERE.parent / "examples" / "train.py")
COVARIATE_JOB = str(HERE / "covariate_job.py")
BURNER = """import random, sys, time
rng = random.Random(int(sys.argv[1]))
while True:  # bursts of 0.3-4 s of CPU, pauses of 0.3-3 s: a machine shared with others
    end = time.monotonic() + rng.uniform(0.3, 4.0)
    while time.monotonic() < end:
        pass
    time.sleep(rng.uniform(0.3, 3.0))
"""


def bench(trials: int, warm: int, job: list[str], out: Path) -> dict[str, Any]:
    subprocess.run([sys.executable, "-m", "jaxcache", "bench", "-t", str(trials), "-k",
                    str(warm), "--json", str(out), "--", *job], check=False,
                   stdout=subprocess.DEVNULL)
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


@contextmanager
def load(burners: int, seed: int) -> Iterator[None]:
    """`burners` bursty CPU burners for the duration of the block (none: a quiet machine)."""
    procs = [subprocess.Popen([sys.executable, "-c", BURNER, str(seed + i)])
             for i in range(burners)]
    try:
        yield
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()


def by_trial(doc: dict[str, Any]) -> dict[int, dict[str, list[float]]]:
    out: dict[int, dict[str, list[float]]] = {}
    for s in doc["samples"]:
        out.setdefault(s["trial"], {"cold": [], "warm": []})[s["kind"]].append(s["wall_s"])
    return {t: v for t, v in sorted(out.items()) if v["cold"] and len(v["warm"]) >= 2}


def resolved(shift: stats.Shift, noise: float) -> bool:
    return shift.resolved and shift.low > noise


def designs(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        doc = bench(args.trials, 2, args.job or [sys.executable, EXAMPLE],
                    Path(tmp) / "bench.json")
    trials = by_trial(doc)
    cold_median = statistics.median(v["cold"][0] for v in trials.values())
    warm_median = statistics.median(statistics.median(v["warm"]) for v in trials.values())
    print(f"job: {' '.join(doc['command'])}; {len(trials)} trials x (1 cold + 2 warm); median "
          f"cold {cold_median:.2f} s, warm {warm_median:.2f} s (saving "
          f"{1 - warm_median / cold_median:.0%})")
    first: dict[str, int | None] = {"old": None, "new": None}
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


# --- --adjust: the covariate adjustment on recorded noise ---------------------------------

def units(doc: dict[str, Any]) -> tuple[list[adjust.Unit], list[adjust.Unit]]:
    """Per trial with both arms, (wall, covariate) of its cold and its (first) warm run."""
    arms: dict[int, dict[str, adjust.Unit]] = {}
    for s in doc["samples"]:
        if s.get("comparable", True) and s["index"] <= 1:
            arms.setdefault(s["trial"], {})[s["kind"]] = adjust.Unit(
                s["wall_s"], s["uncached_s"], (str(s["uncached_modules"]),))
    both = [v for _, v in sorted(arms.items()) if len(v) == 2]
    return [v["cold"] for v in both], [v["warm"] for v in both]


def both(cold: Sequence[adjust.Unit], warm: Sequence[adjust.Unit], need: float,
         confidence: float) -> tuple[stats.Shift, adjust.Adjusted, bool, bool]:
    """The unadjusted and adjusted savings, and whether each decides (low >= need)."""
    plain = stats.two_sample_shift([u.y for u in cold], [u.y for u in warm], confidence)
    adj = adjust.adjust(cold, warm, plain, confidence)
    judged = adjust.judged(adj, plain)
    return plain, adj, plain.resolved and plain.low >= need, judged.resolved and \
        judged.low >= need


def subsets(cold: list[adjust.Unit], warm: list[adjust.Unit], per: int, bar: noticeable.Bar,
            confidence: float) -> None:
    combos = list(itertools.combinations(range(len(cold)), per))
    decided = [0, 0]
    fell_back = 0
    widths: tuple[list[float], list[float]] = ([], [])
    for combo in combos:
        c, w = [cold[i] for i in combo], [warm[i] for i in combo]
        need = bar.need(statistics.median(u.y for u in c))
        plain, adj, p_ok, a_ok = both(c, w, need, confidence)
        decided[0] += p_ok
        decided[1] += a_ok
        fell_back += not adj.used
        widths[0].append(plain.high - plain.low)
        if adj.shift is not None:
            widths[1].append(adj.shift.high - adj.shift.low)
    n = len(combos)
    print(f"1. every {per} of the {len(cold)} recorded trials ({n} subsets, "
          f"{2 * per} processes each, bar max(1 s, 5% of cold wall)):")
    print(f"   unadjusted (exact Mann-Whitney): decides {decided[0]}/{n} = {decided[0] / n:.0%}, "
          f"median width {statistics.median(widths[0]):.2f} s")
    print(f"   adjusted (ANCOVA, t on {2 * per - 3} df): decides {decided[1]}/{n} = "
          f"{decided[1] / n:.0%}, median width {statistics.median(widths[1]):.2f} s; "
          f"fell back to unadjusted in {fell_back}/{n}")


def placebo(pool: list[adjust.Unit], per: int, delta: float, shift: float, draws: int,
            rng: random.Random, confidence: float) -> tuple[float, float, float, float]:
    """Coverage of the truth (delta - shift) by the unadjusted interval, by the adjusted one
    whatever the checks say, by the verdict's interval (adjusted only when the checks pass),
    and the share of fallbacks."""
    truth = delta - shift
    hits = [0, 0, 0]
    fell = 0
    for _ in range(draws):
        picked = rng.sample(pool, 2 * per)
        c = [adjust.Unit(u.y + delta, u.x, u.modules) for u in picked[:per]]
        w = [adjust.Unit(u.y + shift, u.x + shift, u.modules) for u in picked[per:]]
        plain, adj, _, _ = both(c, w, 0.0, confidence)
        fit = adjust.ancova([(u.y, u.x) for u in c], [(u.y, u.x) for u in w], confidence)
        judged = adjust.judged(adj, plain)
        hits[0] += plain.low <= truth <= plain.high
        hits[1] += fit is not None and fit.shift.low <= truth <= fit.shift.high
        hits[2] += judged.low <= truth <= judged.high
        fell += not adj.used
    return hits[0] / draws, hits[1] / draws, hits[2] / draws, fell / draws


def adjusted_study(args: argparse.Namespace) -> None:
    job = args.job or [sys.executable, COVARIATE_JOB]
    bar = noticeable.Bar()
    with tempfile.TemporaryDirectory() as tmp, load(args.load, args.seed):
        recorded = bench(args.trials, 1, job, Path(tmp) / "recorded.json")
        real = bench(4, 1, job, Path(tmp) / "real.json") if args.real else None
    cold, warm = units(recorded)
    print(f"job: {' '.join(recorded['command'])}; {len(cold)} trials x (1 cold + 1 warm) "
          f"recorded under {args.load} bursty CPU burners on {_cores()} cores")
    print(f"   cold wall {_range([u.y for u in cold])}, warm wall {_range([u.y for u in warm])}; "
          f"covariate (uncached compile) cold {_range([u.x for u in cold])}, warm "
          f"{_range([u.x for u in warm])}")
    full = both(cold, warm, 0.0, args.confidence)
    print(f"   all {len(cold)} trials: unadjusted {_fmt(full[0])}, adjusted "
          f"{_fmt(full[1].shift)} (slope {full[1].slope or 0:.2f}, "
          f"r {full[1].correlation or 0:.2f})")
    subsets(cold, warm, 4, bar, args.confidence)
    rng = random.Random(args.seed)
    print(f"2. coverage with a known saving of {args.delta:g} s, 4 + 4 processes drawn from one "
          f"arm's recorded runs, {args.draws} draws (nominal {args.confidence:.0%}; the exact "
          "unadjusted interval is 97.1%):")
    for name, pool in (("cold", cold), ("warm", warm)):
        plain, fit, judged, fell = placebo(pool, 4, args.delta, 0.0, args.draws, rng,
                                           args.confidence)
        print(f"   {name} runs' noise: unadjusted {plain:.1%}, adjusted {fit:.1%}, verdict's "
              f"interval {judged:.1%} (fell back {fell:.0%})")
    print(f"3. a hit that makes other work {args.shift:g} s slower (truth "
          f"{args.delta - args.shift:g} s), same draws:")
    for name, pool in (("cold", cold), ("warm", warm)):
        plain, fit, judged, fell = placebo(pool, 4, args.delta, args.shift, args.draws, rng,
                                           args.confidence)
        print(f"   {name} runs' noise: unadjusted {plain:.1%}, adjusted without the checks "
              f"{fit:.1%}, verdict's interval {judged:.1%} (balance check fell back {fell:.0%})")
    if real is not None:
        s = real["summary"]
        print("4. one real `jaxcache bench -t 4 -k 1` under the same load: verdict "
              f"{s['verdict']}; unadjusted {_fmt(noticeable.shift_from_json(s['saving_s']))}; "
              f"adjusted {_fmt(noticeable.shift_from_json(s.get('adjusted_saving_s') or {}))} "
              f"({'used' if (s.get('adjustment') or {}).get('used') else 'not used'}: "
              f"{(s.get('adjustment') or {}).get('why')})")


def _fmt(s: stats.Shift | None) -> str:
    if s is None:
        return "-"
    if not s.resolved:
        return f"{s.estimate:.2f} s [no interval]"
    return f"{s.estimate:.2f} s [{s.low:.2f}, {s.high:.2f}] ({s.confidence:.1%})"


def _range(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.2f} s [{min(values):.2f} - {max(values):.2f}]"


def _cores() -> int:
    return os.cpu_count() or 1


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--adjust", action="store_true", help="the covariate study (issue 26)")
    ap.add_argument("--trials", type=int, default=None, help="6; with --adjust 12")
    ap.add_argument("--noise", type=float, default=0.1)
    ap.add_argument("--confidence", type=float, default=0.95)
    ap.add_argument("--load", type=int, default=3, help="--adjust: bursty CPU burners")
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--delta", type=float, default=1.5, help="--adjust: known saving, s")
    ap.add_argument("--shift", type=float, default=1.0,
                    help="--adjust: extra seconds a hit adds to the other work")
    ap.add_argument("--draws", type=int, default=4000)
    ap.add_argument("--no-real", dest="real", action="store_false",
                    help="--adjust: skip the real bench -t 4 -k 1 at the end")
    ap.add_argument("job", nargs="*")
    args = ap.parse_args()
    if args.adjust:
        args.trials = args.trials or 12
        adjusted_study(args)
    else:
        args.trials = args.trials or 6
        designs(args)


if __name__ == "__main__":
    main()
