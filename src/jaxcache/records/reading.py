"""Reading a run record's processes: which entries it holds, each one's rank, its modules.

Pure functions over the document, apart from run_record.py (which builds it and imports the
probe's and the audit's types), so that explain, bench, the per-rank views and the reports read
records without importing the builder.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

    from jaxcache.values import JsonObject


def processes(doc: JsonObject) -> list[JsonObject]:
    """The main probed process and every probed subprocess, each as its own record entry."""
    return [doc] + list(doc.get("subprocesses") or [])


def rank_of(proc: Mapping[str, Any]) -> int | None:
    """JAX's process index of a record entry, else its launcher's rank, else None."""
    ident = proc.get("identity") or {}
    if isinstance(ident.get("process_index"), int):
        return int(ident["process_index"])
    index = (proc.get("platform") or {}).get("process_index")
    if isinstance(index, int):
        return index
    launcher = ident.get("launcher") or {}
    return launcher.get("rank") if isinstance(launcher.get("rank"), int) else None


def all_modules(doc: JsonObject) -> list[tuple[str, JsonObject]]:
    """(process label, module) for the main probed process and every probed subprocess."""
    out = [("main", m) for m in doc.get("modules") or []]
    for sub in doc.get("subprocesses") or []:
        out += [(f"pid {sub.get('pid')}", m) for m in sub.get("modules") or []]
    return out


def in_record_order(probes: Iterable[JsonObject], main_pid: int | None) -> list[JsonObject]:
    """The probes in the order the record holds them: the job's own process first; without
    one (a launcher such as srun, which is not Python), the lowest rank first, so that
    `identity` at the top is rank 0's."""
    probes = list(probes)
    if probes and probes[0].get("pid") != main_pid:
        probes.sort(key=lambda p: (rank_of(p) is None, rank_of(p) or 0))
    return probes
