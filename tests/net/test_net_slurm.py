"""`jaxcache net` inside a Slurm allocation: the coordinator port JAX derives from the job id
(61440 + id % 4096), statically and on the live listener, with Slurm's way to bind it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from support import paths
from support.jobs import jaxcache

pytest.importorskip("jax")
pytest.importorskip("psutil")

WORKER = str(paths.PROGRAMS / "slurm_worker.py")


def slurm_port(job_id: int) -> int:
    return 61440 + job_id % 4096


def test_net_inside_an_allocation_names_the_coordinator_and_the_slurm_remedy(slurm):
    proc = subprocess.run(["srun", "-n", "1", sys.executable, "-m", "jaxcache", "net",
                           "--format", "json"], env=slurm.env(), capture_output=True,
                          text=True, timeout=120)
    doc = json.loads(proc.stdout)
    (found,) = [f for f in doc["findings"] if f["code"] == "net.coordinator-exposed"]
    port = doc["plan"]["port"]
    assert doc["plan"]["source"] == "slurm" and port >= 61440
    assert f":{port}" in found["message"] and "batch script" in found["remedy"]


def test_live_names_the_slurm_coordinator_of_a_running_job(slurm, tmp_path):
    stop = tmp_path / "stop"
    env = slurm.env({**os.environ, "JAX_PLATFORMS": "cpu"})
    job = subprocess.Popen(["srun", "-n", "2", "--overcommit", sys.executable, WORKER,
                            str(stop)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        ready = [job.stdout.readline().split() for _ in range(2)]
        assert all(r[:1] == ["ready"] for r in ready), ready
        port = slurm_port(int(ready[0][2]))
        out = jaxcache("net", "--live", "--partial", "--format", "json")
        doc = json.loads(out.stdout)
        coord = [f for f in doc["findings"] if f["code"] == "net.listener-exposed"
                 and f":{port}" in f["message"]]
        assert coord and "derives from the slurm environment" in coord[0]["message"], doc
    finally:
        stop.touch()
        try:
            job.wait(timeout=60)
        except subprocess.TimeoutExpired:
            job.send_signal(signal.SIGTERM)
            job.wait(timeout=30)
    assert slurm.drained() == []
