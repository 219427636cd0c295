"""`jaxcache records list|prune|stats` (issue 16) on records real `jaxcache run`s wrote, next to
files that only look like records: those are never counted or deleted, symlinks are never
followed, bad input changes nothing."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from support import paths
from support.jobs import jaxcache

from jaxcache.documents import schemas

TWO_JITS = str(paths.PROGRAMS / "two_jits.py")
OLD = "20200102T030405.000000001Z-77.json"  # a record's name, six years old


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Two real runs of one job against one cache: the first compiles and writes, the second
    hits. Their records land in the state dir as `jaxcache run` names them."""
    pytest.importorskip("jax")
    tmp = tmp_path_factory.mktemp("records")
    env = {**os.environ, "XDG_STATE_HOME": str(tmp / "state"), "JAX_PLATFORMS": "cpu",
           "NO_COLOR": "1"}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    for _ in range(2):
        proc = jaxcache("run", "--cache-dir", str(tmp / "cache"), "--", sys.executable,
                        TWO_JITS, env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
    runs = tmp / "state" / "jaxcache" / "runs"
    names = sorted(p.name for p in runs.iterdir())
    assert len(names) == 2
    return {"runs": runs, "names": names, "env": env}


@pytest.fixture
def world(made, tmp_path):
    """A copy of the two records, one of them also under an old name, and look-alikes."""
    runs = tmp_path / "runs"
    runs.mkdir(mode=0o700)
    for name in made["names"]:
        shutil.copy(made["runs"] / name, runs / name)
    shutil.copy(made["runs"] / made["names"][0], runs / OLD)
    outside = tmp_path / "outside.json"  # a real record, reachable only through a symlink
    shutil.copy(made["runs"] / made["names"][0], outside)
    (runs / "20190101T000000.000000000Z-1.json").symlink_to(outside)
    (runs / "20190101T000000.000000000Z-2.json").write_text("not json\n")
    (runs / "20190101T000000.000000000Z-3.json").write_text('{"schema": "jaxcache.bench/1"}')
    (runs / "notes-2019.json").write_text(json.dumps({"schema": "jaxcache.run/1"}))
    return {"runs": runs, "outside": outside, "env": made["env"], "names": made["names"]}


def records(world, *args: str) -> subprocess.CompletedProcess:
    return jaxcache("records", *args, "--dir", str(world["runs"]), env=world["env"])


def as_json(world, *args: str, schema: str) -> dict:
    proc = records(world, *args, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    pytest.importorskip("jsonschema").validate(doc, schemas.load(schema))
    assert doc["schema"] == f"jaxcache.{schema}/1"
    return doc


def test_list_newest_first_with_what_the_cache_did(world):
    doc = as_json(world, schema="records-list")
    names = [r["name"] for r in doc["records"]]
    assert names == [*reversed(world["names"]), OLD]  # newest first, by the time in the name
    cold, warm = doc["records"][1], doc["records"][0]
    assert cold["written"] >= 2 and cold["hits"] == 0 and cold["compile_s"] > 0
    assert warm["hits"] >= 2 and warm["misses"] == 0 and warm["load_s"] > 0
    assert warm["exit_code"] == 0 and warm["argv"][-1] == TWO_JITS
    skipped = {s["name"]: s["why"] for s in doc["skipped"]}  # named like records, are not
    assert skipped == {"20190101T000000.000000000Z-1.json": "a symbolic link",
                       "20190101T000000.000000000Z-2.json": "not JSON (line 1, column 1)",
                       "20190101T000000.000000000Z-3.json":
                           "schema jaxcache.bench/1, not a run record this jaxcache reads"}
    text = records(world)  # `list` is the default
    assert text.returncode == 0
    lines = text.stdout.splitlines()
    assert lines[0].startswith(f"3 run records in {world['runs']}, newest first")
    assert lines[1].split()[:5] == ["TIME", "EXIT", "HITS", "MISSES", "WRITTEN"]
    assert lines[2].endswith(world["names"][1]) and "two_jits.py" in lines[2]
    assert max(map(len, lines)) <= 200
    assert "notes-2019.json" not in text.stdout  # not a record's name: not even looked at


def test_stats_add_up_and_estimate_the_saving_from_another_records_compile(world):
    doc = as_json(world, "stats", schema="records-stats")
    listed = as_json(world, schema="records-list")["records"]
    assert doc["records"] == 3 and doc["skipped_files"] == 3
    for key in ("compile_requests", "hits", "misses", "written", "skipped", "uncacheable"):
        assert doc[key] == sum(r[key] for r in listed), key
    assert doc["cacheable_misses"] == sum(r["misses"] - r["uncacheable"] for r in listed)
    assert doc["load_s"] == pytest.approx(sum(r["load_s"] for r in listed))
    # the warm run's hits: their keys were compiled by the cold record (and its old copy)
    warm = listed[0]
    assert doc["hits_estimated"] == warm["hits"] and doc["hits_unknown"] == 0
    assert 0 < doc["saved_s"] < listed[1]["compile_s"]
    assert "another record" in doc["how_saved"]
    text = records(world, "stats").stdout
    assert text.startswith("3 run records in ") and "estimated seconds saved" in text
    assert "saved is estimated: for each hit" in text


def test_prune_older_than_deletes_only_real_old_records(world):
    runs = world["runs"]
    before = sorted(os.listdir(runs))
    dry = as_json(world, "prune", "--older-than", "365", "--dry-run", schema="records-prune")
    assert [r["name"] for r in dry["deleted"]] == [OLD] and dry["dry_run"]
    assert sorted(os.listdir(runs)) == before  # a dry run deletes nothing
    text = records(world, "prune", "--older-than", "365")
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("deleted 1 run record (")
    assert "older than 365 days" in text.stdout and "; 2 kept" in text.stdout
    after = sorted(os.listdir(runs))
    assert sorted(set(before) - set(after)) == [OLD]
    # look-alikes all stay: the symlink, the non-JSON, the other schema, the other name
    assert (runs / "20190101T000000.000000000Z-1.json").is_symlink()
    assert world["outside"].exists()
    assert "left alone: 3 files named like a run record" in text.stdout


def test_prune_keep_is_a_floor_for_older_than(world):
    doc = as_json(world, "prune", "--keep", "1", "--dry-run", schema="records-prune")
    assert [r["name"] for r in doc["deleted"]] == [world["names"][0], OLD]
    both = as_json(world, "prune", "--keep", "3", "--older-than", "0", schema="records-prune")
    assert both["deleted"] == [] and both["kept"] == 3  # old, but within the newest 3
    keep = as_json(world, "prune", "--keep", "1", schema="records-prune")
    assert keep["kept"] == 1 and keep["freed_bytes"] > 0
    assert [r["name"] for r in as_json(world, schema="records-list")["records"]] == \
        [world["names"][1]]


def test_prune_takes_keep_from_the_project_file(world, tmp_path):
    """Issue 44: the project file's [records] keep is prune's --keep when none is given (and
    `records prune` alone no longer needs a flag there); a flag still wins."""
    project = tmp_path / "project"
    project.mkdir()
    (project / ".jaxcache.toml").write_text("[records]\nkeep = 1\n")
    prune = ["records", "prune", "--dry-run", "--dir", str(world["runs"]), "--format", "json"]
    proc = jaxcache(*prune, env=world["env"], cwd=str(project))
    assert proc.returncode == 0, proc.stderr
    assert [r["name"] for r in json.loads(proc.stdout)["deleted"]] == [world["names"][0], OLD]
    proc = jaxcache(*prune, "--keep", "3", env=world["env"], cwd=str(project))
    assert proc.returncode == 0 and json.loads(proc.stdout)["deleted"] == [], proc.stderr
    proc = jaxcache(*prune, env=world["env"], cwd=str(tmp_path))  # no project file: refused
    assert proc.returncode == 2 and "needs --older-than DAYS and/or --keep N" in proc.stderr


def test_bad_input_is_one_line_and_changes_nothing(world, tmp_path):
    runs = world["runs"]
    before = sorted(os.listdir(runs))
    link = tmp_path / "link"
    link.symlink_to(runs)
    proc = jaxcache("records", "prune", "--keep", "0", "--dir", str(link), env=world["env"])
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1
    assert "symbolic link" in proc.stderr
    loose = tmp_path / "loose"
    loose.mkdir()
    loose.chmod(0o777)
    shutil.copy(runs / world["names"][0], loose / world["names"][0])
    proc = jaxcache("records", "prune", "--keep", "0", "--dir", str(loose), env=world["env"])
    assert proc.returncode == 2 and "not a private directory" in proc.stderr
    assert (loose / world["names"][0]).exists()
    afile = runs / world["names"][0]
    proc = jaxcache("records", "--dir", str(afile), env=world["env"])
    assert proc.returncode == 2 and "not a directory" in proc.stderr
    for args in (["prune"], ["prune", "--keep", "-1"], ["list", "--keep", "1"],
                 ["prune", "--older-than", "x"], ["nonsense"]):
        proc = records(world, *args)
        assert proc.returncode == 2, args
    assert sorted(os.listdir(runs)) == before


def test_works_without_jax(world):
    code = ("import sys; sys.modules['jax'] = sys.modules['jaxlib'] = None; "
            "from jaxcache.cli import main; main(sys.argv[1:])")
    for action in ("list", "stats"):
        proc = subprocess.run([sys.executable, "-c", code, "records", action, "--dir",
                               str(world["runs"]), "--format", "json"],
                              capture_output=True, text=True, env=world["env"], timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["schema"] == f"jaxcache.records-{action}/1"


def test_explain_of_the_records_dir_skips_and_names_what_it_refuses(world):
    runs = world["runs"]
    proc = jaxcache("explain", str(runs), env=world["env"])
    assert proc.returncode in (0, 1), proc.stderr
    skipped = sorted(line for line in proc.stderr.splitlines() if " skipped " in line)
    assert [line.split(": ", 2)[1] for line in skipped] == [
        f"skipped {n}" for n in ("20190101T000000.000000000Z-1.json",
                                        "20190101T000000.000000000Z-2.json",
                                        "20190101T000000.000000000Z-3.json", "notes-2019.json")]
    assert "symbolic link" in skipped[0] and "is not JSON" in skipped[1]
    assert "from 3 records" in proc.stdout, proc.stdout  # the readable ones, explained
    alone = jaxcache("explain", str(runs / "20190101T000000.000000000Z-1.json"), env=world["env"])
    assert alone.returncode == 2  # named on the command line: refused, not skipped


def test_prune_refuses_a_folder_others_could_swap(made, tmp_path):
    """Issue 22: prune trusted the records folder by its last component. Under a parent others
    can write, another user could swap it, between runs, for a folder of yours (here: one
    holding your other records) whose files prune would then delete. The folder is judged as
    a cache directory is, and refused with one line; nothing is deleted."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # anyone can rename what is inside
    runs = shared / "runs"
    runs.mkdir(mode=0o700)
    for name in made["names"]:
        shutil.copy(made["runs"] / name, runs / name)
    shutil.copy(made["runs"] / made["names"][0], runs / OLD)
    before = sorted(p.name for p in runs.iterdir())
    proc = jaxcache("records", "prune", "--keep", "0", "--dir", str(runs), env=made["env"])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert f"refusing to prune {runs}" in line and "everyone" in line, line
    assert sorted(p.name for p in runs.iterdir()) == before
    shared.chmod(0o755)  # now only root (you) could: pruned
    proc = jaxcache("records", "prune", "--keep", "0", "--dir", str(runs), env=made["env"])
    assert proc.returncode == 0 and list(runs.iterdir()) == [], proc.stderr


def test_an_older_record_that_says_not_audited_is_still_read(tmp_path):
    """Versions that started a job before its audit wrote NOT-AUDITED (no process imported
    jax), with nothing listed, and audited_after_job: no record says so now, yet those kept
    are read as they are (listed, explained, summed up), never refused."""
    from jaxcache.records.run_document import RunRecord
    from jaxcache.report.run import render_text

    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "NO_COLOR": "1"}
    cache = tmp_path / "cache"
    proc = jaxcache("run", "-q", "--cache-dir", str(cache), "--", sys.executable, "-c", "1",
                    env=env)
    assert proc.returncode == 0, proc.stderr
    (path,) = (tmp_path / "state" / "jaxcache" / "runs").iterdir()
    doc = json.loads(path.read_text())
    why = "not audited: no process of the job asked for it, and it did not change while it ran"
    unknown = {"entries": None, "files": None, "bytes": None, "unknown": why}
    doc["cache_dir"].update(verdict="NOT-AUDITED", before=unknown, after=unknown, origin=None,
                            audited_after_job=False)
    path.write_text(json.dumps(doc))
    listed = jaxcache("records", "list", env=env)
    assert listed.returncode == 0 and path.name in listed.stdout, listed.stderr
    explained = jaxcache("explain", str(path), env=env)
    assert explained.returncode == 0, explained.stdout + explained.stderr
    shown = render_text(RunRecord.from_json(doc), str(path))
    assert f"cache {cache} (NOT-AUDITED): entries unknown before, unknown after ({why})" in shown


def test_stats_count_what_jax_would_never_write_apart_from_the_misses(tmp_path):
    """As `ccache -s` counts uncacheable calls apart: a job whose every compile is under JAX's
    threshold, run twice, has no miss a cache could have served; its compiles are counted as
    uncacheable, and the hit rate is of the cacheable alone."""
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "JAX_PLATFORMS": "cpu",
           "NO_COLOR": "1"}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    for _ in range(2):
        proc = jaxcache("run", "--cache-dir", str(tmp_path / "cache"), "--min-compile-time",
                        "1000", "--", sys.executable, str(paths.PROGRAMS / "quick_compiles.py"),
                        "3", env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
    runs = {"runs": tmp_path / "state" / "jaxcache" / "runs", "env": env}
    doc = as_json(runs, "stats", schema="records-stats")
    assert doc["hits"] == 0 and doc["compile_requests"] >= 4
    assert doc["uncacheable"] == doc["misses"] == doc["compile_requests"], doc
    assert doc["cacheable_misses"] == 0
    text = records(runs, "stats").stdout
    rows = dict(re.split(r"\s{2,}", line.strip(), maxsplit=1)
                for line in text.splitlines()[1:9])
    assert rows["hits"] == "0" and rows["misses"] == "0", text
    assert rows["uncacheable"].startswith(f"{doc['uncacheable']} (JAX wrote none of them"), text
