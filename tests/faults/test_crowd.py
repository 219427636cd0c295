"""Many at once (issue 42): 8 processes (3 sealed publishers of the same entries, 3 sealed
readers, the sealed LRU or a fourth reader, verify in a loop) on one sealed directory and on
one bucket prefix, for a fixed number of rounds on the machine's 2 cores (support/crowd.py).
No load is wrong, no process fails or hangs, peak RSS stays bounded, and a lone publisher
completes the cache afterwards. `scripts/test-under-load.sh` runs it with every core busy."""

from __future__ import annotations

import pytest
from support import bucket_faults, crowd, faultproxy, faults

pytest.importorskip("cryptography")
pytest.importorskip("jax")

ROUNDS = 8


def _clean(tally: faults.Tally) -> None:
    assert tally.failures == [], tally.failures[:5]
    assert (tally.wrong_loads, tally.hangs, tally.internal_errors) == (0, 0, 0)
    assert tally.trials == 8


def test_eight_processes_on_one_sealed_directory(world, tmp_path):
    tally = faults.Tally("8 processes on one directory", "crowd")
    crowd.directory(world, tmp_path, ROUNDS, tally)
    _clean(tally)
    assert tally.faults > 0  # the readers did load entries while the others wrote


@pytest.mark.skipif("gcs" not in bucket_faults.available(), reason="no fake-gcs-server")
def test_eight_processes_on_one_bucket_prefix(world, tmp_path):
    tally = faults.Tally("8 processes on one bucket prefix", "crowd")
    b = bucket_faults.start("gcs", tmp_path)
    try:
        with faultproxy.Proxy(b.upstream) as proxy:
            env = b.env(proxy, deadline_s=60)
            crowd.crowd(world, b.url("crowd"), env, ROUNDS, tally)
            crowd.settle(world, b.url("crowd"), env, tally)
    finally:
        b.stop()
    _clean(tally)
