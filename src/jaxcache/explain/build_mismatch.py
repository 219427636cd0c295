"""Processes that ran another build or on another kind of host: named before anything else.

JAX's cache key holds jaxlib's version string but no digest of its binaries, and on CPU it may
carry no target features (fingerprint/: what it leaves out). Two processes of the records given
that differ there may load each other's entries: an entry compiled by one build can crash or
misbehave in the other, whatever the outcomes say. So each process is compared with the first
whose fingerprint is known (rank 0 of the first record: the writer, since only process 0
writes), by the one rule (fingerprint/rule.py), and every difference is named with both values.
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxcache.fingerprint import rule
from jaxcache.records.run_document import ProcessFacts, facts_of
from jaxcache.text import safe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.records.run_document import RunRecord


@dataclass(frozen=True, slots=True)
class BuildDiff:
    record: str
    process: str  # "rank 1", "pid 123", "main"
    rank: int | None
    reference_record: str
    reference: str  # the process it is compared with ("rank 0")
    fields: tuple[str, ...]  # rule.Field values that differ: "build", "cpu features"...
    text: str  # "rank 1 runs another jaxlib build: digest 4f1c... (writer) vs 9a0e... (here)"


def _sentences(writer: ProcessFacts, reader: ProcessFacts) -> list[tuple[str, str]]:
    """(field, sentence) for what differs: the writer's entries loaded by the reader (the
    rule's own sentences), and the reader's CPU features the writer lacks (the other way)."""
    assert writer.fingerprint is not None and reader.fingerprint is not None
    out = [(d.field.value, d.sentence)
           for d in rule.judge(writer.fingerprint, reader.fingerprint).differences]
    for d in rule.judge(reader.fingerprint, writer.fingerprint).differences:
        if d.field is rule.Field.CPU_FEATURES:
            out.append((d.field.value, f"its CPU has {safe(d.writer)} that the writer's lacks"))
    return out


def named(d: rule.Difference, writer: str, reader: str) -> str:
    """One difference between two named processes or jobs, both values with their names
    (decide's evidence: jobs sharing a cache each write what the other reads)."""
    w, r = safe(d.writer), safe(d.reader)
    if d.field is rule.Field.BUILD:
        return f"another jaxlib build: digest {w} ({writer}) vs {r} ({reader})"
    if d.field is rule.Field.CPU_FEATURES:
        return f"the CPU of {writer} has {w} that the CPU of {reader} lacks"
    return f"another {d.field.value}: {w} ({writer}) vs {r} ({reader})"


def build_diffs(records: list[tuple[str, RunRecord]]) -> list[BuildDiff]:
    """For each process whose fingerprint differs from the reference process's (the facts
    records/run_document.py reads of each record's processes)."""
    known = [f for f in facts_of(records)
             if f.fingerprint is not None]
    if len(known) < 2:
        return []
    ref = known[0]
    out = []
    for f in known[1:]:
        found = _sentences(ref, f)
        if not found:
            continue
        text = "; ".join(s for _, s in found)
        out.append(BuildDiff(f.record, f.label, f.rank, ref.record, ref.label,
                             tuple(dict.fromkeys(name for name, _ in found)),
                             f"{f.label} ({safe(f.record)}) runs {text}; the writer is "
                             f"{ref.label} ({safe(ref.record)})"))
    return out
