"""Work in child processes counted, no temporary folder left by a failed bench, option
combinations refused, explain naming a directory change and refusing malformed records (each
once a hole a review found)."""

from __future__ import annotations

import json
import os
import sys
import textwrap

import pytest
from support import paths
from support.jobs import jaxcache

from jaxcache.bench.sample import from_record
from jaxcache.records.run_document import RunRecord

pytest.importorskip("jax")

ROOT = paths.CHECKOUT
TRAIN = str(ROOT / "examples" / "train.py")
PARENT = str(ROOT / "tests" / "programs" / "parent_child.py")


def test_work_done_in_a_child_process_is_counted(tmp_path):
    from support.records import all_modules

    # however fast this machine compiles: every compile passes the time threshold, and the
    # size threshold keeps only the child's jit_train_step (~40 KB; the rest 2-4 KB)
    env = {**os.environ, "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
           "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "10000"}
    proc = jaxcache("run", "--cache-dir", str(tmp_path / "c"), "--record",
                    str(tmp_path / "r.json"), "--", sys.executable, PARENT, TRAIN, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "in 2 processes" in proc.stderr and "written 1" in proc.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    sample = from_record(RunRecord.from_json(doc), trial=1, kind="cold", index=0, path="r.json")
    assert sample.written == 1 and "jit_train_step" in sample.cached
    [step] = [m for _, m in all_modules(doc) if m["name"] == "jit_train_step"]
    # the child's compile, not "the rest"
    assert sample.phases["compile_or_load"] >= step["compile_or_load_s"] > 0


def test_failed_bench_leaves_no_temporary_folder(tmp_path):
    """Its own temporary directory (TMPDIR), so a bench another test runs at the same time
    cannot look like a leftover."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = jaxcache("bench", "-t", "1", "-k", "1", "--no-prime", "--", sys.executable, "-c",
                    "import sys; sys.exit(3)", env={**os.environ, "TMPDIR": str(tmp)})
    assert proc.returncode == 2 and "--workdir" in proc.stderr
    assert list(tmp.iterdir()) == []


@pytest.mark.parametrize("args,fragment", [
    (["--plot", "chart.txt"], "ending in .png"),
    (["--max-trials", "9"], "needs --until-width, --until-decided or --time-budget"),
])
def test_refused_option_combinations(args, fragment):
    proc = jaxcache("bench", *args, "--", sys.executable, "-c", "1")
    assert proc.returncode == 2 and fragment in proc.stderr


def test_existing_non_private_workdir_says_why(tmp_path):
    work = tmp_path / "w"
    work.mkdir(mode=0o775)
    work.chmod(0o775)
    proc = jaxcache("bench", "--workdir", str(work), "--", sys.executable, "-c", "1")
    assert proc.returncode == 2 and "mode 0775: others can write it" in proc.stderr


def test_directory_change_after_the_cache_exists_is_named(tmp_path):
    prog = tmp_path / "switch.py"
    prog.write_text(textwrap.dedent(f"""
        import jax, jax.numpy as jnp
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.jit(lambda x: x + 1)(jnp.ones(2)).block_until_ready()
        jax.config.update("jax_compilation_cache_dir", {str(tmp_path / 'other')!r})
        jax.jit(lambda x: x * 3)(jnp.ones(5)).block_until_ready()
    """))
    jaxcache("run", "--quiet", "--cache-dir", str(tmp_path / "c"), "--record",
             str(tmp_path / "r.json"), "--", sys.executable, str(prog))
    proc = jaxcache("explain", "--format", "json", str(tmp_path / "r.json"))
    doc = json.loads(proc.stdout)
    reasons = [m["reason"] for m in doc["modules"]]
    assert "dir-change-ignored" in reasons and doc["key_diffs"] == []
    assert not (tmp_path / "other").exists()


@pytest.mark.parametrize("record", [
    {"schema": "jaxcache.run/1"},
    {"schema": "jaxcache.run/1", "modules": [1, 2], "process": {}, "cache_dir": {},
     "probe": {}, "subprocesses": []},
])
def test_explain_refuses_malformed_records(tmp_path, record):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(record))
    proc = jaxcache("explain", str(path))
    assert proc.returncode == 2 and "not a valid run record" in proc.stderr


def test_explain_of_a_failing_job_is_an_input_error(tmp_path):
    import os

    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    proc = jaxcache("explain", "--", sys.executable, "-c", "import sys; sys.exit(4)", env=env)
    assert proc.returncode == 2 and "exited with status 4" in proc.stderr
