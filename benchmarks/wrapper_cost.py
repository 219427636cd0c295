"""What does `jaxcache run` add to a job that does nothing? Its fixed cost, wall and CPU.

Arms, interleaved round by round (the order alternates) so machine drift hits all alike:
  bare  `python noop.py` (a program that only starts and exits: one interpreter start);
  floor a Python wrapper that does only what any wrapper writing a JSON record must: import
        json, spawn `python noop.py`, wait for it, write its exit status and times as JSON
        (fsync'd): the least a wrapper in Python adds, the anchor for what jaxcache adds;
  run   `jaxcache run -q -- python noop.py` with a private cache directory holding a few
        entries and an origin ledger of --ledger-lines lines (a user who has run jobs for a
        while: every `run` reads the ledger), in a temporary state directory, so the user's
        own state is neither read nor grown.
Per arm: the median wall time and the median CPU time (user + system of the process and its
children, from RUSAGE_CHILDREN), and run - bare for both, with the paired Hodges-Lehmann
estimate of the per-round wall difference and its exact 95 % interval (bench/estimates.py).
Targets: run - bare <= +40 ms wall and <= +30 ms CPU (`run` audits the cache before every job,
one that does nothing too: the audit, then the job).

`--job examples/train.py` times a real JAX job instead of noop.py, its cache warm in both arms
(the bare arm runs JAX's own cache on the same directory): what a warm start pays. With
`--against OTHER_CHECKOUT/src` a third arm runs `run` from that tree: run - base is what a
change adds to a warm run (issue 40: the build's fingerprint, <= +2 ms). For the `run` arms
the part outside the job (wall minus the job's own wall from its run record: jaxcache's start
and the audit before the job, its record after) is shown too, and run - base of it: paired
without the job's noise, which on a 2-second JAX job is wider than the difference sought.

    .venv/bin/python benchmarks/wrapper_cost.py [--rounds 41] [--ledger-lines 1000] [--json F]
        [--against OTHER_CHECKOUT/src] [--job PROGRAM.py]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jaxcache.bench.estimates import paired_shift
from jaxcache.trust.provenance import birth, ledger_file, ledger_place

_SCRIPT = Path(sys.executable).with_name("jaxcache")
JAXCACHE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "jaxcache"]
WALL_TARGET_MS, CPU_TARGET_MS = 40.0, 30.0


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, cpu) seconds of one run of argv, its children included."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{proc.stderr.decode(errors='replace')[-2000:]}")
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


FLOOR = """import json, os, sys
argv = sys.argv[sys.argv.index("--") + 1:]
pid = os.posix_spawn(argv[0], argv, dict(os.environ))
_, status, usage = os.wait4(pid, 0)
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
with os.fdopen(fd, "w") as f:
    f.write(json.dumps({"status": status, "user_s": usage.ru_utime, "sys_s": usage.ru_stime},
                       indent=2))
    f.flush()
    os.fsync(f.fileno())
"""


def job_wall(record: str) -> float:
    """The job's own wall time (spawn to exit, as `jaxcache run` saw it) from its record."""
    return float(json.loads(Path(record).read_text())["process"]["wall_s"])


def make_ledger(cache: str, lines: int) -> None:
    """An origin ledger of `lines` lines in the state directory, as the witness writes it."""
    path = ledger_place.ledger_path()
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        st = os.fstat(f.fileno())
        f.write(ledger_file.header(st.st_dev, st.st_ino, birth.of_fd(f.fileno())))
        for i in range(lines):
            f.write(ledger_file.line(ledger_file.Written(
                f"jit_f{i}-{i:064x}-cache", f"{i:064x}", 1000 + i, (1, i, i, i),
                time.time(), cache)))


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=41)
    ap.add_argument("--ledger-lines", type=int, default=1000)
    ap.add_argument("--json", help="write the samples and figures here")
    ap.add_argument("--against", metavar="SRC",
                    help="also time `run` from another source tree (its src/, compiled), "
                         "through the same entry point: the paired difference to this one")
    ap.add_argument("--job", metavar="PROGRAM",
                    help="a Python program to time instead of one that does nothing (e.g. "
                         "examples/train.py): its cache is warmed first, in every arm")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="jaxcache-wrapper-")
    try:
        cache, state = os.path.join(work, "cache"), os.path.join(work, "state")
        os.mkdir(cache, 0o700)
        os.mkdir(state, 0o700)
        for i in range(8):  # a few entries the audit looks at
            Path(cache, f"jit_g{i}-{i:064x}-cache").write_bytes(b"x" * 1000)
            os.chmod(os.path.join(cache, f"jit_g{i}-{i:064x}-cache"), 0o600)
        noop = os.path.join(work, "noop.py")
        Path(noop).write_text("pass\n")
        if args.job:
            noop = os.path.abspath(args.job)
        env = {**os.environ, "XDG_STATE_HOME": state, "JAX_COMPILATION_CACHE_DIR": cache}
        env.pop("PYTHONPATH", None)
        os.environ["XDG_STATE_HOME"] = state  # ledger_place.ledger_path() here
        make_ledger(cache, args.ledger_lines)
        record = os.path.join(work, "record.json")
        floor = os.path.join(work, "floor.py")
        Path(floor).write_text(FLOOR)
        arms = {"bare": [sys.executable, noop],
                "floor": [sys.executable, floor, os.path.join(work, "floor.json"), "--",
                          sys.executable, noop],
                "run": [*JAXCACHE, "run", "-q", "--cache-dir", cache, "--record", record,
                        "--", sys.executable, noop]}
        envs = {name: env for name in arms}
        if args.against:
            arms["base"] = arms["run"]
            envs["base"] = {**env, "PYTHONPATH": os.path.abspath(args.against)}
        for name, argv in arms.items():  # warm the OS file cache and the .pyc files
            timed(argv, envs[name])
            timed(argv, envs[name])
        wall: dict[str, list[float]] = {k: [] for k in arms}
        cpu: dict[str, list[float]] = {k: [] for k in arms}
        own: dict[str, list[float]] = {k: [] for k in arms if k not in ("bare", "floor")}
        names = list(arms)
        for i in range(args.rounds):
            for name in (names if i % 2 == 0 else names[::-1]):
                w, c = timed(arms[name], envs[name])
                wall[name].append(w)
                cpu[name].append(c)
                if name in own:  # jaxcache's part: all but the job's own wall (its record's)
                    own[name].append(w - job_wall(record))
        med = {k: (statistics.median(wall[k]) * 1e3, statistics.median(cpu[k]) * 1e3)
               for k in arms}
        paired = paired_shift([a - b for a, b in zip(wall["run"], wall["bare"], strict=True)])
        extra_wall, extra_cpu = med["run"][0] - med["bare"][0], med["run"][1] - med["bare"][1]
        print(f"job: {args.job or 'a program that does nothing'}; "
              f"rounds: {args.rounds}; ledger lines: {args.ledger_lines}; "
              f"cpus: {os.cpu_count()}; python {sys.version.split()[0]}")
        for k in arms:
            print(f"  {k:5s} wall {med[k][0]:6.1f} ms [{min(wall[k]) * 1e3:.1f} - "
                  f"{max(wall[k]) * 1e3:.1f}]  cpu {med[k][1]:6.1f} ms")
        ratio = med["run"][0] / med["bare"][0]
        print(f"  run - bare: wall {extra_wall:+.1f} ms (ratio {ratio:.2f};"
              f" paired {paired.estimate * 1e3:+.1f} ms [{paired.low * 1e3:+.1f}, "
              f"{paired.high * 1e3:+.1f}]), cpu {extra_cpu:+.1f} ms")
        over = paired_shift([a - b for a, b in zip(wall["run"], wall["floor"], strict=True)])
        print(f"  run - floor (what jaxcache adds to the least a Python wrapper costs): wall "
              f"{med['run'][0] - med['floor'][0]:+.1f} ms (paired {over.estimate * 1e3:+.1f} ms "
              f"[{over.low * 1e3:+.1f}, {over.high * 1e3:+.1f}]), "
              f"cpu {med['run'][1] - med['floor'][1]:+.1f} ms")
        for k, parts in own.items():
            print(f"  {k:5s} outside the job (wall - the job's wall in its record): "
                  f"{statistics.median(parts) * 1e3:.1f} ms")
        if args.against:
            vs = paired_shift([a - b for a, b in zip(wall["run"], wall["base"], strict=True)])
            print(f"  run - base ({args.against}): wall {med['run'][0] - med['base'][0]:+.1f} ms "
                  f"(paired {vs.estimate * 1e3:+.1f} ms [{vs.low * 1e3:+.1f}, "
                  f"{vs.high * 1e3:+.1f}]), cpu {med['run'][1] - med['base'][1]:+.1f} ms")
            out = paired_shift([a - b for a, b in zip(own["run"], own["base"], strict=True)])
            print(f"  run - base outside the job: paired {out.estimate * 1e3:+.1f} ms "
                  f"[{out.low * 1e3:+.1f}, {out.high * 1e3:+.1f}] (the job's own noise "
                  "left out; what the probe does inside the job is in the wall above)")
        print(f"target: <= +{WALL_TARGET_MS:g} ms wall: "
              f"{'met' if extra_wall <= WALL_TARGET_MS else 'MISSED'}; <= +{CPU_TARGET_MS:g} ms "
              f"cpu: {'met' if extra_cpu <= CPU_TARGET_MS else 'MISSED'}")
        if args.json:
            Path(args.json).write_text(json.dumps(
                {"rounds": args.rounds, "ledger_lines": args.ledger_lines, "wall_s": wall,
                 "cpu_s": cpu, "outside_job_s": own, "extra_wall_ms": extra_wall,
                 "extra_cpu_ms": extra_cpu,
                 "paired_wall_ms": [paired.estimate * 1e3, paired.low * 1e3,
                                    paired.high * 1e3]}, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
