"""Documents read back (records, bench results, audits): the field at fault is named, types are
checked, fields a newer writer adds are accepted."""

from __future__ import annotations

import json

import pytest
from support.jobs import jaxcache

IDENTITY = {"process_index": 1, "process_count": 2, "host": "n1",
            "launcher": {"kind": "slurm", "rank": 1, "size": 2, "job_id": "7", "step_id": "0",
                         "local_rank": 1}}
RECORD = {"schema": "jaxcache.run/1", "process": {"wall_s": 2.0}, "cache_dir": {"path": "/c"},
          "probe": {"loaded": True}, "identity": IDENTITY,
          "subprocesses": [{"pid": 2, "identity": IDENTITY, "modules": []}],
          "modules": [{"name": "jit_f", "outcome": "written", "compile_s_logged": 1.5,
                       "entry_bytes": 1000}]}
BENCH = {"schema": "jaxcache.bench/1", "command": ["python", "job.py"],
         "summary": {"verdict": "saves", "phases": {"trace": {"cold": {"median": 1.0},
                                                              "warm": {"median": 1.0}}},
                     "saving_s": {"estimate": 5.0, "low": 4.0, "high": 6.0}}}
AUDIT = {"schema": "jaxcache.audit/1", "verdict": "UNSAFE", "judged_for": {"user": "root"},
         "writers": [{"principal": "everyone", "trust": "untrusted", "chain": ["a", "b"]}]}


def _with(doc: dict, path: tuple, value) -> dict:
    doc = json.loads(json.dumps(doc))
    node = doc
    for key in path[:-1]:
        node = node[key]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


@pytest.mark.parametrize("command,doc,path,value,message", [
    ("explain", RECORD, ("modules", 0, "compile_s_logged"), "1.5",
     "modules[0].compile_s_logged must be a number or null"),
    ("explain", RECORD, ("modules", 0, "name"), KeyError,
     "modules[0].name must be present (a string)"),
    ("explain", RECORD, ("modules", 0, "entry_bytes"), float("nan"),
     "modules[0].entry_bytes must be a number or null"),
    ("explain", RECORD, ("process", "wall_s"), 10 ** 30, "process.wall_s must be a number"),
    ("explain", RECORD, ("subprocesses",), [{"pid": 1}],
     "subprocesses[0].modules must be present"),
    ("explain", RECORD, ("cache_options_at_first_compile",), {
        "jax_persistent_cache_min_compile_time_secs": "1.0"},
     "cache_options_at_first_compile.jax_persistent_cache_min_compile_time_secs must be"),
    ("explain", RECORD, ("subprocesses", 0, "identity", "process_index"), "1",
     "subprocesses[0].identity.process_index must be an integer or null"),
    ("explain", RECORD, ("identity", "launcher", "kind"), "lsf",
     "identity.launcher.kind must be one of slurm, ompi, pmi, jax or null"),
    ("explain", RECORD, ("identity", "host"), KeyError, "identity.host must be present"),
    ("explain", RECORD, ("identity", "launcher", "job_id"), 7,
     "identity.launcher.job_id must be a string or null"),
    ("bench", BENCH, ("summary", "phases", "trace", "cold"), [],
     "summary.phases.trace.cold must be an object"),
    ("bench", BENCH, ("summary", "saving_s", "high"), None,
     "summary.saving_s must be an interval with estimate and high wherever low is given"),
    ("bench", BENCH, ("summary", "verdict"), "great",
     "summary.verdict must be one of saves, "),
    ("bench", BENCH, ("command",), "python job.py", "command must be a list of strings or null"),
    ("audit", AUDIT, ("writers", 0, "chain"), "a b", "writers[0].chain must be a list of str"),
    ("audit", AUDIT, ("verdict",), "FINE", "verdict must be one of PRIVATE"),
])
def test_the_field_at_fault_is_named(tmp_path, command, doc, path, value, message):
    bad = tmp_path / "doc.json"
    bad.write_text(json.dumps(_with(doc, path, value)))
    good_bench = tmp_path / "bench.json"
    good_bench.write_text(json.dumps(BENCH))
    good_audit = tmp_path / "audit.json"
    good_audit.write_text(json.dumps({**AUDIT, "verdict": "PRIVATE"}))
    argv = {"explain": ["explain", str(bad)],
            "bench": ["decide", "--audit", str(good_audit), "--bench", str(bad)],
            "audit": ["decide", "--audit", str(bad), "--bench", str(good_bench)]}[command]
    proc = jaxcache(*argv)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert message in proc.stderr and "internal error" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_fields_a_newer_writer_adds_are_accepted(tmp_path):
    """Forward compatible: a per-module `cache_dir` and new top-level fields are read."""
    record = _with(RECORD, ("modules", 0, "cache_dir"), "/c")
    record["cache_dirs_used"] = [{"path": "/c", "verdict": "PRIVATE"}]
    record["something_new"] = {"x": [1, 2]}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(record))
    proc = jaxcache("explain", "--format", "json", str(path))
    assert proc.returncode in (0, 1), proc.stderr
    assert json.loads(proc.stdout)["modules"][0]["name"] == "jit_f"
    bad = _with(RECORD, ("modules", 0, "cache_dir"), 7)
    path.write_text(json.dumps(bad))
    assert "modules[0].cache_dir must be a string or null" in jaxcache("explain",
                                                                      str(path)).stderr
