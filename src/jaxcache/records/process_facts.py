"""Each process of a run record as a typed `ProcessFacts`: what explain and decide compare.

Its fingerprint is parsed once here (Fingerprint.from_json) from a record documents/read.py
already checked (records/fingerprints.py wrote it), so explain and decide compare values,
never another package's dict keys.
"""

from __future__ import annotations

from typing import Any

from jaxcache import validate
from jaxcache.fingerprint.model import Fingerprint
from jaxcache.records.reading import processes, rank_of
from jaxcache.text import safe
from jaxcache.values import frozen


@frozen
class ProcessFacts:
    """What one process of a record ran on and with: what decides whether its cache entries
    can serve another process (the build and host outside JAX's key, the rest inside it)."""

    record: str  # the record's path
    label: str  # "rank 1", "pid 123" or "main"
    rank: int | None
    host: str
    fingerprint: Fingerprint | None
    unknown: str  # why the fingerprint is not known ("" when it is)
    jax: str | None
    jaxlib: str | None
    backend: str | None
    device_kind: str | None
    xla_flags: str | None
    shapes: tuple[tuple[str, str], ...]  # (module, input shapes), sorted

    @property
    def who(self) -> str:
        """'rank 1 of r.json' (escaped)."""
        return f"{self.label} of {safe(self.record)}"


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _facts(path: str, proc: dict[str, Any], record: dict[str, Any]) -> ProcessFacts:
    rank = rank_of(proc)
    label = (f"rank {rank}" if rank is not None else
             "main" if proc is record else f"pid {proc.get('pid')}")
    fp = proc.get("fingerprint")
    try:
        parsed = Fingerprint.from_json(fp) if fp is not None else None
    except validate.Invalid:  # documents/read.py refuses such a record before
        parsed = None
    unknown = "" if parsed is not None else str(
        proc.get("fingerprint_unknown") or "the record has no fingerprint (an older jaxcache)")
    versions = proc.get("versions") or {}
    platform = proc.get("platform") or {}
    view = proc.get("cache_view") or {}
    flags = view.get("xla_flags") if "xla_flags" in view else \
        (record.get("env") or {}).get("XLA_FLAGS")
    shapes = sorted({(str(m.get("name") or "?"), str(m.get("input_shapes") or "?"))
                     for m in proc.get("modules") or []})
    return ProcessFacts(path, label, rank, str((proc.get("identity") or {}).get("host") or "?"),
                        parsed, safe(unknown), _text(versions.get("jax")),
                        _text(versions.get("jaxlib")), _text(platform.get("backend")),
                        _text(platform.get("device_kind")), _text(flags), tuple(shapes))


def facts_of(records: list[tuple[str, dict[str, Any]]]) -> list[ProcessFacts]:
    """Every probed process of these records (path, record), rank 0 first within a record."""
    out: list[ProcessFacts] = []
    for path, record in records:
        procs = [p for p in processes(record) if p is not record or record.get("identity")
                 or (record.get("probe") or {}).get("loaded")]
        procs.sort(key=lambda p: (rank_of(p) is None, rank_of(p) or 0))
        out += [_facts(path, p, record) for p in procs]
    return out
