"""How fast is `jaxcache gc` on a big cache, compared with `find DIR -mtime +N -delete`?

Builds a cache of --entries entries (names as JAX writes them, each a sparse file of
--entry-mb MB: 100,000 x 0.1 MB is 10 GB that takes no disk), half of them last used 40 days
ago, then, per round, copies it twice (hard to avoid: both commands delete) and times, the
order alternating:
  - `jaxcache gc DIR --max-age 30d` (whole process: the audit, the plan, the deletes),
  - `find DIR -name '*-cache' -mtime +30 -delete` (no judgement at all).
Both delete the same half. Also the gc process's peak RSS (memory bounded: it lists the
directory, it never reads an entry). Target (issue 41): gc within 2x of find.

    .venv/bin/python benchmarks/gc_speed.py [--entries 100000] [--entry-mb 0.1] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_SCRIPT = Path(sys.executable).with_name("jaxcache")
JAXCACHE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "jaxcache"]
TARGET = 2.0
OLD_S = 40 * 86_400


def build(path: str, entries: int, size: int) -> None:
    os.mkdir(path, 0o700)
    old = time.time() - OLD_S
    for i in range(entries):
        name = os.path.join(path, f"jit_fn_{i % 97}-{secrets.token_hex(32)}-cache")
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.ftruncate(fd, size)  # sparse: the size a reader sees, no blocks
        os.close(fd)
        if i % 2:
            os.utime(name, (old, old))


def copy(src: str, dst: str) -> None:
    """A copy keeping mtimes (cp -a: sparse stays sparse)."""
    subprocess.run(["cp", "-a", "--sparse=always", src, dst], check=True)


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{proc.stderr.decode(errors='replace')[-2000:]}")
    return wall, max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--entry-mb", type=float, default=0.1)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="jaxcache-gc-speed-")
    try:
        template = os.path.join(work, "template")
        build(template, args.entries, int(args.entry_mb * 1e6))
        env = {**os.environ, "XDG_STATE_HOME": os.path.join(work, "state")}
        walls: dict[str, list[float]] = {"gc": [], "find": []}
        rss = 0.0
        for r in range(args.rounds):
            order = ("gc", "find") if r % 2 == 0 else ("find", "gc")
            for name in order:
                d = os.path.join(work, f"{name}-{r}")
                copy(template, d)
                if name == "gc":
                    w, peak = timed([*JAXCACHE, "gc", d, "--max-age", "30d", "-q"], env)
                    rss = peak
                else:
                    w, _ = timed(["find", d, "-name", "*-cache", "-mtime", "+30", "-delete"], env)
                left = len(os.listdir(d))
                assert left == args.entries - args.entries // 2, (name, left)
                walls[name].append(w)
                shutil.rmtree(d)
        gc, find = statistics.median(walls["gc"]), statistics.median(walls["find"])
        print(f"entries: {args.entries} x {args.entry_mb} MB (sparse), half 40 days old; "
              f"rounds: {args.rounds}; cpus: {os.cpu_count()}")
        print(f"  gc --max-age 30d   {gc:7.2f} s  {[round(x, 2) for x in walls['gc']]}  "
              f"peak RSS {rss:.0f} MB")
        print(f"  find -mtime -delete {find:6.2f} s  {[round(x, 2) for x in walls['find']]}")
        print(f"  ratio {gc / find:.2f} (target <= {TARGET:g}: "
              f"{'met' if gc / find <= TARGET else 'MISSED'})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
