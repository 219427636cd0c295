"""Writers whose disk fails under them (issue 42): from a seeded step on, every call fails as a
dead device fails it (EIO) or as a full disk does (ENOSPC: writes, fsyncs, creating opens and new
names; not reads, renames or removals). support/killpoints.py injects the errors in the writer's
own process, as SQLite's I/O-error tests do. After each: no reader loads a partial, other or
unsigned entry, nothing acknowledged is lost, the writer ended in one clear line (no traceback),
`verify` names what was left, and once the disk works again the next run completes.
"""

from __future__ import annotations

import shutil

import pytest
from support import faults

pytest.importorskip("cryptography")
pytest.importorskip("jax")

SEED = 7
SAMPLE = 2  # one seeded failing step per kind and error in `make test` (not the first: that
# one only shows the writer cannot start); the soak: 20 of each



@pytest.mark.parametrize("fault", ["EIO", "ENOSPC"])
@pytest.mark.parametrize("kind", sorted(faults.KINDS))
def test_a_writer_whose_disk_fails(world, tmp_path, kind, fault):
    k = faults.KINDS[kind]
    tally = faults.Tally(k.name, fault)
    steps = faults.steps(k, world, tmp_path)
    for point in faults.points(steps, SAMPLE, SEED, last=False)[1:]:
        shutil.rmtree(faults.trial(k, world, tmp_path, point, tally))
    assert tally.failures == [], tally.failures[:5]
    assert (tally.wrong_loads, tally.lost_lines, tally.hangs, tally.internal_errors) == (0,) * 4
    assert tally.faults == tally.trials  # every chosen step was reached
