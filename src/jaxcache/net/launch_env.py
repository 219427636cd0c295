"""The launch environment a JAX job's distributed setup reads (jax.distributed.initialize and
jax._src.clusters), parsed once from an environment (os.environ, or /proc/PID/environ): the
variables as typed fields, what config.py and sockets.py read instead of string keys.
"""

from __future__ import annotations

from dataclasses import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

# what Slurm auto-detection needs, all of them (jax/_src/clusters/slurm_cluster.py)
_SLURM = ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID")
MTLS_VARS = ("JAX_MTLS_CERT_FILE", "JAX_MTLS_KEY_FILE", "JAX_MTLS_CA_FILE",
             "JAX_MTLS_PEER_URI_PREFIX", "JAX_DISTRIBUTED_VERIFY_SECURE_CREDENTIALS")


@dataclass(frozen=True, slots=True)
class Slurm:
    """A Slurm step's variables, present only where all that JAX's detection needs are."""

    job_id: str
    step_node_list: str


@dataclass(frozen=True, slots=True)
class LaunchEnv:
    """The variables as set; an empty value is kept as set (a reader decides what "" means)."""

    coordinator_address: str | None = None  # JAX_COORDINATOR_ADDRESS
    coordinator_port: str | None = None  # JAX_COORDINATOR_PORT
    bind_address: str | None = None  # JAX_COORDINATOR_BIND_ADDRESS
    slurm: Slurm | None = None
    ompi_uri: str | None = None  # OMPI_MCA_orte_hnp_uri
    kubernetes_host: str | None = None  # KUBERNETES_SERVICE_HOST
    tpu_worker_hostnames: str | None = None  # TPU_WORKER_HOSTNAMES
    tpu_process_addresses: str | None = None  # TPU_PROCESS_ADDRESSES
    mtls_files: bool = False  # JAX_MTLS_CERT_FILE, _KEY_FILE and _CA_FILE all set, non-empty
    share_binary: str = ""  # JAX_SHARE_BINARY_BETWEEN_HOSTS

    @classmethod
    def from_environ(cls, env: Mapping[str, str]) -> LaunchEnv:
        slurm = Slurm(env["SLURM_JOB_ID"], env["SLURM_STEP_NODELIST"]) \
            if all(k in env for k in _SLURM) else None
        return cls(
            coordinator_address=env.get("JAX_COORDINATOR_ADDRESS"),
            coordinator_port=env.get("JAX_COORDINATOR_PORT"),
            bind_address=env.get("JAX_COORDINATOR_BIND_ADDRESS"),
            slurm=slurm,
            ompi_uri=env.get("OMPI_MCA_orte_hnp_uri"),
            kubernetes_host=env.get("KUBERNETES_SERVICE_HOST"),
            tpu_worker_hostnames=env.get("TPU_WORKER_HOSTNAMES"),
            tpu_process_addresses=env.get("TPU_PROCESS_ADDRESSES"),
            mtls_files=all(env.get(v) for v in MTLS_VARS[:3]),
            share_binary=env.get("JAX_SHARE_BINARY_BETWEEN_HOSTS", ""),
        )
