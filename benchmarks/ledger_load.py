"""What does a big origin ledger cost each audit and each `run`? (issue 39.7)

The ledger grows by a line per entry a watched job writes and is read whole by every audit,
`run` and `enable()`. This builds a ledger of --megabytes (default 64, the most a ledger may
hold) as the witness writes it (its header binding the file, lines for --names distinct entry
names), and a cache directory holding --entries of those names, then measures in child
processes, --rounds times each, interleaved:
  - loading the ledger alone (jaxcache.trust.inputs.ledger.load): wall seconds and peak RSS,
  - `jaxcache audit --format json --no-processes` of the directory: wall seconds and peak RSS,
  - the same audit with an empty ledger, for the difference the ledger makes.

    .venv/bin/python benchmarks/ledger_load.py [--megabytes 64] [--rounds 3] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import statistics
import subprocess
import sys
import tempfile
import time

LOAD = """
import resource, sys, time
t = time.perf_counter()
from jaxcache.trust.inputs import ledger
got = ledger.load(sys.argv[1])
assert got.problem is None, got.problem
print(time.perf_counter() - t, len(got.by_name), got.lines,
      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def build(top: str, megabytes: int, names: int, entries: int) -> tuple[str, str, str]:
    """The ledger (bound to its file, as the witness makes it), an empty one, the cache."""
    from jaxcache.lifecycle import witness
    from jaxcache.trust.provenance import ledger_file, ledger_place

    state, empty_state, cache = (os.path.join(top, n) for n in ("state", "empty", "cache"))
    for d in (state, empty_state, cache):
        os.mkdir(d, 0o700)
    keys = [f"jit_fn_{i % 97}-{secrets.token_hex(32)}-cache" for i in range(names)]
    for name in keys[:entries]:
        with open(os.path.join(cache, name), "wb") as f:
            f.write(b"x" * 1000)
    path = os.path.join(state, "jaxcache", ledger_place.LEDGER_NAME)
    assert witness.append(path, ledger_file.Written(keys[0], "0" * 64, 1, (0, 0, 0, 0), 0.0,
                                                    cache))
    lines = []
    for i in range(200_000):
        lines.append(ledger_file.line(ledger_file.Written(
            keys[i % names], secrets.token_hex(32), 1000 + i, (2049, 10_000_000 + i,
            1_796_000_000_000_000_000 + i, 1_796_000_000_000_000_000 + i), 1796000000.0 + i,
            cache)))
    block = b"".join(lines)
    with open(path, "ab") as f:
        while f.tell() + len(block) <= megabytes << 20:
            f.write(block)
        rest = (megabytes << 20) - f.tell() - 4096
        f.write(block[: block.rfind(b"\n", 0, max(rest, 0)) + 1])
    empty = os.path.join(empty_state, "jaxcache", ledger_place.LEDGER_NAME)
    assert witness.append(empty, ledger_file.Written(keys[0], "0" * 64, 1, (0, 0, 0, 0), 0.0,
                                                     cache))
    return path, empty, cache


def child(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall seconds, the child's peak RSS in MB, its output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        sys.exit(f"{argv[:4]}: exit {proc.returncode}: {proc.stderr[-500:]}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, max(peak, before) / 1024, proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--megabytes", type=int, default=64)
    ap.add_argument("--names", type=int, default=50_000, help="distinct entry names in it")
    ap.add_argument("--entries", type=int, default=1000, help="of them in the cache")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ledger-load-") as top:
        ledger, empty, cache = build(top, args.megabytes, args.names, args.entries)
        size = os.path.getsize(ledger)
        env = {**os.environ, "NO_COLOR": "1"}
        audit = [sys.executable, "-m", "jaxcache", "audit", "--format", "json",
                 "--no-processes", cache]
        runs: dict[str, list[tuple[float, float]]] = {"load": [], "audit": [],
                                                      "audit, empty ledger": []}
        rss_load = []
        for _ in range(args.rounds):
            wall, _, out = child([sys.executable, "-c", LOAD, ledger], env)
            seconds, _, _, rss = out.split()
            runs["load"].append((float(seconds), int(rss) / 1024))
            rss_load.append(int(rss) / 1024)
            state = os.path.dirname(os.path.dirname(ledger))
            runs["audit"].append(child(audit, {**env, "XDG_STATE_HOME": state})[:2])
            state = os.path.dirname(os.path.dirname(empty))
            runs["audit, empty ledger"].append(child(audit, {**env, "XDG_STATE_HOME": state})[:2])
        # the peak RSS of children is the largest so far: report the load's own, and the audits'
        figures = {"ledger_bytes": size, "rounds": args.rounds,
                   "load_s": statistics.median(s for s, _ in runs["load"]),
                   "load_peak_rss_mb": max(rss_load),
                   "audit_s": statistics.median(s for s, _ in runs["audit"]),
                   "audit_empty_ledger_s": statistics.median(
                       s for s, _ in runs["audit, empty ledger"])}
        print(f"ledger {size / 2**20:.1f} MB: load {figures['load_s']:.2f} s, peak RSS "
              f"{figures['load_peak_rss_mb']:.0f} MB; audit {figures['audit_s']:.2f} s vs "
              f"{figures['audit_empty_ledger_s']:.2f} s with an empty ledger "
              f"(median of {args.rounds})")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
