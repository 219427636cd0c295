"""What decide judges, typed once at its edge: the audit (from the audit just run, or an
earlier `audit --format json` that documents/read.py checked) and each bench (its `--json`
document, checked the same way). Every string key decide reads is read here, once.
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxcache.bench.analysis import Outcome
from jaxcache.bench.bench_document import BenchDocument, LeftOut
from jaxcache.bench.estimates import Shift
from jaxcache.documents.fields import items, mapping, mappings
from jaxcache.text import safe
from jaxcache.trust.findings import SEAL_KEYS, UNVERIFIABLE, Verdict
from jaxcache.trust.kernel.principals import Trust

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from jaxcache.trust.judgement.audit import AuditReport

# what two benches' jobs must agree on (the bench's `comparable`): the key's inputs, and the
# jaxlib builds (a digest JAX's key leaves out)
KEY_FIELDS = ("jaxlib", "builds", "backend", "device_kind", "device_count", "xla_flags")


@dataclass(frozen=True, slots=True)
class WriterFact:
    principal: str
    trusted_by_policy: bool
    untrusted: bool
    chain: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AuditFacts:
    """The audit as decide weighs it."""

    verdict: Verdict
    path: str | None  # the directory, resolved (else as given), as the decision names it
    shown: str | None  # resolved, else as requested: what the evidence names
    user: str
    writers: tuple[WriterFact, ...]
    untrusted: tuple[str, ...]  # the untrusted writers' names, sorted
    unverifiable: tuple[str, ...]  # the messages of unverifiable findings
    key_notes: tuple[str, ...]  # seal.keys findings: the trusted keys' state
    users: tuple[str, ...]  # who else uses the directory: processes, owners of entries

    @classmethod
    def of(cls, report: AuditReport) -> AuditFacts:
        """From the audit just run."""
        uses = report.processes.uses if report.processes is not None else ()
        entries = report.inventory.entries if report.inventory is not None else ()
        users = {f"{u.user} (process {u.pid}, {u.how})" for u in uses}
        users |= {f"{e.owner} (owns entries)" for e in entries if "foreign-owner" in e.flags}
        return cls(report.verdict, _escaped(report.resolved or report.path),
                   report.resolved or report.requested, str(report.judged_for.name),
                   tuple(WriterFact(str(w.principal), w.trust is Trust.POLICY,
                                    w.trust is Trust.UNTRUSTED, w.chain) for w in report.writers),
                   tuple(sorted(report.writer_names(Trust.UNTRUSTED))),
                   tuple(f.message for f in report.findings if f.effect == UNVERIFIABLE),
                   tuple(f.message for f in report.findings if f.code == SEAL_KEYS),
                   tuple(sorted(users)))

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> AuditFacts:
        """From an audit document documents/read.py checked (audit_from)."""
        writers = tuple(WriterFact(str(w["principal"]), w.get("trust") == "policy",
                                   w.get("trust") == "untrusted",
                                   tuple(str(c) for c in items(w["chain"])))
                        for w in mappings(doc.get("writers")))
        findings = mappings(doc.get("findings"))
        users = {f"{u['user']} (process {u['pid']}, {u['how']})"
                 for u in mappings(mapping(doc.get("processes")).get("uses"))}
        users |= {f"{e['owner']} (owns entries)"
                  for e in mappings(mapping(doc.get("entries")).get("entries"))
                  if "foreign-owner" in items(e.get("flags"))}
        path, shown = doc.get("resolved") or doc.get("path"), \
            doc.get("resolved") or doc.get("requested")
        return cls(Verdict(str(doc["verdict"])), path if isinstance(path, str) else None,
                   shown if isinstance(shown, str) else None,
                   str(mapping(doc.get("judged_for")).get("user")), writers,
                   tuple(str(u) for u in items(doc.get("untrusted_writers"))),
                   tuple(str(f["message"]) for f in findings
                         if f.get("effect") == UNVERIFIABLE),
                   tuple(str(f["message"]) for f in findings if f.get("code") == SEAL_KEYS),
                   tuple(sorted(users)))


@dataclass(frozen=True, slots=True)
class WarmRun:
    hit: bool  # it hit, and no rank missed
    missed_ranks: tuple[int | None, ...]


@dataclass(frozen=True, slots=True)
class BenchFacts:
    """One bench result as decide weighs it."""

    command: str  # as one line, escaped
    key_inputs: tuple[tuple[str, object], ...]  # KEY_FIELDS, then jax: the comparable's values
    jax: object
    warm: tuple[WarmRun, ...]
    missed_ranks: tuple[int | None, ...]  # of every sample, cold or warm, in order
    outcome: Outcome
    message: str | None
    judged: Shift | None  # the saving the bench's verdict judged
    cold_wall_s: float | None
    bar: tuple[float | None, float | None]  # the bench's own min_saving_s, min_fraction
    phases: tuple[tuple[str, float | None], ...]  # each phase's cold median
    left_out: LeftOut | None
    thresholds_set: tuple[tuple[str, str], ...]  # (JAX option, value) the bench set

    @classmethod
    def of(cls, bench: BenchDocument) -> BenchFacts:
        """From a bench result, typed (bench/bench_document.py)."""
        judged = bench.judged
        return cls(safe(" ".join(bench.command)),
                   tuple((k, bench.comparable.get(k)) for k in KEY_FIELDS),
                   bench.comparable.get("jax"),
                   tuple(WarmRun(s.hit and not s.missed_ranks, s.missed_ranks)
                         for s in bench.samples if s.kind == "warm"),
                   tuple(r for s in bench.samples for r in s.missed_ranks),
                   Outcome(bench.verdict), bench.message,
                   judged.shift() if judged is not None else None,
                   bench.wall.cold if bench.wall is not None else None, bench.bar,
                   tuple((name, arms.cold) for name, arms in bench.phases), bench.left_out,
                   tuple((k, safe(v)) for k, v in bench.thresholds_set))

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> BenchFacts:
        """From a bench document documents/read.py checked (bench_from)."""
        return cls.of(BenchDocument.from_json(doc))


def _escaped(path: str | None) -> str | None:
    return None if path is None else safe(path)
