"""`jaxcache net`: JAX's own cluster detection as the oracle, real listeners, a real attacker."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

import pytest
from support import paths
from support.jobs import jaxcache
from support.users import IS_ROOT

from jaxcache.net import config

pytest.importorskip("jax")

WORKER = str(paths.PROGRAMS / "net_worker.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


ENVS = {
    "slurm": {"SLURM_JOB_ID": "12345", "SLURM_STEP_NODELIST": "node[007-009],gpu1",
              "SLURM_NTASKS": "4", "SLURM_PROCID": "0", "SLURM_LOCALID": "0"},
    "ompi": {"OMPI_MCA_orte_hnp_uri": "1531576320.0;tcp://10.96.0.1,10.148.0.1:34911",
             "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "0",
             "OMPI_COMM_WORLD_LOCAL_RANK": "0"},
}


@pytest.mark.parametrize("name", sorted(ENVS))
@pytest.mark.parametrize("override", [None, "23456"])
def test_auto_detected_ports_match_jax_itself(name, override, monkeypatch):
    from jax._src.clusters import ompi_cluster, slurm_cluster

    env = dict(ENVS[name])
    for k in list(os.environ):
        if k.startswith(("SLURM_", "OMPI_", "JAX_", "KUBERNETES_", "TPU_")):
            monkeypatch.delenv(k)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    cls = {"slurm": slurm_cluster.SlurmCluster, "ompi": ompi_cluster.OmpiCluster}[name]
    assert cls.is_env_present()
    expected = cls.get_coordinator_address(timeout_secs=None, override_coordinator_port=override)
    if override:
        env["JAX_COORDINATOR_PORT"] = override
    source, coordinator, port = config.detect(env)
    assert (source, coordinator) == (name, expected)
    assert port == int(expected.rsplit(":", 1)[1])


def test_kubernetes_and_tpu_ports_are_jaxs_constants():
    from jax._src.clusters import cloud_tpu_cluster, k8s_cluster

    _, _, k8s = config.detect({"KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    assert k8s == int(k8s_cluster.K8sCluster._coordinator_port) == 55527
    _, addr, tpu = config.detect({"TPU_WORKER_HOSTNAMES": "t1,t2", "TPU_WORKER_ID": "0"})
    assert tpu == int(cloud_tpu_cluster.coordinator_port) == 8482 and addr == "t1:8482"
    _, _, port = config.detect({"KUBERNETES_SERVICE_HOST": "x", "JAX_COORDINATOR_PORT": "7000"})
    assert port == 7000


@pytest.mark.parametrize("env,exit_code,code", [
    ({"JAX_COORDINATOR_ADDRESS": "10.1.2.3:9000"}, 1, "net.coordinator-exposed"),
    ({"JAX_COORDINATOR_ADDRESS": "127.0.0.1:9000"}, 1, "net.coordinator-exposed"),
    ({"JAX_COORDINATOR_ADDRESS": "127.0.0.1:9000",
      "JAX_COORDINATOR_BIND_ADDRESS": "127.0.0.1:9000"}, 0, "net.coordinator"),
    ({"JAX_COORDINATOR_ADDRESS": "10.1.2.3:9000",
      "JAX_COORDINATOR_BIND_ADDRESS": "10.1.2.3:9000"}, 1, "net.coordinator-exposed"),
    ({**ENVS["slurm"]}, 1, "net.coordinator-exposed"),
    ({}, 0, "net.no-coordinator"),
])
def test_static_check(env, exit_code, code):
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("SLURM_", "OMPI_", "JAX_", "KUBERNETES_", "TPU_"))}
    proc = jaxcache("net", "--format", "json", env={**clean, **env})
    doc = json.loads(proc.stdout)
    assert proc.returncode == exit_code, proc.stdout
    assert code in {f["code"] for f in doc["findings"]}
    assert "net.not-covered" in {f["code"] for f in doc["findings"]}


def test_mtls_variables_are_ignored_only_by_a_jax_without_mtls():
    """JAX <= 0.10 has no mTLS for the coordination service: the variables are ignored and
    net says so; from 0.11 (the pinned JAX on Python 3.12+) they are honoured."""
    from jaxcache import jaxcompat

    env = {**os.environ, "JAX_COORDINATOR_ADDRESS": "10.1.2.3:9000",
           "JAX_MTLS_CERT_FILE": "c", "JAX_MTLS_KEY_FILE": "k", "JAX_MTLS_CA_FILE": "a"}
    doc = json.loads(jaxcache("net", "--format", "json", env=env).stdout)
    installed = jaxcompat.installed_version("jax")
    has_mtls = installed is not None and config.plan({}, installed).mtls_supported
    assert ("net.mtls-ignored" in {f["code"] for f in doc["findings"]}) == (not has_mtls)
    # 10.1.2.3 is no loopback address: exposed, unless mTLS authenticates who joins
    assert doc["exposed"] == (not has_mtls)
    plan = config.plan({"JAX_COORDINATOR_ADDRESS": "10.1.2.3:9000", "JAX_MTLS_CERT_FILE": "c",
                        "JAX_MTLS_KEY_FILE": "k", "JAX_MTLS_CA_FILE": "a"}, "0.11.0")
    assert plan.mtls_configured  # a JAX with mTLS honours them


class Job:
    """A real 2-process jax.distributed job on localhost, kept up while we look at it."""

    def __init__(self, bind: str | None = None):
        self.port = _free_port()
        env = {**os.environ, "JAX_PLATFORMS": "cpu",
               "JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{self.port}"}
        if bind:
            env["JAX_COORDINATOR_BIND_ADDRESS"] = f"{bind}:{self.port}"
        self.procs = [subprocess.Popen([sys.executable, WORKER, str(i)], env=env,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                      for i in range(2)]
        for p in self.procs:
            assert p.stdout.readline().strip() == "ready"

    def close(self):
        for p in self.procs:
            p.stdin.close()
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def net_pid(pid: int):
    proc = jaxcache("net", "--pid", str(pid), "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_coordinator_is_a_wildcard_listener_unless_bound_to_loopback():
    job = Job()
    try:
        rc, doc = net_pid(job.procs[0].pid)
        [coord] = [li for li in doc["live"]["listeners"] if li["port"] == job.port]
        assert coord["kind"] == "wildcard" and coord["service"].startswith("coordination")
        assert rc == 1 and doc["exposed"]
    finally:
        job.close()
    job = Job(bind="127.0.0.1")
    try:
        rc, doc = net_pid(job.procs[0].pid)
        [coord] = [li for li in doc["live"]["listeners"] if li["port"] == job.port]
        assert coord["kind"] == "loopback" and coord["address"].endswith("127.0.0.1")
        assert rc == 0 and not doc["exposed"]
        assert "other local users can still reach" in json.dumps(doc)
    finally:
        job.close()


def test_profiler_server_is_detected():
    port = _free_port()
    proc = subprocess.Popen([sys.executable, WORKER, "profiler", str(port)],
                            env={**os.environ, "JAX_PLATFORMS": "cpu"}, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        rc, doc = net_pid(proc.pid)
        [li] = [li for li in doc["live"]["listeners"] if li["port"] == port]
        assert li["kind"] == "wildcard" and rc == 1
        live = json.loads(jaxcache("net", "--live", "--format", "json").stdout)
        assert proc.pid in live["live"]["processes"]
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def test_no_such_pid():
    proc = jaxcache("net", "--pid", "999999999")
    assert proc.returncode == 2 and "no such process" in proc.stderr


@pytest.fixture
def netns():
    """A second host: its own network namespace and address, joined to ours by a veth pair."""
    if not IS_ROOT or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 to make a network namespace")
    tag = f"jx{os.getpid() % 100000}"
    ns, host_if, peer_if = f"{tag}ns", f"{tag}a", f"{tag}b"
    cmds = [["ip", "netns", "add", ns],
            ["ip", "link", "add", host_if, "type", "veth", "peer", "name", peer_if],
            ["ip", "link", "set", peer_if, "netns", ns],
            ["ip", "addr", "add", "10.213.7.1/30", "dev", host_if],
            ["ip", "link", "set", host_if, "up"],
            ["ip", "netns", "exec", ns, "ip", "addr", "add", "10.213.7.2/30", "dev", peer_if],
            ["ip", "netns", "exec", ns, "ip", "link", "set", peer_if, "up"]]
    try:
        for c in cmds:
            r = subprocess.run(c, capture_output=True, text=True)
            if r.returncode:
                pytest.skip(f"the kernel refused a network namespace: {r.stderr.strip()}")
        yield ns
    finally:
        subprocess.run(["ip", "link", "del", host_if], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def _connect_from(ns: str, port: int) -> bool:
    code = ("import socket,sys\ntry:\n    socket.create_connection(('10.213.7.1', "
            f"{port}), timeout=3).close()\nexcept OSError:\n    sys.exit(1)\n")
    return subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", code],
                          capture_output=True, timeout=30).returncode == 0


def test_an_attacker_host_reaches_the_wildcard_coordinator_only(netns):
    for bind, reachable in ((None, True), ("127.0.0.1", False)):
        job = Job(bind=bind)
        try:
            assert _connect_from(netns, job.port) is reachable
            rc, doc = net_pid(job.procs[0].pid)
            assert doc["exposed"] is reachable and rc == (1 if reachable else 0)
        finally:
            job.close()  # waits for both processes to end
