"""One record per rank: templates, per-rank default names, never two writers on one file."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support.jobs import jaxcache

from jaxcache.documents import schemas
from jaxcache.probe import rank_identity as ranks

SLURM = {"SLURM_PROCID": "1", "SLURM_NTASKS": "2"}


@pytest.mark.parametrize("given,env,expected", [
    ("r.json", {}, "r.json"),
    ("r.json", SLURM, "r.rank1.json"),
    ("out/r", SLURM, "out/r.rank1"),
    ("r-{rank}.json", SLURM, "r-1.json"),
    ("r-{pid}.json", SLURM, "r-4242.json"),
    ("r-{rank}.json", {}, "r-0.json"),
    ("r.json", {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4"}, "r.rank3.json"),
    ("r.json", {"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, "r.json"),  # one task: as given
])
def test_record_names(given, env, expected):
    assert ranks.record_path(given, env, pid=4242) == expected


def test_host_field_is_a_safe_file_name():
    name = ranks.record_path("r-{host}.json", {})
    assert "/" not in name[2:] and name.startswith("r-") and name.endswith(".json")


def test_unknown_field_is_one_line_and_exit_2(tmp_path):
    proc = jaxcache("run", "--cache-dir", str(tmp_path / "c"), "--record",
                    str(tmp_path / "r-{node}.json"), "--", sys.executable, "-c", "1")
    assert proc.returncode == 2 and "unknown field {node}" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and os.listdir(tmp_path) == []


def test_a_second_writer_on_one_record_is_refused_while_the_first_runs(tmp_path):
    rec = tmp_path / "r.json"
    go = tmp_path / "go"  # the first job runs until the test has seen the second refused
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "OMPI_"))}
    job = ("import os, sys, time; print('up', flush=True); end = time.monotonic() + 600\n"
           "while not os.path.exists(sys.argv[1]) and time.monotonic() < end: time.sleep(0.05)")
    first = subprocess.Popen([sys.executable, "-m", "jaxcache", "run", "--quiet", "--cache-dir",
                              str(tmp_path / "c"), "--record", str(rec), "--", sys.executable,
                              "-c", job, str(go)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert first.stdout.readline().strip() == "up"
    second = jaxcache("run", "--cache-dir", str(tmp_path / "c"), "--record", str(rec), "--",
                      sys.executable, "-c", "1", env=env)
    go.touch()
    assert second.returncode == 2 and "another jaxcache process is writing" in second.stderr
    first.communicate(timeout=120)
    assert first.returncode == 0
    assert json.loads(rec.read_text())["schema"].startswith("jaxcache.run/")


def test_srun_two_ranks_write_two_records(slurm, tmp_path):
    pytest.importorskip("jax")
    job = tmp_path / "job.py"
    job.write_text("import jax, jax.numpy as jnp\nprint(float(jnp.ones(2).sum()))\n")
    rec = tmp_path / "r.json"
    env = slurm.env({**os.environ, "JAX_PLATFORMS": "cpu"})
    proc = subprocess.run(["srun", "-n", "2", "--overcommit", sys.executable, "-m", "jaxcache",
                           "run", "--quiet", "--cache-dir", str(tmp_path / "c"), "--record",
                           str(rec), "--", sys.executable, str(job)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.glob("r*.json")) == ["r.rank0.json", "r.rank1.json"]
    for n in (0, 1):
        assert json.loads((tmp_path / f"r.rank{n}.json").read_text())["process"]["exit_code"] == 0
    assert slurm.drained(timeout=120) == []  # a finished job leaves the queue


def test_explain_takes_a_directory_of_per_rank_records(tmp_path):
    pytest.importorskip("jax")
    runs = tmp_path / "runs"
    runs.mkdir(mode=0o700)
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "SLURM_NTASKS": "2"}
    for rank in (0, 1):
        proc = jaxcache("run", "--quiet", "--cache-dir", str(tmp_path / "c"), "--record",
                        str(runs / "r.json"), "--", sys.executable, "-c",
                        "import jax.numpy as jnp; jnp.ones(2).sum()",
                        env={**env, "SLURM_PROCID": str(rank)})
        assert proc.returncode == 0, proc.stderr
    for rank in (0, 1):  # each rank's record, by the shipped schema
        doc = json.loads((runs / f"r.rank{rank}.json").read_text())
        pytest.importorskip("jsonschema").validate(doc, schemas.load("run"))
        assert doc["identity"]["launcher"] == {"kind": "slurm", "rank": rank, "size": 2,
                                               "job_id": None, "step_id": None,
                                               "local_rank": None}
    out = jaxcache("explain", "--format", "json", str(runs))
    assert out.returncode in (0, 1), out.stderr
    doc = json.loads(out.stdout)
    assert [os.path.basename(r) for r in doc["records"]] == ["r.rank0.json",
                                                             "r.rank1.json"]
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = jaxcache("explain", str(empty))
    assert bad.returncode == 2 and "no .json run records" in bad.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a UTS namespace")
@pytest.mark.parametrize("host", ["..", ".", "../..", ".hidden"])
def test_a_host_name_never_makes_a_dot_component(tmp_path, host):
    """Issue 22: --record DIR/{host}/r.json on a host named '..' wrote outside DIR. The name
    is filled in as a piece of a file name that never starts with a dot."""
    records = tmp_path / "records"
    records.mkdir()
    wanted = "_" + "".join(c if c.isalnum() or c in "._-" else "_" for c in host)[1:]
    (records / wanted).mkdir()
    argv = [sys.executable, "-m", "jaxcache", "run", "-q", "--cache-dir", str(tmp_path / "c"),
            "--record", str(records / "{host}" / "r.json"), "--", sys.executable, "-c", "1"]
    # the kernel takes any name (the hostname tool would refuse these)
    rename = ("import os, socket, sys; socket.sethostname(sys.argv[1]); "
              "os.execv(sys.argv[2], sys.argv[2:])")
    proc = subprocess.run(["unshare", "--uts", sys.executable, "-c", rename, host, *argv],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (records / wanted / "r.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "records"]  # nothing outside
