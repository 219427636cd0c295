"""How many jaxcache modules does `jaxcache run --sealed` import, in the wrapper and in the job?

Every module on that path is code a reviewer reads and start-up time every job pays. In a
private temporary folder this makes a signing key, lets a publisher run (`run --sealed
--signing-key K`) fill a sealed directory with a small jitted function, then a reader run
(`run --sealed --trusted-key K.pub`) load it, and counts for each run the jaxcache modules the
wrapper imported (`python -X importtime`, which its children do not inherit) and those the
job's Python imported (the job runs `python -X importtime`, its stderr sent to a file). Both
runs are real: the reader's job must load what the publisher signed (the script checks its
record), or the counts mean nothing.

    .venv/bin/python scripts/import_counts.py          # a line per run, then the worst
    .venv/bin/python scripts/import_counts.py --json   # one JSON object
    .venv/bin/python scripts/import_counts.py --list   # the modules, per run and side

Limits (the reviewable-core target): at most 70 in the wrapper, at most 100 distinct in wrapper
and job together; --check exits 1 past either.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

WRAPPER_LIMIT = 70
TOTAL_LIMIT = 100

JOB = """\
import jax, jax.numpy as jnp
print(float(jax.jit(lambda x: (x * 2.0 + 1.0).sum())(jnp.arange(64.0))))
"""


def _ours(importtime_stderr: str) -> set[str]:
    """The jaxcache modules named by `-X importtime` lines."""
    names = set()
    for line in importtime_stderr.splitlines():
        if line.startswith("import time:"):
            name = line.rsplit("|", 1)[-1].strip()
            if name == "jaxcache" or name.startswith("jaxcache."):
                names.add(name)
    return names


def _run(jaxcache: str, work: Path, label: str, flags: list[str], env: dict[str, str]
         ) -> dict[str, object]:
    job_err = work / f"{label}.job-importtime"
    record = work / f"{label}.json"
    argv = [sys.executable, "-X", "importtime", jaxcache, "run", "-q", "--sealed",
            "--cache-dir", str(work / "cache"), "--record", str(record), *flags, "--",
            "/bin/sh", "-c", 'exec "$0" -X importtime "$1" 2>"$2"', sys.executable,
            str(work / "job.py"), str(job_err)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"import_counts: the {label} run failed ({proc.returncode}): "
                         f"{proc.stderr.strip().splitlines()[-1:]}")
    wrapper = _ours(proc.stderr)
    job = _ours(job_err.read_text())
    doc = json.loads(record.read_text())
    return {"run": label, "wrapper": sorted(wrapper), "job": sorted(job),
            "wrapper_count": len(wrapper), "job_count": len(job),
            "total_count": len(wrapper | job), "record": doc}


def measure() -> list[dict[str, object]]:
    bin_dir = Path(sys.executable).parent
    jaxcache = str(bin_dir / "jaxcache")
    with tempfile.TemporaryDirectory(prefix="import-counts-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o700)
        (work / "job.py").write_text(JOB)
        (work / "config").mkdir(mode=0o700)
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(work),
               "XDG_STATE_HOME": str(work / "state"), "XDG_CONFIG_HOME": str(work / "config"),
               "XDG_CACHE_HOME": str(work / "xdg-cache"), "JAX_PLATFORMS": "cpu",
               # never the machine's team policy (/etc/jaxcache/policy.toml): none at all
               "JAXCACHE_SYSTEM_POLICY": str(work / "no-system-policy.toml")}
        key = work / "signing.key"
        made = subprocess.run([jaxcache, "keygen", str(key)], capture_output=True, text=True,
                              env=env, check=False)
        if made.returncode != 0:
            raise SystemExit(f"import_counts: keygen failed: {made.stderr.strip()}")
        pub = Path(f"{key}.pub")
        # the publisher's run fills the cache; the reader's loads it (JAX's thresholds at 0
        # so that this small function is written: the count is of modules, not of a saving)
        jax_env = {**env, "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
                   "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0"}
        runs = [_run(jaxcache, work, "publisher", ["--signing-key", str(key)], jax_env),
                _run(jaxcache, work, "reader", ["--trusted-key", str(pub)], jax_env)]
        record = runs[1]["record"]
        modules = record.get("modules", []) if isinstance(record, dict) else []
        hits = [m for m in modules if isinstance(m, dict) and m.get("outcome") == "hit"]
        if not hits:
            raise SystemExit("import_counts: the reader's job loaded nothing the publisher "
                             "signed: the counts would not be of a sealed run that loads")
        for r in runs:
            del r["record"]
        return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="one JSON object")
    parser.add_argument("--list", action="store_true", help="name every module counted")
    parser.add_argument("--check", action="store_true",
                        help=f"exit 1 past {WRAPPER_LIMIT} in the wrapper or {TOTAL_LIMIT} "
                        "in all")
    args = parser.parse_args()
    runs = measure()
    worst_wrapper = max(int(str(r["wrapper_count"])) for r in runs)
    worst_total = max(int(str(r["total_count"])) for r in runs)
    over = worst_wrapper > WRAPPER_LIMIT or worst_total > TOTAL_LIMIT
    if args.json:
        print(json.dumps({"runs": runs if args.list else [
            {k: v for k, v in r.items() if k.endswith("count") or k == "run"} for r in runs],
            "wrapper_max": worst_wrapper, "total_max": worst_total,
            "limits": {"wrapper": WRAPPER_LIMIT, "total": TOTAL_LIMIT}}, indent=2))
    else:
        for r in runs:
            print(f"run --sealed ({r['run']}): wrapper {r['wrapper_count']}, job "
                  f"{r['job_count']}, distinct in both {r['total_count']}")
            if args.list:
                for side in ("wrapper", "job"):
                    names = r[side]
                    print(f"  {side}: " + " ".join(names if isinstance(names, list) else []))
        print(f"worst: wrapper {worst_wrapper} (limit {WRAPPER_LIMIT}), distinct "
              f"{worst_total} (limit {TOTAL_LIMIT})")
    return 1 if args.check and over else 0


if __name__ == "__main__":
    sys.exit(main())
