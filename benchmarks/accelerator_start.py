"""Cold and warm starts of the bundled example on whatever accelerator JAX finds.

Each round runs examples/train.py four times, each in a process of its own, against fresh
directories made for the round (interleaved, so drift hits every arm alike):
  jax-cold, jax-warm   JAX's own cache (JAX_COMPILATION_CACHE_DIR), no jaxcache: the anchor;
  run-cold, run-warm   the same job under `jaxcache run --record`, the same cache settings.
For each process it reports wall seconds and, for the run arms, what the record says of the
job's one expensive module (compile seconds cold, load seconds warm), the platform and device.
The figure is the warm start saved (cold - warm) per arm, and run-warm / jax-warm: what
jaxcache's audit, probe and guard cost a warm start, as a ratio against JAX's own.

    python benchmarks/accelerator_start.py [--rounds 3] [--steps 300] [--json FILE]
        [--dir DIR] [--policy FILE] [--allow-untrusted]

--dir: where the round's directories are made (default: the temporary directory); --policy:
the policy `jaxcache run` judges them with; --allow-untrusted: passed to `jaxcache run`, for a
machine whose storage jaxcache cannot judge at all (a gVisor sandbox: every disk is 9p, the
policy's own folder too), where the audit still runs and says UNVERIFIABLE, as it should.
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
TRAIN = HERE.parent / "src" / "jaxcache" / "examples" / "train.py"


def _timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])}... failed ({done.returncode}):\n"
                         f"{done.stderr[-2000:]}")
    return time.perf_counter() - start


def _module(record: Path) -> dict[str, object]:
    doc = json.loads(record.read_text())
    (step,) = [m for m in doc["modules"] if "train_step" in m["name"]]
    return {"outcome": step["outcome"], "compile_or_load_s": step.get("compile_or_load_s"),
            "backend": doc["platform"].get("backend"),
            "device_kind": doc["platform"].get("device_kind"),
            "jax": doc["versions"].get("jax")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=300, help="train.py --steps (compile cost)")
    ap.add_argument("--json", help="write every measurement here")
    ap.add_argument("--dir", help="make the directories under DIR")
    ap.add_argument("--policy", help="the policy jaxcache run judges them with")
    ap.add_argument("--allow-untrusted", action="store_true",
                    help="pass --allow-untrusted to jaxcache run (say so where it is quoted)")
    args = ap.parse_args()
    job = [sys.executable, str(TRAIN), "--steps", str(args.steps)]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("JAXCACHE_",))}
    base.pop("JAX_COMPILATION_CACHE_DIR", None)
    rows: list[dict[str, object]] = []
    policy = ["--policy", args.policy] if args.policy else []
    policy += ["--allow-untrusted"] if args.allow_untrusted else []
    with tempfile.TemporaryDirectory(prefix="accel-", dir=args.dir) as tmp:
        work = Path(tmp)
        os.chmod(work, 0o700)
        for r in range(args.rounds):
            jax_dir, run_dir = work / f"jax{r}", work / f"run{r}"
            run_dir.mkdir(mode=0o700)  # jaxcache makes none where it cannot judge the storage
            for kind in ("cold", "warm"):
                env = {**base, "JAX_COMPILATION_CACHE_DIR": str(jax_dir)}
                rows.append({"round": r, "arm": f"jax-{kind}", "wall_s": _timed(job, env)})
                rec = work / f"run{r}-{kind}.json"
                wall = _timed([sys.executable, "-m", "jaxcache", "run", "-q", *policy,
                               "--cache-dir", str(run_dir), "--record", str(rec), "--", *job],
                              {**base, "XDG_STATE_HOME": str(work / "state")})
                rows.append({"round": r, "arm": f"run-{kind}", "wall_s": wall,
                             **_module(rec)})
                print(json.dumps(rows[-2]), json.dumps(rows[-1]), flush=True)
    med = {arm: statistics.median(float(x["wall_s"]) for x in rows if x["arm"] == arm)
           for arm in ("jax-cold", "jax-warm", "run-cold", "run-warm")}
    run_rows = [x for x in rows if str(x["arm"]).startswith("run")]
    summary = {
        "device": {k: run_rows[0][k] for k in ("backend", "device_kind", "jax")},
        "median_wall_s": med,
        "saved_s": {"jax": med["jax-cold"] - med["jax-warm"],
                    "run": med["run-cold"] - med["run-warm"]},
        "warm_ratio_run_over_jax": med["run-warm"] / med["jax-warm"],
        "train_step": {kind: statistics.median(
            float(x["compile_or_load_s"] or 0) for x in run_rows if x["arm"] == f"run-{kind}")
            for kind in ("cold", "warm")},
        "outcomes": sorted({f"{x['arm']}:{x['outcome']}" for x in run_rows}),
        "allow_untrusted": args.allow_untrusted,
    }
    print(json.dumps(summary, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
