"""What the key lifecycle costs a sealed reader: one signature versus two distinct keys.

A sealed directory of real files (random bytes of entry sizes, each signed by key A and
co-signed by key B) is read through the sealed backend JAX calls (seal/stores/sealed_cache.py
SealedCache.get) in one process, interleaved: `one` trusts A alone (signatures_needed = 1:
the first signature suffices, no co-signature is looked for), `two` trusts A and B with
signatures_needed = 2 (the co-signature is found by B's id and verified too), `rotated`
trusts B alone (A retired: the first signature names an unknown key, then B's co-signature
is read). Medians of `--rounds` passes over every entry; ratios are against `one`.

    .venv/bin/python benchmarks/cosign_overhead.py [--rounds 31] [--sizes-kb 100 1000 10000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time


def _fill(root: str, sizes_kb: list[int], per_size: int):
    from jaxcache.seal.publishing import tier_names as names
    from jaxcache.seal.signing import signature_file as sigfile
    from jaxcache.trust.inputs import signing_keys as keys

    a, b = keys.generate("ci-a"), keys.generate("ci-b")
    made = []
    for kb in sizes_kb:
        for i in range(per_size):
            name = f"jit_bench{kb}_{i}-{os.urandom(32).hex()}-cache"
            data = os.urandom(kb * 1024)
            key = names.key_of(name)
            with open(os.path.join(root, name), "wb") as f:
                f.write(data)
            with open(os.path.join(root, names.sidecar(name, names.SIGNATURE)), "wb") as f:
                f.write(sigfile.sign(key, data, a))
            with open(os.path.join(root, names.cosignature(name, b.public.id)), "wb") as f:
                f.write(sigfile.sign(key, data, b, relies_on=()))
            made.append((kb, key))
    return a.public, b.public, made


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=31)
    ap.add_argument("--sizes-kb", type=int, nargs="+", default=[100, 1000, 10000])
    ap.add_argument("--per-size", type=int, default=5)
    args = ap.parse_args()

    from jaxcache.seal.stores.sealed_cache import SealedCache
    from jaxcache.trust.rules.keyring import KeyRing

    with tempfile.TemporaryDirectory() as root:
        os.chmod(root, 0o700)
        a, b, made = _fill(root, args.sizes_kb, args.per_size)
        arms = {
            "one": SealedCache(root, trusted=KeyRing({a.raw: a})),
            "two": SealedCache(root, trusted=KeyRing({a.raw: a, b.raw: b}, needed=2)),
            "rotated": SealedCache(root, trusted=KeyRing({b.raw: b})),
        }
        times: dict[tuple[str, int], list[float]] = {}
        for _ in range(args.rounds):
            for arm, cache in arms.items():
                for kb in args.sizes_kb:
                    keys = [k for size, k in made if size == kb]
                    start = time.perf_counter()
                    for k in keys:
                        assert cache.get(k) is not None, (arm, k)
                    times.setdefault((arm, kb), []).append(
                        (time.perf_counter() - start) / len(keys))
        print(f"{'size':>8}  {'one (ms)':>9}  {'two (ms)':>9}  {'two/one':>8}  "
              f"{'rotated (ms)':>12}  {'rotated/one':>11}")
        for kb in args.sizes_kb:
            one = statistics.median(times[("one", kb)]) * 1e3
            two = statistics.median(times[("two", kb)]) * 1e3
            rot = statistics.median(times[("rotated", kb)]) * 1e3
            print(f"{kb:>6}KB  {one:9.3f}  {two:9.3f}  {two / one:8.3f}  {rot:12.3f}  "
                  f"{rot / one:11.3f}")
        for cache in arms.values():
            cache.close()


if __name__ == "__main__":
    main()
