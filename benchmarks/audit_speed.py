"""How fast is `jaxcache audit` on a big cache, compared with `find` over the same tree?

Builds a 10,000-entry cache directory (names and sizes as JAX writes them) and an empty one,
then times, interleaved in rounds so machine drift hits every command alike:
  - `jaxcache audit --format json` on the full and the empty cache (whole process),
  - `find DIR -printf '%u %m %n\\n'` on both.
Per-entry cost = (full - empty) / entries, for the audit and for find.
Targets (issue 2): the whole audit under 1 s; per-entry cost within 3x of find's.

    .venv/bin/python benchmarks/audit_speed.py [--entries 10000] [--rounds 7] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def build(path: str, entries: int) -> None:
    os.mkdir(path, 0o700)
    payload = secrets.token_bytes(2048)
    for i in range(entries):
        key = secrets.token_hex(32)
        with open(os.path.join(path, f"jit_fn_{i % 97}-{key}-cache"), "wb") as f:
            f.write(payload[: 512 + i % 1536])


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        sys.exit(f"{argv[0]} failed: {proc.stderr.decode(errors='replace')}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json", help="write the raw samples and medians here")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="jaxcache-bench-")
    try:
        full, empty = os.path.join(work, "full"), os.path.join(work, "empty")
        build(full, args.entries)
        build(empty, 0)
        audit = [sys.executable, "-m", "jaxcache", "audit", "--format", "json"]
        find = ["find"]
        cmds = {
            "audit_full": [*audit, full], "audit_empty": [*audit, empty],
            "find_full": [*find, full, "-printf", "%u %m %n\\n"],
            "find_empty": [*find, empty, "-printf", "%u %m %n\\n"],
        }
        for argv in cmds.values():  # warm the OS file cache and Python's bytecode cache
            timed(argv)
        samples: dict[str, list[float]] = {k: [] for k in cmds}
        for _ in range(args.rounds):
            for name, argv in cmds.items():
                samples[name].append(timed(argv))
        med = {k: statistics.median(v) for k, v in samples.items()}
        per_audit = (med["audit_full"] - med["audit_empty"]) / args.entries
        per_find = (med["find_full"] - med["find_empty"]) / args.entries
        ratio = per_audit / per_find if per_find > 0 else float("inf")
        print(f"entries: {args.entries}, rounds: {args.rounds}, cpus: {os.cpu_count()}")
        for k, v in med.items():
            print(f"  {k:12s} median {v * 1000:8.1f} ms  [{min(samples[k]) * 1000:.1f} - "
                  f"{max(samples[k]) * 1000:.1f}]")
        print(f"per entry: audit {per_audit * 1e6:.2f} us, find {per_find * 1e6:.2f} us, "
              f"ratio {ratio:.2f}x (target <= 3x)")
        print(f"whole audit of {args.entries} entries: {med['audit_full']:.3f} s (target < 1 s)")
        ok = med["audit_full"] < 1.0 and ratio <= 3.0
        print("targets met" if ok else "TARGETS MISSED")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"entries": args.entries, "samples_s": samples, "median_s": med,
                           "per_entry_us": {"audit": per_audit * 1e6, "find": per_find * 1e6},
                           "ratio": ratio, "ok": ok}, f, indent=2)
        sys.exit(0 if ok else 1)
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
