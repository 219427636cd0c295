"""Which kept bench `decide PATH` judges (issue 44, new users' trials): a bench run inside a
project whose file sets cache_dir (or with `bench --for-cache DIR`) is a bench of that cache's
job; of that job's benches the newest measured as the cache's runs run (their run record's
write thresholds, else the settings: env, project file, JAX's defaults) wins, and the others
are named; with none, the advice names the newest kept benches and the exact --bench line.
Real jobs, real benches (three, the smallest), a state directory and a project of their own."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest
from support import paths
from support.jobs import jaxcache, no_state
from support.users import mkdir

from jaxcache.documents import schemas

pytest.importorskip("jax")

JOB = [sys.executable, str(paths.PROGRAMS / "quick_compiles.py"), "2"]
OTHER = [sys.executable, str(paths.PROGRAMS / "quick_compiles.py"), "1"]
QUICK = ["-t", "1", "-k", "1", "--no-prime"]
COMPILE_VARIABLE = "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"


class Trial:
    def __init__(self, base):
        self.base = base
        self.env = {k: v for k, v in no_state(base).items()
                    if not k.startswith(("JAX_PERSISTENT", "JAX_COMPILATION"))}
        self.project = mkdir(base / "proj", 0o700)
        (self.project / "pyproject.toml").write_text(
            '[tool.jaxcache]\ncache_dir = "build/jax-cache"\n')
        self.cache = mkdir(mkdir(self.project / "build", 0o700) / "jax-cache", 0o700)
        self.other_cache = mkdir(base / "other-cache", 0o700)
        self.lonely = mkdir(base / "lonely", 0o700)
        self.benches = base / "state" / "jaxcache" / "benches"
        self.paths = []
        # the job, in its project, at JAX's thresholds; another job, told its cache by flag;
        # the job again with --min-compile-time 0 (as bench suggests when nothing is cached)
        for args, cwd in ((["--", *JOB], self.project),
                          (["--for-cache", str(self.other_cache), "--", *OTHER], base),
                          (["--min-compile-time", "0", "--", *JOB], self.project)):
            proc = jaxcache("bench", *QUICK, *args, env=self.env, cwd=str(cwd))
            assert proc.returncode in (0, 1), proc.stderr
            [new] = set(self.benches.iterdir()) - set(self.paths)
            self.paths.append(new)

    def decide(self, path, *args, env=None, cwd=None):
        proc = jaxcache("decide", str(path), *args, env=env or self.env,
                        cwd=str(cwd or self.project))
        return proc


@pytest.fixture(scope="module")
def trial(tmp_path_factory):
    return Trial(tmp_path_factory.mktemp("kept"))


def _json(proc):
    assert proc.returncode in (0, 1), proc.stderr
    doc = json.loads(proc.stdout)
    pytest.importorskip("jsonschema").validate(doc, schemas.load("decide"))
    return doc


def test_bench_records_the_cache_it_is_for(trial):
    jsonschema = pytest.importorskip("jsonschema")
    for_cache = []
    for path in trial.paths:
        doc = json.loads(path.read_text())
        jsonschema.validate(doc, schemas.load("bench"))
        for_cache.append(doc["config"]["for_cache"])
    assert for_cache == [str(trial.cache), str(trial.other_cache), str(trial.cache)]


def test_for_cache_given_empty_is_one_line_exit_2(trial):
    proc = jaxcache("bench", "--for-cache", "", "--", *JOB, env=trial.env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_the_bench_measured_as_the_runs_run_wins_and_the_other_is_named(trial):
    """The runs on the project's cache use JAX's default threshold (no record in the state
    directory, no setting): the older bench at 1 s is judged, the newer one at 0 is named."""
    at_default, _, at_zero = trial.paths
    doc = _json(trial.decide("build/jax-cache", "--format", "json"))
    assert doc["benches"] == [{"how": "kept", "command": JOB, "path": str(at_default)}], doc
    kept = doc["kept"]
    assert kept["judged_as_runs"] is True
    assert kept["runs_use"] == {"min_compile_time_s": 1.0, "min_entry_size_bytes": 0,
                                "source": "settings"}
    assert [b["path"] for b in kept["passed_over"]] == [str(at_zero)]
    assert kept["passed_over"][0]["thresholds"]["min_compile_time_s"] == 0.0
    line = f"`jaxcache decide {trial.cache} --bench {at_zero}`"  # the path as audited
    assert any(line in a for a in doc["advice"]), doc["advice"]
    text = trial.decide("build/jax-cache")
    said = " ".join(text.stdout.split())
    assert f"judged on the bench of `{' '.join(JOB)}`" in said
    assert "measured as the runs on this directory run" in said
    assert f"{at_zero}" in said and "--min-compile-time 0" in said, text.stdout


def test_settings_that_say_zero_pick_the_bench_at_zero(trial):
    _, _, at_zero = trial.paths
    env = {**trial.env, COMPILE_VARIABLE: "0"}
    doc = _json(trial.decide("build/jax-cache", "--format", "json", env=env))
    assert [b["path"] for b in doc["benches"]] == [str(at_zero)]
    assert doc["kept"]["judged_as_runs"] is True and doc["kept"]["passed_over"] == []


def test_a_bench_measured_otherwise_is_judged_and_said_so(trial):
    """No bench at the runs' 0.5 s: the newest of the job's is judged, and decide says it was
    measured otherwise, naming the other bench."""
    at_default, _, at_zero = trial.paths
    env = {**trial.env, COMPILE_VARIABLE: "0.5"}
    doc = _json(trial.decide("build/jax-cache", "--format", "json", env=env))
    assert [b["path"] for b in doc["benches"]] == [str(at_zero)]
    assert doc["kept"]["judged_as_runs"] is False
    assert [b["path"] for b in doc["kept"]["passed_over"]] == [str(at_default)]
    advice = " ".join(doc["advice"])
    assert "measured with --min-compile-time 0" in advice and "0.5" in advice, advice
    text = " ".join(trial.decide("build/jax-cache", env=env).stdout.split())
    assert "not as the runs on this directory run" in text, text


def test_flag_given_cache_counts_without_a_project(trial):
    doc = _json(trial.decide(trial.other_cache, "--format", "json", cwd=trial.base))
    assert doc["benches"] == [{"how": "kept", "command": OTHER,
                               "path": str(trial.paths[1])}], doc


def test_no_bench_of_this_cache_names_the_kept_ones_and_no_placeholder(trial):
    proc = trial.decide(trial.lonely, "--format", "json", cwd=trial.base)
    doc = _json(proc)
    assert doc["verdict"] == "INCONCLUSIVE" and doc["benches"] == []
    recent = doc["kept"]["recent"]
    assert [r["path"] for r in recent] == [str(p) for p in reversed(trial.paths)]
    assert [r["command"] for r in recent] == [JOB, OTHER, JOB]
    assert all(r["when"] for r in recent)
    advice = "\n".join(doc["advice"])
    for p in trial.paths:
        assert f"`jaxcache decide {trial.lonely} --bench {p}`" in advice, advice
    assert f"`jaxcache decide {trial.lonely} -- YOUR COMMAND`" in advice
    assert "train.py" not in advice
    text = trial.decide(trial.lonely, cwd=trial.base).stdout
    said = " ".join(text.split())  # wrapped to the terminal's width
    assert "YOUR COMMAND" in said and str(trial.paths[2]) in said, text


def test_the_run_record_says_how_the_runs_run(trial, tmp_path):
    """A run of the job with --min-compile-time 0 in the state directory: the record, not the
    settings (JAX's default here), says how the cache's runs run: the bench at 0 wins."""
    state = tmp_path / "state"
    shutil.copytree(trial.base / "state", state)
    env = {**trial.env, "XDG_STATE_HOME": str(state)}
    ran = jaxcache("run", "--min-compile-time", "0", "--", *JOB, env=env,
                   cwd=str(trial.project))
    assert ran.returncode == 0, ran.stderr
    doc = _json(trial.decide("build/jax-cache", "--format", "json", env=env))
    assert [b["path"] for b in doc["benches"]] == [str(trial.paths[2]).replace(
        str(trial.base / "state"), str(state))]
    assert doc["kept"]["runs_use"]["source"] == "run-record"
    assert doc["kept"]["runs_use"]["min_compile_time_s"] == 0.0
    assert doc["kept"]["jobs"] == [JOB]


def test_a_bench_from_another_folder_is_another_job(trial, tmp_path):
    """A job is its command and the folder it runs from (a new user's trial): two folders'
    `python job.py` are two jobs. The job benched and run from a folder of its own (no project
    file) on a cache, then the same command benched from another folder (newer, at the same
    thresholds): decide judges the folder's bench, never the stranger's, and names the folders
    it saw. A bench that names its cache (the project's, by its file) is that cache's only,
    though its command ran from the project on this one too (the third trial's complaint)."""
    state = tmp_path / "state"
    shutil.copytree(trial.base / "state", state)
    env = {**trial.env, "XDG_STATE_HOME": str(state)}
    benches = state / "jaxcache" / "benches"
    cache = mkdir(tmp_path / "cache", 0o700)
    home = mkdir(tmp_path / "home", 0o700)
    elsewhere = mkdir(tmp_path / "elsewhere", 0o700)
    made = []
    # the folder's own bench; the stranger's, newer; the newest, the project's (its file names
    # the project's cache, so it is that cache's bench)
    for cwd in (home, elsewhere, trial.project):
        before = set(benches.iterdir())
        proc = jaxcache("bench", *QUICK, "--", *JOB, env=env, cwd=str(cwd))
        assert proc.returncode in (0, 1), proc.stderr
        [new] = set(benches.iterdir()) - before
        made.append(new)
    ours, stranger_path, project_bench = made
    assert json.loads(project_bench.read_text())["config"]["for_cache"] == str(trial.cache)
    assert json.loads(stranger_path.read_text())["config"]["cwd"] == os.path.realpath(elsewhere)
    for cwd in (home, trial.project):  # the job used this cache from both folders
        ran = jaxcache("run", "--cache-dir", str(cache), "--", *JOB, env=env, cwd=str(cwd))
        assert ran.returncode == 0, ran.stderr
    doc = _json(trial.decide(cache, "--format", "json", env=env, cwd=home))
    assert [b["path"] for b in doc["benches"]] == [str(ours)], doc
    assert doc["kept"]["judged"]["cwd"] == os.path.realpath(home)
    # never judged, but named as newer, with their folders (the fourth trial: a newer bench
    # of the job you meant, passed over unsaid, read as "decide ignored my bench")
    assert [b["path"] for b in doc["kept"]["recent"]] == [str(project_bench),
                                                          str(stranger_path)]
    assert doc["kept"]["passed_over"] == [] and doc["kept"]["newer"] == 2
    proc = trial.decide(cache, env=env, cwd=home)
    assert "; 2 newer of other jobs not judged;" in proc.stderr, proc.stderr
    text = " ".join(proc.stdout.split())
    assert f"judged on the bench of `{' '.join(JOB)}` in {os.path.realpath(home)}, kept " \
        in text, text
    assert (f"not judged: the newer bench of `{' '.join(JOB)}` in "
            f"{os.path.realpath(trial.project)}") in text and "(and 1 more)" in text, text
    assert f"--bench {stranger_path}`" in text, text
    # none of this folder's: the stranger's bench is named with its folder, never judged
    lonely = _json(trial.decide(trial.lonely, "--format", "json", env=env, cwd=trial.base))
    assert lonely["kept"]["recent"][1]["path"] == str(stranger_path)
    assert lonely["kept"]["recent"][1]["cwd"] == os.path.realpath(elsewhere)
    assert f"in {os.path.realpath(elsewhere)}" in " ".join(lonely["advice"])


def test_a_job_in_a_folder_whose_name_needs_escaping_finds_its_bench(tmp_path):
    """The bench and the run record hold the job's folder as it is (escaped only where shown),
    so decide matches them though the folder's name holds a backslash and a control."""
    env = {k: v for k, v in no_state(tmp_path).items()
           if not k.startswith(("JAX_PERSISTENT", "JAX_COMPILATION"))}
    cache = mkdir(tmp_path / "cache", 0o700)
    odd = mkdir(tmp_path / "pro\\j\x1b[1m", 0o700)
    proc = jaxcache("bench", *QUICK, "--", *JOB, env=env, cwd=str(odd))
    assert proc.returncode in (0, 1), proc.stderr
    [bench] = (tmp_path / "state" / "jaxcache" / "benches").iterdir()
    assert json.loads(bench.read_text())["config"]["cwd"] == str(odd)  # raw
    ran = jaxcache("run", "--cache-dir", str(cache), "--", *JOB, env=env, cwd=str(odd))
    assert ran.returncode == 0, ran.stderr
    doc = _json(jaxcache("decide", str(cache), "--format", "json", env=env, cwd=str(odd)))
    assert [b["path"] for b in doc["benches"]] == [str(bench)], doc
    assert "\x1b" not in jaxcache("decide", str(cache), env=env, cwd=str(odd)).stdout
