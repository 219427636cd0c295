"""Which launcher started this process, and as which rank: read from its environment.

Standard library only and no jaxcache imports: the probe (probe/site.py) loads this file by
path in the job's own Python (launch.py copies it beside the probe), and rank_identity.py imports
it, so the record and the record's file name read the same variables the same way.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

# (kind, rank, size, job id, step id, local rank), in the order JAX's cluster detection tries
# them (jax/_src/clusters: Slurm, Open MPI, then MPICH-style PMI); JAX_PROCESS_ID /
# JAX_NUM_PROCESSES is what a hand-rolled launcher passes to jax.distributed.initialize.
LAUNCHERS = (
    ("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_LOCALID"),
    ("ompi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", None, None,
     "OMPI_COMM_WORLD_LOCAL_RANK"),
    ("pmi", "PMI_RANK", "PMI_SIZE", None, None, None),
    ("jax", "JAX_PROCESS_ID", "JAX_NUM_PROCESSES", None, None, None),
)


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and value.strip().isdigit() else None


def identify(env: Mapping[str, str] | None = None) -> dict[str, str | int | None]:
    """{"kind", "rank", "size", "job_id", "step_id", "local_rank"}: the first launcher whose
    rank variable is set; every value None outside a launcher."""
    env = os.environ if env is None else env
    for kind, rank, size, job, step, local in LAUNCHERS:
        if _int(env.get(rank)) is not None:
            return {"kind": kind, "rank": _int(env.get(rank)), "size": _int(env.get(size)),
                    "job_id": env.get(job) if job else None,
                    "step_id": env.get(step) if step else None,
                    "local_rank": _int(env.get(local)) if local else None}
    return {"kind": None, "rank": None, "size": None, "job_id": None, "step_id": None,
            "local_rank": None}
