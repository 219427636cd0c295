"""How fast is `jaxcache audit` on a big cache, compared with `find` over the same tree?

For each size (default 10,000 and 100,000 entries) builds a cache directory (names and sizes
as JAX writes them) and an empty one, then times, interleaved in rounds (the order alternating)
so machine drift hits every command alike:
  - `jaxcache audit --format json` and `jaxcache audit` (text) on the full and the empty cache
    (whole process),
  - `find DIR -printf '%u %m %n\\n'` on both.
Per-entry cost = (full - empty) / entries, for each; and the whole-process ratio to find.
Targets (issue 26): per-entry cost <= 2x find's at 10k and 100k, in text and JSON; the text
audit's whole process <= 1.5x find's at 100k; per-entry cost at 100k <= 1.2x that at 10k.

    .venv/bin/python benchmarks/audit_speed.py [--entries 10000 100000] [--rounds 5] [--json F]
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


def measure(work: str, entries: int, rounds: int) -> dict[str, object]:
    """Medians of the audit (JSON and text) and of find on a full and an empty cache."""
    full, empty = os.path.join(work, f"full{entries}"), os.path.join(work, f"empty{entries}")
    build(full, entries)
    build(empty, 0)
    audit = [sys.executable, "-m", "jaxcache", "audit"]
    find = ["find"]
    cmds = {}
    for name, d in (("full", full), ("empty", empty)):
        cmds[f"json_{name}"] = [*audit, "--format", "json", d]
        cmds[f"text_{name}"] = [*audit, d]
        cmds[f"find_{name}"] = [*find, d, "-printf", "%u %m %n\\n"]
    for argv in cmds.values():  # warm the OS file cache and Python's bytecode cache
        timed(argv)
    samples: dict[str, list[float]] = {k: [] for k in cmds}
    for i in range(rounds):
        names = list(cmds) if i % 2 == 0 else list(cmds)[::-1]  # alternate the order
        for name in names:
            samples[name].append(timed(cmds[name]))
    med = {k: statistics.median(v) for k, v in samples.items()}
    per = {kind: (med[f"{kind}_full"] - med[f"{kind}_empty"]) / entries
           for kind in ("json", "text", "find")}
    shutil.rmtree(full)
    shutil.rmtree(empty)
    return {"entries": entries, "samples_s": samples, "median_s": med,
            "per_entry_us": {k: v * 1e6 for k, v in per.items()},
            "per_entry_ratio": {k: per[k] / per["find"] for k in ("json", "text")},
            "whole_ratio": {k: med[f"{k}_full"] / med["find_full"] for k in ("json", "text")}}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--entries", type=int, nargs="+", default=[10_000, 100_000],
                    help="cache sizes, each measured in its own round set [10000 100000]")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", help="write the raw samples and medians here")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="jaxcache-bench-")
    try:
        results = [measure(work, n, args.rounds) for n in args.entries]
    finally:
        shutil.rmtree(work)
    print(f"rounds: {args.rounds}, cpus: {os.cpu_count()}, python {sys.version.split()[0]}")
    ok = True
    for r in results:
        med, per = r["median_s"], r["per_entry_us"]
        ratio, whole = r["per_entry_ratio"], r["whole_ratio"]
        assert isinstance(med, dict) and isinstance(per, dict)
        assert isinstance(ratio, dict) and isinstance(whole, dict)
        print(f"{r['entries']} entries: audit json {med['json_full']:.3f} s, text "
              f"{med['text_full']:.3f} s, find {med['find_full']:.3f} s")
        print(f"  per entry: json {per['json']:.2f} us ({ratio['json']:.2f}x find's "
              f"{per['find']:.2f} us), text {per['text']:.2f} us ({ratio['text']:.2f}x); "
              f"target <= 2x")
        print(f"  whole process vs find: json {whole['json']:.2f}x, text {whole['text']:.2f}x "
              "(target for text <= 1.5x)")
        ok = ok and ratio["json"] <= 2 and ratio["text"] <= 2 and whole["text"] <= 1.5
    if len(results) > 1:
        first, last = results[0]["per_entry_us"], results[-1]["per_entry_us"]
        assert isinstance(first, dict) and isinstance(last, dict)
        growth = {k: last[k] / first[k] for k in ("json", "text")}
        print(f"per-entry cost at {results[-1]['entries']} vs {results[0]['entries']}: json "
              f"{growth['json']:.2f}x, text {growth['text']:.2f}x (target <= 1.2x)")
        ok = ok and growth["json"] <= 1.2 and growth["text"] <= 1.2
    print("targets met" if ok else "TARGETS MISSED")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "ok": ok}, f, indent=2)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
