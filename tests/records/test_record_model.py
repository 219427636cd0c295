"""The run record is built as its model (records/run_document.py's RunRecord): what the builder
returns is what is written (to_json) and what a reader gets back (from_json), value for value.
No JAX: the probes' documents are made here, as a job's probes would write them."""

from __future__ import annotations

import json
import os

import pytest

from jaxcache.documents import read as documents
from jaxcache.documents import schemas
from jaxcache.probe.runner import Outcome
from jaxcache.records import run_record as recordmod
from jaxcache.records.run_document import ModuleOutcome, Namespace, RunRecord


def _probe(pid: int, index: int, modules: list[dict], **more: object) -> dict:
    return {"pid": pid, "argv": ["python", "job.py"], "final": True, "started": 100.0 + index,
            "import_jax_started": 100.5 + index, "now": 103.0, "import_jax_s": 0.5,
            "identity": {"process_index": index, "process_count": 2, "host": os.uname().nodename,
                         "launcher": None},
            "cache_view": None, "jax": {"jax": "0.4.35", "jaxlib": "0.4.35"},
            "platform": {"backend": "cpu", "device_kind": "cpu", "device_count": 1},
            "cache_options_at_first_compile": {"jax_persistent_cache_min_compile_time_secs": 1.0},
            "env_cache_dir_at_first_compile": None,
            "counts": {"compile_requests": len(modules), "hits": 1, "writes": 1,
                       "task_disabled_cache": 0},
            "modules": modules, "warnings": ["a warning"],
            "cache_dirs": [{"path": "/elsewhere", "status": "refused", "how": "guard",
                            "reason": "not the directory jaxcache audited", "pid": pid}],
            **more}


def _module(name: str, outcome: str, key: str, **more: object) -> dict:
    said = dict.fromkeys(("fun_name", "reason", "reason_detail", "key_components",
                          "compile_s_logged", "retrieval_s", "jax_compile_time_saved_s",
                          "entry_bytes", "cache_dir_at_compile", "cache_dir",
                          "cache_dir_status", "cache_enabled_at_compile",
                          "min_compile_time_at_compile"))
    return {**said, "name": name, "input_shapes": "(f32[4],)", "outcome": outcome,
            "cache_key": key, "compile_or_load_s": 1.5, "trace_s": 0.1, "lower_s": 0.2,
            "errors": [], "in_progress": False, **more}


@pytest.fixture
def outcome(tmp_path):
    main = _probe(11, 0, [_module("jit_a", "hit", "ka"), _module("jit_b", "written", "kb"),
                          _module("jit_c", "miss", "kc"),
                          _module("jit_d", "miss", "kd", in_progress=True)],
                  cache_guard={"installed": False, "error": "RuntimeError: gone"})
    sub = _probe(12, 1, [_module("jit_a", "written", "ke", cache_dir="/elsewhere",
                                 cache_dir_status="refused")])
    return Outcome(("python", "job.py"), 11, 0, None, 2.0, 1.0, 0.5, 1 << 20, (main, sub))


def _built(outcome: Outcome, cache: str, run: recordmod.RunAudit | None) -> RunRecord:
    before = recordmod.DirSnapshot(cache, {"ka-cache": 10})
    after = recordmod.DirSnapshot(cache, {"ka-cache": 10, "kb-cache": 20})
    return recordmod.build(outcome, cache_dir=cache, verdict="PRIVATE", before=before,
                           after=after, env={"XLA_FLAGS": "--x", "HOME": "/h"}, cwd="/w",
                           run=run)


@pytest.mark.parametrize("by_run", [False, True])
def test_what_is_built_is_what_is_written_and_read_back(outcome, tmp_path, by_run):
    origin = {"yours": 1, "unknown": 0, "changed": 0, "ledger_problem": None,
              "not_yours": [], "other_build": [], "vouched_by": {}, "findings": []}
    run = recordmod.RunAudit(origin, Namespace("fingerprint", "i", "/p"), None,
                             False) if by_run else None
    record = _built(outcome, str(tmp_path), run)
    doc = json.loads(json.dumps(record.to_json()))
    assert documents.record_problem(doc) is None
    pytest.importorskip("jsonschema").validate(doc, schemas.load("run"))
    assert RunRecord.from_json(doc) == record
    assert ("unverified_allowed" in doc) is by_run
    assert ("origin" in doc["cache_dir"]) is by_run and ("namespace" in doc["cache_dir"]) is by_run


def test_the_builders_judgements_are_the_records_values(outcome, tmp_path):
    record = _built(outcome, str(tmp_path), None)
    main, sub = record.processes
    words = {m.name: (m.outcome, m.reason) for m in main.modules}
    assert words == {"jit_a": (ModuleOutcome.HIT, None), "jit_b": (ModuleOutcome.WRITTEN, None),
                     "jit_c": (ModuleOutcome.SKIPPED, "not-written-unexplained"),
                     "jit_d": (ModuleOutcome.IN_PROGRESS, "compile-unfinished")}
    assert sub.modules[0].reason == "dir-refused" and sub.entry_pid == 12 and main.pid == 11
    assert dict(main.counts.outcomes) == {"hit": 1, "written": 1, "skipped": 1, "in-progress": 1}
    assert record.cache_dir.new_files == (("kb-cache", 20),)
    assert record.guard_errors == ((11, "RuntimeError: gone"),)
    assert record.env == {"XLA_FLAGS": "--x"} and main.xla_flags == "--x"
    assert record.ranks.expected == 2 and record.ranks.seen == (0, 1)
    assert [(d.path, d.pids) for d in record.jax_cache_dirs] == [("/elsewhere", (11, 12))]
    doc = record.to_json()
    assert doc["subprocesses"][0]["modules"][0]["outcome"] == "skipped"
    assert doc["process"] == {"pid": 11, "exit_code": 0, "signal": None, "wall_s": 2.0,
                              "user_s": 1.0, "sys_s": 0.5, "peak_rss_bytes": 1 << 20}


def test_a_record_without_a_probe_says_so(tmp_path):
    empty = Outcome(("true",), 5, 0, None, 0.1, 0.0, 0.0, 0, ())
    record = _built(empty, str(tmp_path), None)
    doc = record.to_json()
    assert doc["probe"]["loaded"] is False and doc["probe"]["note"]
    assert doc["counts"] is None and doc["modules"] == [] and doc["subprocesses"] == []
    assert RunRecord.from_json(json.loads(json.dumps(doc))) == record
