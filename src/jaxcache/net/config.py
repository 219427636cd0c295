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
from dataclasses import dataclass

from jaxcache.net.address import classify, split_host_port
from jaxcache.net.launch_env import MTLS_VARS, LaunchEnv

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["FIRST_MTLS_VERSION", "K8S_PORT", "MTLS_VARS", "TPU_PORT", "Plan", "coordinator_of",
           "detect", "plan"]

# Ports JAX picks when it auto-detects a cluster (jax/_src/clusters, 0.10.2)
K8S_PORT, TPU_PORT = 55527, 8482
FIRST_MTLS_VERSION = (0, 11, 0)  # mTLS for the coordination service arrived after 0.10.2


@dataclass(frozen=True, slots=True)
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


def detect(env: Mapping[str, str]) -> tuple[str | None, str | None, int | None]:
    """(source, coordinator host:port, port) as JAX would work them out."""
    return coordinator_of(LaunchEnv.from_environ(env))


def coordinator_of(env: LaunchEnv) -> tuple[str | None, str | None, int | None]:
    """detect() for an environment already parsed."""
    override = env.coordinator_port
    if env.coordinator_address:
        addr = env.coordinator_address
        return "explicit", addr, split_host_port(addr)[1]
    if env.slurm is not None:
        port = int(override) if override else _ephemeral(int(env.slurm.job_id))
        return "slurm", f"{_slurm_host(env.slurm.step_node_list)}:{port}", port
    uri = env.ompi_uri
    if uri:
        port = int(override) if override else _ephemeral(int(uri.split(".", 1)[0]) // 2**12)
        m = re.search(r"tcp://(.+?)[,:]|tcp6://\[(.+?)[,\]]", uri)
        host = next((g for g in m.groups() if g), "?") if m else "?"
        return "ompi", f"{host}:{port}", port
    if env.kubernetes_host:
        port = int(override) if override else K8S_PORT
        return "k8s", f"<pod of process 0>:{port}", port
    if env.tpu_worker_hostnames or env.tpu_process_addresses:
        port = int(override) if override else TPU_PORT
        hosts = env.tpu_process_addresses or env.tpu_worker_hostnames or ""
        return "tpu", f"{hosts.split(',')[0].split(':')[0]}:{port}", port
    return None, None, None


def _version_tuple(version: str | None) -> tuple[int, ...]:
    if not version:
        return (0,)
    return tuple(int(re.sub(r"\D.*", "", p) or 0) for p in version.split(".")[:3])


def plan(env: Mapping[str, str], jax_version: str | None) -> Plan:
    launch = LaunchEnv.from_environ(env)
    source, coordinator, port = coordinator_of(launch)
    bind_explicit = bool(launch.bind_address)
    bind = launch.bind_address or (f"[::]:{port}" if port else None)
    bind_class = classify(split_host_port(bind)[0]) if bind else None
    supported = _version_tuple(jax_version) >= FIRST_MTLS_VERSION
    configured = supported and launch.mtls_files
    share = launch.share_binary.lower() in ("1", "true", "yes")
    return Plan(source, coordinator, port, bind, bind_explicit, bind_class, supported,
                configured, share, jax_version)
