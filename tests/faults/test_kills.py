"""Writers killed before each of their steps (a fixed, seeded sample; `make soak` takes
every step): the sealed publisher, the sealed LRU, seal, seal --add-signature,
verify --quarantine, the ledger's witness and gc (support/faults.py has the invariants). After
each kill: no reader loads a partial, other or unsigned entry, nothing acknowledged is lost,
`verify` names what was left, and the next run completes. Then a real JAX job reads what a
kill left half way and computes the same numbers.
"""

from __future__ import annotations

import shutil

import pytest
from support import faults

pytest.importorskip("cryptography")
pytest.importorskip("jax")

SEED = 42
SAMPLE = 5  # kill points per kind in `make test` (first and last among them); soak: all



@pytest.mark.parametrize("kind", sorted(faults.KINDS))
def test_a_writer_killed_at_any_step(world, tmp_path, kind):
    k = faults.KINDS[kind]
    tally = faults.Tally(k.name)
    for point in faults.points(faults.steps(k, world, tmp_path), SAMPLE, SEED):
        shutil.rmtree(faults.trial(k, world, tmp_path, point, tally))
    assert tally.failures == [], tally.failures[:5]
    assert (tally.wrong_loads, tally.lost_lines, tally.hangs, tally.internal_errors) == (0,) * 4
    assert tally.faults >= tally.trials - 1  # the chosen points were reached (the last may not)


def test_a_real_job_reads_what_a_killed_publisher_left(world, tmp_path, unsealed_results):
    golden = unsealed_results
    k = faults.KINDS["publish"]
    d = tmp_path / "left"
    k.start(world, d)
    half = faults.steps(k, world, tmp_path) // 2
    from support import killpoints

    t = killpoints.run(k.writer, half, tmp_path, *k.args(world, d),
                       env=faults.fresh_state(tmp_path / "state"))
    assert t.killed
    assert faults.real_job_reads(d / "cache", world.pub, golden) == []
