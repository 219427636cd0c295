"""Each process of a run record as a typed `ProcessFacts`: what explain and decide compare.

The record's processes are parsed once here, leniently (documents/fields.py), from a record
documents/read.py already checked: its fingerprint with Fingerprint.from_json
(records/fingerprints.py wrote it), so explain and decide compare values, never another
package's dict keys.
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxcache import validate
from jaxcache.documents.fields import mapping, mappings
from jaxcache.fingerprint.model import Fingerprint
from jaxcache.records.reading import rank_of
from jaxcache.text import safe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


@dataclass(frozen=True, slots=True)
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

    @classmethod
    def from_json(cls, path: str, proc: Mapping[str, object],
                  record: Mapping[str, object]) -> ProcessFacts:
        """One process entry `proc` of the record at `path` (the record itself for its main
        process, or one of its `subprocesses`)."""
        rank = rank_of(proc)
        label = (f"rank {rank}" if rank is not None else
                 "main" if proc is record else f"pid {proc.get('pid')}")
        fp = proc.get("fingerprint")
        try:
            parsed = Fingerprint.from_json(fp) if fp is not None else None
        except validate.Invalid:  # documents/read.py refuses such a record before
            parsed = None
        unknown = "" if parsed is not None else str(
            proc.get("fingerprint_unknown")
            or "the record has no fingerprint (an older jaxcache)")
        versions = mapping(proc.get("versions"))
        platform = mapping(proc.get("platform"))
        view = mapping(proc.get("cache_view"))
        flags = view.get("xla_flags") if "xla_flags" in view else \
            mapping(record.get("env")).get("XLA_FLAGS")
        shapes = sorted({(str(m.get("name") or "?"), str(m.get("input_shapes") or "?"))
                         for m in mappings(proc.get("modules"))})
        return cls(path, label, rank, str(mapping(proc.get("identity")).get("host") or "?"),
                   parsed, safe(unknown), _text(versions.get("jax")),
                   _text(versions.get("jaxlib")), _text(platform.get("backend")),
                   _text(platform.get("device_kind")), _text(flags), tuple(shapes))


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def facts_of(records: Sequence[tuple[str, Mapping[str, object]]]) -> list[ProcessFacts]:
    """Every probed process of these records (path, record), rank 0 first within a record."""
    out: list[ProcessFacts] = []
    for path, record in records:
        probed = bool(record.get("identity")) or bool(mapping(record.get("probe")).get("loaded"))
        procs = ([record] if probed else []) + mappings(record.get("subprocesses"))
        procs.sort(key=lambda p: (rank_of(p) is None, rank_of(p) or 0))
        out += [ProcessFacts.from_json(path, p, record) for p in procs]
    return out
