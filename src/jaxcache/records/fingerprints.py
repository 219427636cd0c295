"""Each process's fingerprint in a run record: written from the probe's document, read back typed.

Writing (`of_probe`, in jaxcache's own process after the job): the probe records the fingerprint
`jaxcache run` handed the job when it speaks of the jaxlib the process loaded, with the
backend's facts (probe/document.py `fingerprint`). Where it does not (a job that runs another
Python than jaxcache's), the probe records the package folders the process loaded, and they are
hashed here, through the same memo as `jaxcache run` (fingerprint/memo.py): on the same host
only, since the CPU and the files are this host's. Anything else is "not known", with why.

Reading (`facts_of`): each process of a record as a typed `ProcessFacts`, its fingerprint parsed
once here (Fingerprint.from_json) from a record documents/read.py already checked, so explain
and decide compare values, never another package's dict keys.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from jaxcache import validate
from jaxcache.fingerprint.model import Accelerator, Fingerprint
from jaxcache.records.reading import processes, rank_of
from jaxcache.text import safe

NO_PROBE = "the process left no final probe document (killed, or it never compiled)"


def _accelerator(doc: object) -> Accelerator | None:
    if not isinstance(doc, dict):
        return None
    return Accelerator(*(str(doc.get(k) or "")[:256 if k != "platform_version" else 8192]
                         for k in ("platform", "platform_version", "device_kind",
                                   "compute_capability")))


def _roots(value: object) -> list[tuple[str, str]]:
    return [(str(r[0]), str(r[1])) for r in value or ()
            if isinstance(r, list) and len(r) == 2 and all(isinstance(x, str) for x in r)] \
        if isinstance(value, list) else []


def of_probe(probe: dict[str, Any]) -> tuple[dict[str, object] | None, str | None]:
    """(the record's `fingerprint` document, None) or (None, why it is not known)."""
    found = probe.get("fingerprint")
    if not isinstance(found, dict):
        return None, NO_PROBE
    host = (probe.get("identity") or {}).get("host")
    here = os.uname().nodename
    if host != here:
        return None, (f"the process ran on host {safe(str(host))}, not on {safe(here)} where "
                      "jaxcache ran: its build and CPU were not seen")
    accel = _accelerator(found.get("accelerator"))
    given = found.get("given")
    if given is not None:
        try:
            fp = Fingerprint.from_json(given, "the fingerprint handed to the job")
        except validate.Invalid as exc:
            return None, f"the fingerprint handed to the job is malformed: {exc}"
        return fp.with_accelerator(accel).to_json(), None
    roots = _roots(found.get("roots"))
    if not any(name == "jaxlib" for name, _ in roots):
        return None, "the process loaded no jaxlib the probe could name"
    from jaxcache.fingerprint import binaries, cpu, memo

    kept = memo.load()
    build = binaries.build(roots, kept)
    memo.save(kept)
    fp = Fingerprint(build, cpu.machine(), cpu.read(), accel)
    return fp.to_json(), None


def record_fields(probe: dict[str, Any] | None) -> dict[str, object]:
    """`fingerprint` and `fingerprint_unknown` of one process entry of a record."""
    doc, why = of_probe(probe) if probe is not None else (None, NO_PROBE)
    return {"fingerprint": doc, "fingerprint_unknown": why}


@dataclass(frozen=True)
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
