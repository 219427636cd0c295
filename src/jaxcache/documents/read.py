"""Reading jaxcache's own JSON documents back: run records, bench results, audits.

Each is read through the trusted-input loader (trust/inputs/trusted_file.py: whoever can change the
file decides what jaxcache concludes) and checked against what its readers use (validate.py), so a
malformed document is one line naming the field, never a traceback.
"""

from __future__ import annotations

from jaxcache import validate as v
from jaxcache.documents import kinds
from jaxcache.errors import JaxcacheError
from jaxcache.fingerprint import model as fingerprint
from jaxcache.text import safe
from jaxcache.trust.findings import Verdict
from jaxcache.trust.inputs import trusted_file as inputs


class DocumentError(JaxcacheError):
    """A document that is not what its reader needs."""


_EXPECTED = {"record": "a jaxcache run record", "audit": "an audit document "
              "(jaxcache audit --format json)", "bench result": "a jaxcache bench result"}


def load_json(path: str, kind: inputs.Kind, also: frozenset[int] = frozenset()
              ) -> dict[str, object]:
    """A JSON object from a trusted file; `kind` names it in errors ("record", "audit");
    `also`: owners besides you and root (trusted_file.read)."""
    found = inputs.read(path, kind, also=also)
    assert found is not None
    return object_from(found.data, path, kind.name)


def object_from(data: bytes, path: str, kind: str) -> dict[str, object]:
    """The JSON object in `data` (the bytes of `path`), or one line saying why it is none."""
    try:
        doc = v.parse_json(data)
    except v.Unreadable as exc:
        if str(exc).startswith("not JSON"):
            raise DocumentError(f"{safe(path)} is {exc}: expected "
                                f"{_EXPECTED.get(kind, 'a jaxcache ' + kind)}") from None
        raise DocumentError(f"cannot read {kind} {safe(path)}: {exc}") from None
    if not isinstance(doc, dict):
        raise DocumentError(f"{safe(path)} is not a jaxcache {kind} (not a JSON object)")
    return doc


def _of_kind(doc: dict[str, object], schema: str, spec: v.Check, path: str, what: str
             ) -> dict[str, object]:
    """A document of one kind (its schema id exactly), checked against what its readers use."""
    if doc.get("schema") != schema:
        raise DocumentError(f"{safe(path)} is not a jaxcache {what} ({schema})")
    return _check(doc, spec, path, what)


def _check(doc: dict[str, object], spec: v.Check, path: str, what: str) -> dict[str, object]:
    try:
        spec(doc, "")
    except v.Invalid as exc:
        raise DocumentError(f"{safe(path)} is not a valid {what}: {exc}") from None
    return doc


# --- run records (docs/reference/run-record.md): what explain reads -------------------------

RECORD_SCHEMAS = (kinds.schema("run"),)  # the versions a reader understands
_OPT_NUM, _OPT_TEXT = v.nullable(v.NUMBER), v.nullable(v.TEXT)

MODULE = v.obj({"name": v.TEXT}, {
    "outcome": _OPT_TEXT, "reason": _OPT_TEXT,
    "reason_detail": v.nullable(v.obj(optional={
        "compile_s": v.NUMBER, "threshold_s": v.NUMBER, "entry_bytes": v.ANY,
        "threshold_bytes": v.ANY, "message": v.ANY})),
    "input_shapes": _OPT_TEXT, "compile_or_load_s": _OPT_NUM, "compile_s_logged": _OPT_NUM,
    "min_compile_time_at_compile": _OPT_NUM, "entry_bytes": _OPT_NUM,
    "cache_dir_at_compile": _OPT_TEXT, "cache_dir": _OPT_TEXT,
    "errors": v.nullable(v.list_of(v.obj(optional={"message": v.TEXT}))),
    "key_components": v.nullable(v.map_of(v.ANY)),
    "in_progress": v.nullable(v.BOOLEAN),
    "cache_key": _OPT_TEXT, "cache_enabled_at_compile": v.nullable(v.BOOLEAN),
})
_OPT_INT = v.nullable(v.INTEGER)
# Which process of the job an entry is (docs/reference/run-record.md, "Ranks"): null without a
# probe.
IDENTITY = v.nullable(v.obj({
    "process_index": _OPT_INT, "process_count": _OPT_INT, "host": v.TEXT,
    "launcher": v.nullable(v.obj({
        "kind": v.nullable(v.one_of("slurm", "ompi", "pmi", "jax")), "rank": _OPT_INT,
        "size": _OPT_INT, "job_id": _OPT_TEXT, "step_id": _OPT_TEXT, "local_rank": _OPT_INT}))}))
CACHE_VIEW = v.nullable(v.obj(optional={
    "path": _OPT_TEXT, "device": _OPT_TEXT, "inode": _OPT_INT, "fs_type": _OPT_TEXT,
    "jaxlib": _OPT_TEXT, "xla_flags": _OPT_TEXT}))
# Read from the record and, for a subprocess, from its own entry over the record's.
_PROCESS_FIELDS = {
    "identity": IDENTITY, "cache_view": CACHE_VIEW,
    "modules": v.list_of(MODULE),
    "cache_options_at_first_compile": v.nullable(v.obj(optional={
        "jax_persistent_cache_min_compile_time_secs": _OPT_NUM,
        "jax_compilation_cache_dir": _OPT_TEXT,
        "jax_compilation_cache_max_size": _OPT_NUM})),
    "env_cache_dir_at_first_compile": _OPT_TEXT,
    "platform": v.nullable(v.obj()),
    # added up by records list/stats and explain (RunRecord.totals)
    "counts": v.nullable(v.obj(optional={
        "task_disabled_cache": v.NUMBER, "modules": v.INTEGER, "compile_requests": v.INTEGER,
        "hits": v.INTEGER, "misses": v.INTEGER, "read_errors": v.INTEGER,
        "outcomes": v.nullable(v.map_of(v.INTEGER))})),
    "env": v.nullable(v.obj()), "versions": v.nullable(v.obj()),
    # the build and host it ran on (docs/reference/run-record.md): records/fingerprints.py parses it
    "fingerprint": v.nullable(fingerprint.DOCUMENT), "fingerprint_unknown": _OPT_TEXT,
    "unverified": _OPT_TEXT, "unverified_allowed": v.nullable(v.BOOLEAN),
    "cache_dir": v.obj(optional={"path": _OPT_TEXT}),
    "probe": v.obj(optional={"loaded": v.BOOLEAN, "note": _OPT_TEXT}),
    "process": v.obj(optional={"wall_s": _OPT_NUM, "exit_code": _OPT_INT, "signal": _OPT_INT}),
    "argv": v.nullable(v.list_of(v.TEXT)), "pid": _OPT_INT,
    # a sealed run's reader and publisher (lifecycle/sealing.py summary), read by explain
    "seal": v.nullable(v.obj(optional={
        "path": _OPT_TEXT, "local": _OPT_TEXT, "signing_key": _OPT_TEXT,
        "rejections": v.nullable(v.list_of(v.obj(optional={
            "key": _OPT_TEXT, "directory": _OPT_TEXT, "status": _OPT_TEXT, "reason": _OPT_TEXT,
            "owner": v.ANY}))),
        "bucket_misses": v.nullable(v.list_of(v.obj(optional={
            "kind": _OPT_TEXT, "hint": _OPT_TEXT, "reason": v.ANY, "path": _OPT_TEXT}))),
        "prefetch": v.nullable(v.obj(optional={
            "planned": _OPT_INT, "prefetched": _OPT_INT, "used": _OPT_INT, "wasted": _OPT_INT,
            "not_fetched": _OPT_INT, "not_found": _OPT_INT, "failed": _OPT_INT,
            "rejected": _OPT_INT, "saved_s": _OPT_NUM, "source": _OPT_TEXT,
            "early_error": _OPT_TEXT}))})),
}
RECORD = v.obj(
    {"modules": _PROCESS_FIELDS["modules"], "process": _PROCESS_FIELDS["process"],
     "cache_dir": _PROCESS_FIELDS["cache_dir"], "probe": _PROCESS_FIELDS["probe"],
     "subprocesses": v.list_of(v.obj({"modules": _PROCESS_FIELDS["modules"]},
                                     _PROCESS_FIELDS))},
    {**_PROCESS_FIELDS, "ranks": v.nullable(v.obj(optional={
        "expected": _OPT_INT, "seen": v.list_of(v.INTEGER), "absent": v.list_of(v.INTEGER),
        "problems": v.list_of(v.obj({"text": v.TEXT}, {"rank": _OPT_INT, "what": v.TEXT}))}))})


def load_record(path: str, also: frozenset[int] = frozenset()) -> dict[str, object]:
    """A run record, refusing what this version cannot understand; `also`: owners besides
    you and root whose records are read (users a policy trusts)."""
    return record_from(load_json(path, inputs.RECORD, also), path)


def record_from(doc: dict[str, object], path: str) -> dict[str, object]:
    """The checks of load_record, on a document already read."""
    schema = doc.get("schema")
    if not isinstance(schema, str) or not schema.startswith("jaxcache.run/"):
        raise DocumentError(f"{safe(path)} is not a jaxcache run record")
    if schema not in RECORD_SCHEMAS:
        raise DocumentError(f"{safe(path)} has schema {safe(schema)}, newer than this jaxcache "
                            f"understands ({', '.join(RECORD_SCHEMAS)}): upgrade jaxcache")
    return _check(doc, RECORD, path, "run record")


def record_problem(doc: dict[str, object]) -> str | None:
    """Why a JSON object is not a run record of a schema this jaxcache reads, in the words
    `jaxcache records` lists a skipped file with; None: it is one (the checks of load_record,
    worded for a file found in a directory rather than named)."""
    schema = doc.get("schema")
    if schema not in RECORD_SCHEMAS:
        return f"schema {safe(str(schema))}, not a run record this jaxcache reads"
    try:
        RECORD(doc, "")
    except v.Invalid as exc:
        return f"not a valid run record: {exc}"
    return None


# --- bench results (schema: documents/schemas/bench.schema.json), read by decide, --compare

BENCH_SCHEMA = kinds.schema("bench")
# no-significant-difference: results of jaxcache before one noticeable rule (still read)
BENCH_VERDICTS = ("saves", "too-small", "inconclusive", "no-significant-difference",
                  "nothing-cached", "warm-missed", "no-data")
_SPREAD = v.obj({"median": _OPT_NUM})
_ARMS = v.obj({"cold": _SPREAD, "warm": _SPREAD})


def _interval(value: object, where: str) -> None:
    if isinstance(value, dict) and value.get("low") is not None and (
            value.get("estimate") is None or value.get("high") is None):
        raise v.Invalid(where, "an interval with estimate and high wherever low is given")


# decide re-judges a bench's saving from these (bench/noticeable.py shift_from_json)
_SHIFT = v.nullable(v.both(v.obj({"estimate": _OPT_NUM, "low": _OPT_NUM, "high": _OPT_NUM},
                                 {"confidence": _OPT_NUM, "asked_confidence": _OPT_NUM,
                                  "min_p": _OPT_NUM, "n": v.nullable(v.INTEGER),
                                  "m": v.nullable(v.INTEGER)}),
                           _interval))
BENCH = v.obj({
    "summary": v.obj({"verdict": v.one_of(*BENCH_VERDICTS), "phases": v.map_of(_ARMS),
                      "saving_s": _SHIFT},
                     {"message": v.ANY, "wall": v.nullable(_ARMS), "compile_saving_s": _SHIFT,
                      # issue 26: the covariate-adjusted saving, judged when judged_on says so
                      "adjusted_saving_s": _SHIFT,
                      "judged_on": v.nullable(v.one_of("adjusted", "unadjusted")),
                      # the bar the bench judged by, which decide applies by default
                      "noticeable_bar": v.nullable(v.obj({}, {"min_saving_s": _OPT_NUM,
                                                             "min_fraction": _OPT_NUM}))}),
}, {
    "command": v.nullable(v.list_of(v.TEXT)),
    "comparable": v.nullable(v.map_of(v.ANY)),
    "fingerprints": v.nullable(v.map_of(fingerprint.DOCUMENT)),
    "samples": v.nullable(v.list_of(v.obj({}, {
        "fingerprint": _OPT_TEXT,  # the id of one of `fingerprints`
        # per rank (bench/per_rank.py): what decide names when a rank compiled again
        "missed_ranks": v.nullable(v.list_of(v.obj({}, {"rank": v.nullable(v.INTEGER)}))),
    }))),
})


def load_bench(path: str) -> dict[str, object]:
    """An earlier `bench --json` result."""
    return bench_from(load_json(path, inputs.BENCH), path)


def bench_from(doc: dict[str, object], path: str) -> dict[str, object]:
    """The checks of load_bench, on a document already read. A result of jaxcache before
    issue 40 called `comparable` `fingerprint`: read as such."""
    old = doc.get("fingerprint")
    if "comparable" not in doc and isinstance(old, dict) and "schema" not in old:
        doc = {**{k: val for k, val in doc.items() if k != "fingerprint"}, "comparable": old}
    return _of_kind(doc, BENCH_SCHEMA, BENCH, path, "bench result")


# --- audits (docs/reference/audit.md, `audit --format json`): what decide reads --------------

AUDIT_SCHEMA = kinds.schema("audit")
VERDICTS = tuple(verdict.value for verdict in Verdict)
AUDIT = v.obj({
    "verdict": v.one_of(*VERDICTS),
    "judged_for": v.obj({"user": v.ANY}),
}, {
    "requested": _OPT_TEXT, "path": _OPT_TEXT, "resolved": _OPT_TEXT,
    "untrusted_writers": v.list_of(v.TEXT),
    "writers": v.list_of(v.obj({"principal": v.TEXT, "chain": v.list_of(v.TEXT)},
                               {"trust": v.ANY})),
    "findings": v.list_of(v.obj({"message": v.TEXT}, {"effect": v.ANY, "code": v.ANY})),
    "processes": v.nullable(v.obj(optional={
        "uses": v.nullable(v.list_of(v.obj({"user": v.ANY, "pid": v.ANY, "how": v.ANY})))})),
    "entries": v.nullable(v.obj(optional={
        "entries": v.nullable(v.list_of(v.obj({"owner": v.ANY},
                                              {"flags": v.list_of(v.ANY)})))})),
})


def load_audit(path: str) -> dict[str, object]:
    """An earlier `audit --format json`."""
    return audit_from(load_json(path, inputs.AUDIT), path)


def audit_from(doc: dict[str, object], path: str) -> dict[str, object]:
    """The checks of load_audit, on a document already read."""
    return _of_kind(doc, AUDIT_SCHEMA, AUDIT, path, "audit")
