"""The test cluster itself: what the multi-rank tests rely on Slurm to do."""

from __future__ import annotations

import signal
import subprocess


def test_two_ranks_of_one_step(slurm):
    out = subprocess.run(["srun", "-n", "2", "--overcommit", "sh", "-c",
                          "echo $SLURM_PROCID $SLURM_NTASKS $SLURM_STEP_NODELIST"],
                         env=slurm.env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr + slurm.log("slurmctld")
    assert sorted(out.stdout.splitlines()) == ["0 2 localhost", "1 2 localhost"]
    assert slurm.drained() == []


def test_sigterm_to_srun_cancels_the_step(slurm):
    srun = subprocess.Popen(["srun", "-n", "1", "sh", "-c", "echo up; exec sleep 300"],
                            env=slurm.env(), stdout=subprocess.PIPE, text=True)
    assert srun.stdout.readline().strip() == "up"
    (job,) = slurm.jobs()
    assert job.endswith("RUNNING")
    srun.send_signal(signal.SIGTERM)
    srun.wait(timeout=60)
    assert slurm.drained() == []
