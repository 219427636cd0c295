"""What the fuzzer drives: every parser of a document a writer controls, and what reads it.

Each target takes the bytes of one planted document and runs them through jaxcache's own
reading path (the same functions the commands call: one validator, then the consumers and
every report that shows the result, text and JSON). A target may end in jaxcache's own
one-line error (JaxcacheError) or succeed; any other exception is a bug the fuzzer reports.
Seeds are real documents from real runs (tests/attacks/fuzz_corpus/<target>/).

Used by tests/attacks/fuzz_run.py (atheris, coverage-guided) and tests/attacks/test_fuzz.py.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from jaxcache.documents import read as documents
from jaxcache.errors import JaxcacheError

CORPUS = Path(__file__).parent / "fuzz_corpus"
Target = Callable[[bytes], None]


def shown(text: str) -> str:
    """A report's text, as it reaches a terminal: nothing in it may steer the terminal. No
    character but the newline that Python would not print as itself: C0 and C1 controls,
    DEL, bidirectional marks and overrides, zero-width and separator characters."""
    for i, ch in enumerate(text):
        if ch != "\n" and not ch.isprintable():
            where = text[max(0, i - 80):i + 20]
            raise AssertionError(f"raw {ch!r} in a report: ...{where!r}")
    return text


def seed(target: str, name: str) -> bytes:
    return (CORPUS / target / name).read_bytes()


def _seed_doc(target: str, name: str) -> dict:
    return json.loads(seed(target, name))


def record(data: bytes) -> None:
    """A run record in a records folder or named to explain: records list, stats, explain."""
    from jaxcache.explain import reasons
    from jaxcache.records import record_dir as store
    from jaxcache.records.kept import totals as stats
    from jaxcache.report import explain as explain_report
    from jaxcache.report import records as records_report

    doc = store.parse(data)
    if isinstance(doc, str):  # skipped, with why: the reason is printed
        shown(records_report.list_text(store.Scan("/r", True, (),
                                               (store.Skipped("x.json", doc),))))
        return
    documents.record_from(doc, "x.json")
    found = store.Found("20261201T000000.000000000Z-1.json", "/r/x.json", 1, len(data), 1, 2,
                        doc)
    scan = store.Scan("/r", True, (found,), ())
    for fmt in records_report.FORMATS.values():
        shown(fmt["list"](scan))
        shown(fmt["stats"](stats.compute(scan)))
        shown(fmt["stats"](stats.compute(scan, cache="/tmp/c", since_ns=1)))
    other = _seed_doc("record", "cold.json")
    for pair in ([("x.json", doc)], [("cold.json", other), ("x.json", doc)],
                 [("x.json", doc), ("cold.json", other)]):
        result = reasons.explain_records(pair)
        shown(explain_report.render_text(result))
        shown(explain_report.render_json(result))


def bench(data: bytes) -> None:
    """An earlier `bench --json` result: decide --bench and bench --compare."""
    from jaxcache import decide
    from jaxcache.bench.bench_document import BenchDocument
    from jaxcache.bench.comparable import ab
    from jaxcache.report import decide as decide_report
    from jaxcache.report.bench import compare as bench_compare
    from jaxcache.report.bench import json as bench_json

    doc = documents.bench_from(documents.object_from(data, "b.json", "bench result"), "b.json")
    other = _seed_doc("bench", "bench.json")
    typed, other_typed = BenchDocument.from_json(doc), BenchDocument.from_json(other)
    for x, y, names in ((typed, other_typed, ("b.json", "a.json")),
                        (other_typed, typed, ("a.json", "b.json"))):
        shown(bench_compare.render(ab(x, y), x, y, *names))
        shown(bench_json.compare(ab(x, y), x, y, *names))
    for audit in (_seed_doc("audit", "private.json"),):  # the audit target varies audits
        result = decide.decide(decide.AuditFacts.from_json(audit),
                               [decide.BenchFacts.from_json(b) for b in (doc, other)])
        shown(decide_report.render_text(result))
        shown(decide_report.render_json(result))


def audit(data: bytes) -> None:
    """An earlier `audit --format json`: decide --audit."""
    from jaxcache import decide
    from jaxcache.report import decide as decide_report

    doc = documents.audit_from(documents.object_from(data, "a.json", "audit"), "a.json")
    for benches in ([], [_seed_doc("bench", "bench.json")]):
        result = decide.decide(decide.AuditFacts.from_json(doc),
                               [decide.BenchFacts.from_json(b) for b in benches])
        shown(decide_report.render_text(result))
        shown(decide_report.render_json(result))


def signature(data: bytes) -> None:
    """A planted .sig beside an entry: the sealed reader's and verify's checks."""
    from jaxcache.seal.signing import signature_rule as sig
    from jaxcache.trust.inputs import public_keys as trustkeys
    from jaxcache.trust.inputs import signing_keys as keys

    entry = seed("signature", "entry")
    meta = json.loads(seed("signature", "entry.sig"))
    trusted = trustkeys.parse_public(meta["public_key"], "root")
    from dataclasses import replace

    from jaxcache.trust.rules import keyring

    other = keys.generate("other").public
    expired = replace(trusted, not_after=0.0, signing_time=True)
    rings = [keyring.KeyRing({trusted.raw: trusted, other.raw: other}, needed=2),
             keyring.KeyRing({other.raw: other}, revoked=frozenset({trusted.raw})),
             keyring.KeyRing({expired.raw: expired})]
    checks = [sig.vouch(meta["key"], data, {trusted.raw: trusted}).check,
              sig.check(meta["key"], entry, data, {trusted.raw: trusted}),
              sig.check(meta["key"], entry, data, {})]
    for ring in rings:  # the planted file as the first signature and as every co-signature
        checks.append(sig.check(meta["key"], entry, data, ring, lambda _id: data))
        checks.append(sig.check(meta["key"], entry, seed("signature", "entry.sig"), ring,
                                lambda _id: data))
    for c in checks:
        assert c.status in (sig.VALID, sig.UNSIGNED, sig.BAD, sig.UNKNOWN_KEY, sig.REVOKED,
                            sig.EXPIRED, sig.NOT_YET_VALID, sig.TOO_FEW), c
        assert isinstance(c.reason, str)


def policy(data: bytes) -> None:
    """A policy file (--policy or the config file): the whole model built from it."""
    from jaxcache.trust.inputs import policy_toml
    from jaxcache.trust.kernel.principals import Accounts
    from jaxcache.trust.rules import keyring

    result = policy_toml.parse(data, "/p/policy.toml", _accounts(Accounts))
    for path in ("/srv/jax-cache", "/srv/jax-cache/sub", "/tmp/x", "gs://bucket/prefix"):
        ring = keyring.for_rule(result.rule_for(path))  # parse() refused what contradicts
        ring.states()


_ACCOUNTS: list = []


def _accounts(cls):
    if not _ACCOUNTS:
        _ACCOUNTS.append(cls())
    return _ACCOUNTS[0]


def public_key(data: bytes) -> None:
    """A .pub file or a key text given as --trusted-key, or held in a signature."""
    from jaxcache.trust.inputs import public_keys as trustkeys

    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        return  # load_public says so in one line before parsing
    trustkeys.parse_public(text, source="k.pub")


def signing_key(data: bytes) -> None:
    """A private key file (seal --signing-key, run --sealed --signing-key)."""
    from jaxcache.trust.inputs import signing_keys as keys

    keys.signing_from(data, "k.key")


def recognizers(data: bytes) -> None:
    """What an existing output file is taken for before jaxcache replaces it (-o FILE)."""
    from jaxcache.cli import common
    from jaxcache.documents import claim as outputs

    for recognize in (outputs.json_schema("jaxcache.run/"), outputs.png_from_jaxcache,
                      common._sarif):
        assert recognize(data) in (True, False)


TARGETS: dict[str, Target] = {
    "record": record, "bench": bench, "audit": audit, "signature": signature,
    "policy": policy, "public_key": public_key, "signing_key": signing_key,
    "recognizers": recognizers,
}


def one(target: Target, data: bytes) -> None:
    """Run `target` on `data`; jaxcache's own one-line errors are fine, one line each."""
    try:
        target(data)
    except JaxcacheError as exc:
        assert str(exc) and "internal error" not in str(exc), str(exc)


def corpus(target: str) -> list[bytes]:
    folder = CORPUS / target
    return [p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()] if folder.is_dir() \
        else []


if __name__ == "__main__":  # replay: python tests/attacks/fuzz_targets.py TARGET FILE...
    import sys

    name, *files = sys.argv[1:]
    for f in files:
        one(TARGETS[name], Path(f).read_bytes())
        print(f"{os.path.basename(f)}: ok")
