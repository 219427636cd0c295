"""Why a rank other than 0 missed: its cache key against rank 0's, per module.

Two facts of JAX make a multi-process job's cache rank 0's alone on most platforms: only
process 0 writes ("Not writing persistent cache entry since process_id != 0",
jax/_src/compiler.py), and the device assignment is stripped from the key only when
`backend.platform == "gpu"` (jax/_src/cache_key.py). So where the key of rank r differs from
rank 0's, nobody ever writes rank r's key: it never hits and compiles on every start. The
ranks are compared within one record (`jaxcache run -- srun ...`) and across the per-rank
records of one job (`srun jaxcache run ...`, `explain runs/`).
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxcache.explain import pairing
from jaxcache.explain.key_causes import CAUSES
from jaxcache.text import safe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.records.run_document import ModuleEntry, ProcessEntry, RunRecord


@dataclass(frozen=True, slots=True)
class RankDiff:
    module: str
    input_shapes: str | None
    rank: int  # the rank that missed
    record: str
    reference_record: str  # where rank 0's module is
    platform: str | None
    components: tuple[str, ...]
    causes: tuple[str, ...]
    remedy: str


def _platform(proc: ProcessEntry) -> str | None:
    """The record's word for the backend, escaped: it is shown in causes and remedies."""
    backend = proc.backend
    return None if backend is None else safe(str(backend))


def _component_cause(name: str, platform: str | None, rank: int) -> str:
    where = platform or "this platform"
    if name == "compile_options" and platform == "gpu":
        return ("compile_options: another compile option differs between the ranks (on GPU "
                "JAX strips the device assignment): XLA flags, debug options, or the cache "
                "path on JAX <= 0.10")
    if name == "compile_options":
        return (f"compile_options: the device assignment (rank {rank}'s own devices) is part "
                "of the compile options; JAX strips it from the key only when "
                f"backend.platform == 'gpu' (jax/_src/cache_key.py), and this ran on {where}")
    if name == "accelerator_config":
        return ("accelerator_config: the topology fingerprint of the module's devices differs "
                "between the ranks (on CPU it does even for a computation over the global "
                "mesh, measured on JAX 0.10.2)")
    return f"{safe(name)}: {CAUSES.get(name, 'changed')}"


def _remedy(platform: str | None) -> str:
    if platform == "cpu":
        return ("on CPU nothing in the cache removes this: only rank 0 gains, the other ranks "
                "compile on every start (measure per rank with `jaxcache bench`). One process "
                "with several CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count=N) "
                "caches everything; jax_share_binary_between_hosts does not help (on CPU the "
                "other ranks wait for an executable under their own key, which process 0 "
                "never publishes: the job hangs)")
    if platform == "gpu":
        return ("on GPU the ranks agree on the key unless another component differs: give "
                "every rank the same jaxlib, XLA flags and cache path, and one directory they "
                "all read (process 0 writes it)")
    where = platform or "this platform"
    return (f"on {where} the device assignment stays in the key: only a computation over the "
            "global mesh (the same jit and mesh on every process) can have one key on every "
            "rank; a per-process computation (jit on local arrays) never will. "
            "jax_share_binary_between_hosts=True makes process 0 compile such a global "
            "computation once per run and send it to the others through the coordination "
            "service (unauthenticated: see `jaxcache net`)")


def rank_diffs(records: list[tuple[str, RunRecord]]) -> list[RankDiff]:
    """For each module a rank other than 0 did not hit, where rank 0 cached the same module
    (name and input shapes, paired by pairing.py's rule: equal keys first): the key
    components that differ, and why. Each rank's modules are those of the first process that
    ran it (for that name and input shapes)."""
    seen: dict[tuple[str, str | None], dict[int, list[tuple[str, ProcessEntry, ModuleEntry]]]]
    seen = {}
    for path, record in records:
        for proc in record.processes:
            rank = proc.rank
            if rank is None:
                continue
            for m in proc.modules:
                mods = seen.setdefault((m.name, m.input_shapes), {}).setdefault(rank, [])
                if m.key_components and (not mods or mods[0][1] is proc):
                    mods.append((path, proc, m))
    out = []
    for by_rank in seen.values():
        for rank, mods in by_rank.items():
            if rank == 0:
                continue
            for ref, (path, proc, m) in pairing.pair(by_rank.get(0, []), mods, lambda s: s[2]):
                if ref is None or not pairing.missed(ref[2], m):
                    continue
                ref_path, ref_proc, ref_m = ref
                a, b = ref_m.key_components or {}, m.key_components or {}
                changed = tuple(sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k)))
                if not changed:
                    continue  # the same key: rank 0's entry serves it from the next start on
                platform = _platform(proc) or _platform(ref_proc)
                causes = [f"only process 0 writes (\"Not writing persistent cache entry since "
                          f"process_id != 0\"), and rank {rank}'s key differs from rank 0's, "
                          f"so no process ever writes it: rank {rank} never hits and compiles "
                          "this module on every start"]
                causes += [_component_cause(k, platform, rank) for k in changed]
                out.append(RankDiff(safe(m.name), m.input_shapes, rank, path,
                                    ref_path, platform, changed, tuple(causes),
                                    _remedy(platform)))
    return out
