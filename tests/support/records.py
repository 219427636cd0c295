"""A run record's modules as written, for tests that read or edit the JSON itself."""

from __future__ import annotations

from jaxcache.records.run_document import RunRecord


def all_modules(doc: dict) -> list[tuple[str, dict]]:
    """(process label, module) for the main probed process and every probed subprocess: the
    record's own module objects, so that a test's edit changes the record."""
    record = RunRecord.from_json(doc)
    labels = ["main", *(f"pid {p.entry_pid}" for p in record.processes[1:])]
    return [(label, m.raw) for label, p in zip(labels, record.processes, strict=True)
            for m in p.modules]
