"""What a job started from this environment would expose, before it runs.

Mirrors jax.distributed.initialize and jax._src.clusters on JAX 0.10.2 (the same default bind
and ports on 0.12.0.1; mTLS from 0.11, FIRST_MTLS_VERSION; 0.12's Cloud TPU detection also
reads TPU_PROCESS_ADDRESSES_PATH, which this does not): the coordinator address
comes from JAX_COORDINATOR_ADDRESS or cluster auto-detection (Slurm, Open MPI, Kubernetes, Cloud
TPU, with JAX_COORDINATOR_PORT overriding their ports), and process 0 binds the coordination
service to JAX_COORDINATOR_BIND_ADDRESS or, by default, to [::]:<port>: every interface.
"""

from __future__ import annotations

import re

from jaxcache.net.address import classify, split_host_port
from jaxcache.values import frozen

# Ports JAX picks when it auto-detects a cluster (jax/_src/clusters, 0.10.2)
K8S_PORT, TPU_PORT = 55527, 8482
MTLS_VARS = ("JAX_MTLS_CERT_FILE", "JAX_MTLS_KEY_FILE", "JAX_MTLS_CA_FILE",
             "JAX_MTLS_PEER_URI_PREFIX", "JAX_DISTRIBUTED_VERIFY_SECURE_CREDENTIALS")
FIRST_MTLS_VERSION = (0, 11, 0)  # mTLS for the coordination service arrived after 0.10.2


@frozen
class Plan:
    """The coordination service a job in this environment would start."""

    source: str | None  # explicit | slurm | ompi | k8s | tpu | None (no distributed setup)
    coordinator: str | None  # host:port the processes connect to
    port: int | None
    bind: str | None  # host:port process 0 listens on
    bind_explicit: bool
    bind_class: str | None  # wildcard | loopback | specific
    mtls_supported: bool
    mtls_configured: bool
    share_binary: bool
    jax_version: str | None


def _ephemeral(job_id: int) -> int:
    """JAX's choice for Slurm and Open MPI: the job id folded into [61440, 65535]."""
    return job_id % 2**12 + (65535 - 2**12 + 1)


def _slurm_host(node_list: str) -> str:
    """The first node of a Slurm node list, expanding a leading range like JAX does."""
    ind = node_list.find(",")
    bracket = node_list.find("[")
    if bracket == -1 or (ind != -1 and ind < bracket):
        return node_list[:ind] if ind != -1 else node_list
    prefix, suffix = node_list[:bracket], node_list[bracket + 1:]
    m = re.match(r"[0-9]+", suffix)
    return prefix + (m.group(0) if m else "")


def detect(env: dict[str, str]) -> tuple[str | None, str | None, int | None]:
    """(source, coordinator host:port, port) as JAX would work them out."""
    override = env.get("JAX_COORDINATOR_PORT")
    if env.get("JAX_COORDINATOR_ADDRESS"):
        addr = env["JAX_COORDINATOR_ADDRESS"]
        return "explicit", addr, split_host_port(addr)[1]
    slurm = ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID",
             "SLURM_LOCALID")
    if all(k in env for k in slurm):
        port = int(override) if override else _ephemeral(int(env["SLURM_JOB_ID"]))
        return "slurm", f"{_slurm_host(env['SLURM_STEP_NODELIST'])}:{port}", port
    uri = env.get("OMPI_MCA_orte_hnp_uri")
    if uri:
        port = int(override) if override else _ephemeral(int(uri.split(".", 1)[0]) // 2**12)
        m = re.search(r"tcp://(.+?)[,:]|tcp6://\[(.+?)[,\]]", uri)
        host = next((g for g in m.groups() if g), "?") if m else "?"
        return "ompi", f"{host}:{port}", port
    if env.get("KUBERNETES_SERVICE_HOST"):
        port = int(override) if override else K8S_PORT
        return "k8s", f"<pod of process 0>:{port}", port
    if env.get("TPU_WORKER_HOSTNAMES") or env.get("TPU_PROCESS_ADDRESSES"):
        port = int(override) if override else TPU_PORT
        hosts = env.get("TPU_PROCESS_ADDRESSES") or env.get("TPU_WORKER_HOSTNAMES") or ""
        return "tpu", f"{hosts.split(',')[0].split(':')[0]}:{port}", port
    return None, None, None


def _version_tuple(version: str | None) -> tuple[int, ...]:
    if not version:
        return (0,)
    return tuple(int(re.sub(r"\D.*", "", p) or 0) for p in version.split(".")[:3])


def plan(env: dict[str, str], jax_version: str | None) -> Plan:
    source, coordinator, port = detect(env)
    bind_explicit = bool(env.get("JAX_COORDINATOR_BIND_ADDRESS"))
    bind = env.get("JAX_COORDINATOR_BIND_ADDRESS") or (f"[::]:{port}" if port else None)
    bind_class = classify(split_host_port(bind)[0]) if bind else None
    supported = _version_tuple(jax_version) >= FIRST_MTLS_VERSION
    configured = supported and all(env.get(v) for v in MTLS_VARS[:3])
    share = env.get("JAX_SHARE_BINARY_BETWEEN_HOSTS", "").lower() in ("1", "true", "yes")
    return Plan(source, coordinator, port, bind, bind_explicit, bind_class, supported,
                configured, share, jax_version)
