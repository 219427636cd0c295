"""Which digest should a sealed entry's signature cover? Throughput on entry-sized buffers.

The digest sits on every sealed warm load (seal/signing/digest.py). Compared, on random buffers of
100 KB to 100 MB, each timed `--rounds` times interleaved (median reported): BLAKE3 as
seal/signing/digest.py calls it (one thread below 8 MB, all cores above), BLAKE3 on one thread, the
standard library's BLAKE2b (32-byte digest) and SHA-256. Also what importing blake3, hashlib
and platformdirs costs a fresh interpreter.

    .venv/bin/python benchmarks/digest_speed.py [--rounds 15] [--sizes-mb 0.1 1 10 100]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import time


def _arms() -> dict:
    import blake3

    from jaxcache.seal.signing import digest

    return {
        "blake3 (seal/signing/digest.py)": digest.of,
        "blake3, 1 thread": lambda b: blake3.blake3(b).digest(),
        "blake2b-256 (hashlib)": lambda b: hashlib.blake2b(b, digest_size=32).digest(),
        "sha256 (hashlib)": lambda b: hashlib.sha256(b).digest(),
    }


def _import_ms(module: str, rounds: int = 9) -> float:
    """Median cumulative import time of `module` in a fresh interpreter (-X importtime), ms."""
    samples = []
    for _ in range(rounds):
        err = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"],
                             capture_output=True, text=True, check=True).stderr
        last = [line for line in err.splitlines() if line.rstrip().endswith(f"| {module}")]
        samples.append(int(last[-1].split("|")[1]) / 1000)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--sizes-mb", type=float, nargs="+", default=[0.1, 1, 10, 100])
    args = ap.parse_args()
    arms = _arms()
    print(f"{os.cpu_count()} CPUs; median of {args.rounds} rounds, interleaved")
    print(f"| entry | {' | '.join(arms)} |")
    print(f"|---|{'---|' * len(arms)}")
    for mb in args.sizes_mb:
        data = os.urandom(int(mb * 1e6))
        times: dict[str, list[float]] = {name: [] for name in arms}
        for r in range(args.rounds):
            order = list(arms.items())
            for name, fn in order[r % len(order):] + order[:r % len(order)]:
                start = time.perf_counter()
                fn(data)
                times[name].append(time.perf_counter() - start)
        cells = []
        for name in arms:
            t = statistics.median(times[name])
            cells.append(f"{t * 1000:.2f} ms ({mb / 1000 / t:.2f} GB/s)")
        print(f"| {mb:g} MB | {' | '.join(cells)} |")
    print(f"import blake3: {_import_ms('blake3'):.2f} ms, import hashlib: "
          f"{_import_ms('hashlib'):.2f} ms, import platformdirs: "
          f"{_import_ms('platformdirs'):.2f} ms (-X importtime, median of 9)")


if __name__ == "__main__":
    main()
