"""How far does a machine's load move what JAX's thresholds leave out of one job?

The rule for "material" (jaxcache/thresholds.py) rests on two timings of a run: the compile
seconds the thresholds left uncached and their share of the start-up. Both move with the load, so
the rule keeps a margin around its line, and this script measures the spread the margin must
cover: the bundled examples/train.py, cold (a fresh private cache each run), --rounds times under
each number of CPU burners (busy Python loops), and per load the smallest and largest figures
and their ratio, then the same across every load.

    .venv/bin/python benchmarks/left_out_spread.py [--rounds 3] [--burners 0 2 4]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from jaxcache import thresholds
from jaxcache.records import run_record

_SCRIPT = Path(sys.executable).with_name("jaxcache")
JAXCACHE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "jaxcache"]
JOB = Path(__file__).resolve().parent.parent / "examples" / "train.py"


def cold_run(workdir: str) -> thresholds.LeftOut:
    """One cold run of the job under `jaxcache run`: what the thresholds left out of it."""
    folder = tempfile.mkdtemp(dir=workdir)
    record = os.path.join(folder, "r.json")
    subprocess.run([*JAXCACHE, "run", "-q", "--cache-dir", os.path.join(folder, "cache"),
                    "--record", record, "--", sys.executable, str(JOB)],
                   check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, "XDG_STATE_HOME": folder})
    doc = run_record.load(record)
    return thresholds.left_out(doc.modules, doc.process.wall_s)


def spread(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.3g} to {high:.3g} ({high / low:.1f}x)" if low > 0 else f"{low} to {high}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--burners", type=int, nargs="+", default=[0, 2, 4])
    args = parser.parse_args()
    every: list[thresholds.LeftOut] = []
    with tempfile.TemporaryDirectory() as workdir:
        for burners in args.burners:
            loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                     for _ in range(burners)]
            try:
                runs = [cold_run(workdir) for _ in range(args.rounds)]
            finally:
                for loop in loops:
                    loop.kill()
                    loop.wait()
            every += runs
            shares = [r.share or 0.0 for r in runs]
            print(f"{burners} burners: left out {spread([r.seconds for r in runs])} s, "
                  f"share {spread(shares)}; "
                  + ", ".join(r.materiality.value for r in runs), flush=True)
    print(f"all loads: left out {spread([r.seconds for r in every])} s, "
          f"share {spread([r.share or 0.0 for r in every])}")


if __name__ == "__main__":
    main()
