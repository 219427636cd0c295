"""Writers killed before each of their steps (a fixed, seeded sample; `make soak` takes
every step): a sealed publisher, the ledger's witness and gc of a sealed directory. After each
kill: no reader loads a partial, other or unsigned entry, no acknowledged ledger line is
lost, `verify` names what was left, and the next writer completes. Then a real JAX job reads
what the kills left and computes the same numbers (support/faults.py has the invariants).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support import faults, killpoints, paths

pytest.importorskip("cryptography")
pytest.importorskip("jax")

JOB = str(paths.PROGRAMS / "sealed_job.py")
SEED = 42
SAMPLE = 8  # kill points per kind in `make test`; scripts/soak.py takes all of them


def job(cache, pub: str, *extra: str) -> dict:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    proc = subprocess.run([sys.executable, JOB, str(cache), pub, *extra], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return faults.world(tmp_path_factory.mktemp("faults"), job)


def _checked(tally: faults.Tally) -> None:
    assert tally.failures == [], tally.failures[:5]
    assert (tally.wrong_loads, tally.lost_lines, tally.hangs, tally.internal_errors) == (0,) * 4
    assert tally.kills == tally.trials  # every chosen point was reached and killed there


def test_a_sealed_publisher_killed_at_any_step(world, tmp_path):
    listing = tmp_path / "entries.json"
    listing.write_text(json.dumps([(k, d.hex()) for k, d in world.entries]))
    probe = tmp_path / "probe"
    probe.mkdir(mode=0o700)
    steps = killpoints.count(faults.PUBLISH, tmp_path, str(probe), str(world.key), str(listing),
                             env=faults.fresh_state(tmp_path / "probe-state"))
    tally = faults.Tally("publish")
    for k in faults.points(steps, SAMPLE, SEED):
        faults.publish_trial(world, tmp_path, k, tally)
    _checked(tally)


def test_the_ledgers_witness_killed_at_any_step(tmp_path):
    steps = killpoints.count(faults.WITNESS, tmp_path, str(tmp_path / "probe" / "l"), "4")
    tally = faults.Tally("witness")
    for k in faults.points(steps, SAMPLE, SEED):
        faults.witness_trial(tmp_path, k, 4, tally)
    _checked(tally)


def test_gc_of_a_sealed_directory_killed_at_any_step_then_a_real_job_reads(world, tmp_path):
    probe = tmp_path / "probe"
    import shutil

    shutil.copytree(world.sealed, probe)
    env = faults.fresh_state(tmp_path / "probe-state")
    steps = killpoints.count(faults.COLLECT, tmp_path, str(probe), "0", env=env)
    tally = faults.Tally("gc")
    for k in faults.points(steps, SAMPLE, SEED):
        faults.gc_trial(world, tmp_path, k, tally)
    _checked(tally)
