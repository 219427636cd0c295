"""`jaxcache run` with real JAX on the CPU, in real separate processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support import paths
from support.jobs import fork_after_jax, jaxcache

from jaxcache.documents import schemas

pytest.importorskip("jax")

TRAIN = str(paths.EXAMPLES / "train.py")
PROGRAMS = paths.PROGRAMS


def run(cache, record, *cmd, extra=(), env=None, cwd=None):
    return jaxcache("run", "--cache-dir", str(cache), "--record", str(record), *extra, "--",
                    *cmd, env=env, cwd=cwd)


def valid(path) -> dict:
    """The record at `path`, validated against the schema shipped in the package."""
    doc = json.loads(path.read_text())
    pytest.importorskip("jsonschema").validate(doc, schemas.load("run"))
    return doc


# Which modules are written must not depend on how fast this machine compiles: every compile
# passes the time threshold (0), and the entry-size threshold keeps only jit_train_step's
# ~40 KB entry (the helpers' are 2-4 KB).
BY_SIZE = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
           "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "10000"}


@pytest.fixture(scope="module")
def cold_and_warm(tmp_path_factory):
    """One cold and one warm process of the bundled training job, sharing a private cache."""
    base = tmp_path_factory.mktemp("run")
    cache = base / "cache"
    env = {**os.environ, **BY_SIZE}
    cold = run(cache, base / "cold.json", sys.executable, TRAIN, env=env)
    warm = run(cache, base / "warm.json", sys.executable, TRAIN, env=env)
    assert cold.returncode == 0, cold.stderr
    assert warm.returncode == 0, warm.stderr
    return (cache, json.loads((base / "cold.json").read_text()),
            json.loads((base / "warm.json").read_text()), cold, warm)


def test_cold_and_warm_records_validate_against_the_shipped_schema(cold_and_warm):
    jsonschema = pytest.importorskip("jsonschema")
    _, cold, warm, _, _ = cold_and_warm
    for doc in (cold, warm):
        jsonschema.validate(doc, schemas.load("run"))
    words = {m["outcome"] for doc in (cold, warm) for m in doc["modules"]}
    assert {"written", "hit", "skipped"} <= words  # the schema met each of them


def test_the_schema_rejects_a_record_broken_where_readers_rely_on_it(cold_and_warm):
    """Not vacuous: an outcome word the record never writes, a missing `process`, a wrong
    type where the writer always writes one, are each refused."""
    jsonschema = pytest.importorskip("jsonschema")
    _, cold, _, _, _ = cold_and_warm
    schema = schemas.load("run")
    module = dict(cold["modules"][0], outcome="cached")
    no_process = {k: v for k, v in cold.items() if k != "process"}
    broken = [dict(cold, modules=[module]), no_process,
              dict(cold, process=dict(cold["process"], exit_code="0")),
              dict(cold, schema="jaxcache.run/2"),
              dict(cold, counts=dict(cold["counts"], outcomes={"cached": 1}))]
    for doc in broken:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(doc, schema)


def by_name(doc, name):
    [m] = [m for m in doc["modules"] if m["name"] == name]
    return m


def test_cold_run_writes_the_expensive_function(cold_and_warm):
    cache, cold, _, proc, _ = cold_and_warm
    step = by_name(cold, "jit_train_step")
    assert step["outcome"] == "written"
    assert step["cache_key"].startswith("jit_train_step-") and len(step["cache_key"]) == 79
    assert (cache / f"{step['cache_key']}-cache").stat().st_size == step["entry_bytes"] > 0
    assert step["compile_or_load_s"] > 0 and step["input_shapes"] == \
        "(ShapedArray(float32[64,64]),)"
    assert set(step["key_components"]) >= {"computation", "jax_lib version", "compile_options",
                                           "accelerator_config", "compression"}
    assert cold["cache_dir"]["before"]["entries"] == 0
    assert cold["cache_dir"]["after"]["entries"] == 1
    assert "written 1" in proc.stderr and f"record: {cache.parent / 'cold.json'}" in proc.stderr


def test_warm_process_hits_with_load_time(cold_and_warm):
    _, cold, warm, _, proc = cold_and_warm
    step = by_name(warm, "jit_train_step")
    assert step["outcome"] == "hit"
    assert step["cache_key"] == by_name(cold, "jit_train_step")["cache_key"]
    assert step["retrieval_s"] is not None and step["retrieval_s"] > 0
    assert step["compile_or_load_s"] < by_name(cold, "jit_train_step")["compile_or_load_s"]
    assert warm["counts"]["hits"] == 1
    assert warm["counts"]["misses"] == warm["counts"]["compile_requests"] - 1
    assert "hits 1" in proc.stderr


def test_small_function_is_skipped_with_the_size_threshold(cold_and_warm):
    _, cold, _, _, _ = cold_and_warm
    norm = by_name(cold, "jit_normalize")
    assert norm["outcome"] == "skipped" and norm["reason"] == "entry-size-below-threshold"
    assert norm["reason_detail"]["threshold_bytes"] == 10000
    assert 0 < norm["reason_detail"]["entry_bytes"] < 10000


def test_a_compile_under_the_time_threshold_is_skipped_with_both_numbers(tmp_path):
    """A threshold no compile reaches: every module skipped, with JAX's numbers."""
    env = {**os.environ, "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "1000"}
    # the train step's size decides nothing here (no compile reaches 1000 s): a small one
    proc = run(tmp_path / "cache", tmp_path / "r.json", sys.executable, TRAIN, "--steps", "5",
               env=env)
    assert proc.returncode == 0, proc.stderr
    norm = by_name(json.loads((tmp_path / "r.json").read_text()), "jit_normalize")
    assert norm["outcome"] == "skipped" and norm["reason"] == "compile-time-below-threshold"
    assert norm["reason_detail"]["threshold_s"] == 1000.0
    assert 0 < norm["reason_detail"]["compile_s"] < 1000.0


def test_record_has_versions_platform_options_and_process(cold_and_warm):
    _, cold, _, _, _ = cold_and_warm
    import jax

    assert cold["schema"] == "jaxcache.run/1"
    assert cold["versions"]["jax"] == jax.__version__ and cold["versions"]["jaxlib"]
    assert cold["platform"]["backend"] == "cpu" and cold["platform"]["device_count"] >= 1
    assert cold["platform"]["process_index"] == 0 and cold["platform"]["process_count"] == 1
    opts = cold["cache_options_at_first_compile"]
    assert opts["jax_persistent_cache_min_compile_time_secs"] == 0.0  # BY_SIZE
    assert opts["jax_persistent_cache_min_entry_size_bytes"] == 10000
    assert opts["jax_compilation_cache_dir"] == cold["cache_dir"]["path"]
    assert "JAX_COMPILATION_CACHE_DIR" not in cold["env"]  # the probe set it, under the lease
    p = cold["process"]
    assert p["exit_code"] == 0 and p["wall_s"] > 0 and p["user_s"] > 0
    assert p["peak_rss_bytes"] > 50_000_000


@pytest.mark.parametrize("with_jax", [False, True])
def test_probe_changes_neither_output_nor_exit_code(tmp_path, with_jax):
    argv = [sys.executable, str(PROGRAMS / "prints_and_fails.py")] + (["--jax"] if with_jax
                                                                       else [])
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    bare = subprocess.run(argv, capture_output=True, text=True, env=env)
    probed = run(tmp_path / "c", tmp_path / "r.json", *argv, extra=["--quiet"], env=env)
    assert (probed.returncode, probed.stdout, probed.stderr) == (
        bare.returncode, bare.stdout, bare.stderr) and bare.returncode == 3
    doc = valid(tmp_path / "r.json")  # a failed job, with or without JAX
    assert doc["process"]["exit_code"] == 3
    assert doc["probe"]["loaded"] is with_jax


def test_program_own_sitecustomize_still_runs(tmp_path):
    own = tmp_path / "own"
    own.mkdir()
    marker = tmp_path / "marker"
    (own / "sitecustomize.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\nimport os\nos.environ['OWN_SITE'] = '1'\n")
    env = {**os.environ, "PYTHONPATH": str(own)}
    code = ("import os, sitecustomize, sys; import jax.numpy as j; float(j.ones(2).sum()); "
            "print(os.environ.get('OWN_SITE'), sitecustomize.__file__)")
    probed = run(tmp_path / "c", tmp_path / "r.json", sys.executable, "-c", code,
                 extra=["--quiet"], env=env)
    assert probed.returncode == 0, probed.stderr
    assert marker.read_text() == "ran"
    assert probed.stdout.strip() == f"1 {own / 'sitecustomize.py'}"
    assert json.loads((tmp_path / "r.json").read_text())["probe"]["loaded"] is True


def test_probe_does_not_import_jax_early(tmp_path):
    code = "import sys; print('jax' in sys.modules)"
    probed = run(tmp_path / "c", tmp_path / "r.json", sys.executable, "-c", code,
                 extra=["--quiet"])
    assert probed.stdout.strip() == "False"


@fork_after_jax
def test_fork_and_spawn_each_record_themselves(tmp_path):
    probed = run(tmp_path / "c", tmp_path / "r.json", sys.executable,
                 str(PROGRAMS / "forks_and_spawns.py"), extra=["--quiet"])
    assert probed.returncode == 0, probed.stderr
    assert probed.stdout.splitlines() == ["parent 6.0", "child 6", "spawned 2.0"]
    doc = valid(tmp_path / "r.json")  # subprocesses[] too
    assert doc["probe"]["loaded"] and doc["counts"]["modules"] >= 1
    pids = {s["pid"] for s in doc["subprocesses"]}
    assert len(pids) == 2 and doc["process"]["pid"] not in pids  # forked child + spawned one
    # the forked child runs its parent's JAX: recorded so (with none, a child that compiled
    # was taken for a rank on another jaxlib, and the run exited 1)
    for sub in doc["subprocesses"]:
        assert {k: sub["versions"].get(k) for k in ("jax", "jaxlib")} == \
            {k: doc["versions"][k] for k in ("jax", "jaxlib")}, sub


def test_program_without_jax(tmp_path):
    probed = run(tmp_path / "c", tmp_path / "r.json", sys.executable,
                 str(PROGRAMS / "no_jax.py"))
    assert probed.returncode == 0 and probed.stdout == "no jax here\n"
    assert "no probe data" in probed.stderr
    doc = valid(tmp_path / "r.json")
    assert doc["probe"]["loaded"] is False and doc["counts"] is None and doc["identity"] is None


def test_killed_program_still_gets_a_record(tmp_path):
    probed = run(tmp_path / "c", tmp_path / "r.json", sys.executable, str(PROGRAMS / "crash.py"))
    assert probed.returncode == 128 + 9
    doc = valid(tmp_path / "r.json")
    assert doc["process"]["signal"] == 9 and doc["process"]["exit_code"] is None
    assert doc["probe"]["loaded"] and doc["modules"]  # written after each compile
    assert "killed by signal 9" in probed.stderr


@pytest.mark.parametrize("cmd,code,fragment", [
    (["no-such-command-jx"], 127, "command not found"),
    (["/nonexistent/prog"], 127, "command not found"),
    (["{tmp}/data.txt"], 126, "not executable"),
    ([], 2, "no command to run"),
])
def test_bad_commands(tmp_path, cmd, code, fragment):
    (tmp_path / "data.txt").write_text("not a program")
    (tmp_path / "data.txt").chmod(0o644)
    cmd = [c.format(tmp=tmp_path) for c in cmd]
    proc = run(tmp_path / "c", tmp_path / "r.json", *cmd)
    assert proc.returncode == code, proc.stderr
    assert fragment in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "r.json").exists()


def test_unwritable_or_foreign_record_path(tmp_path):
    proc = run(tmp_path / "c", tmp_path / "missing" / "r.json", sys.executable, "-c", "1")
    assert proc.returncode == 2 and "cannot write the record" in proc.stderr
    precious = tmp_path / "precious.txt"
    precious.write_text("do not lose me")
    proc = run(tmp_path / "c", precious, sys.executable, "-c", "1")
    assert proc.returncode == 2 and "refusing to overwrite" in proc.stderr
    assert precious.read_text() == "do not lose me"


def test_untrusted_cache_is_refused(tmp_path):
    world = tmp_path / "world"
    world.mkdir()
    world.chmod(0o777)
    (world / "cache").mkdir(mode=0o700)
    marker = tmp_path / "ran"
    proc = run(world / "cache", tmp_path / "r.json", sys.executable, "-c",
               f"open({str(marker)!r}, 'w')")
    assert proc.returncode == 1 and "refusing cache" in proc.stderr and "UNSAFE" in proc.stderr
    assert not marker.exists()  # the program never ran


def test_defaults_cache_from_env_then_user_dirs(tmp_path):
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"),
           "XDG_CACHE_HOME": str(tmp_path / "xdg-cache")}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    # the directory reaches JAX through the probe, never as the job's variable
    show = ("import os, jax; print(jax.config.jax_compilation_cache_dir, "
            "os.environ.get('JAX_COMPILATION_CACHE_DIR'))")
    proc = jaxcache("run", "--", sys.executable, "-c", show, env=env)
    assert proc.returncode == 0, proc.stderr
    chosen, variable = proc.stdout.split()
    assert chosen == f"{tmp_path}/xdg-cache/jaxcache/jax" and variable == "None"
    assert oct(os.stat(chosen).st_mode & 0o777) == "0o700"  # made by init
    [record] = list((tmp_path / "state" / "jaxcache" / "runs").iterdir())
    assert f"record: {record}" in proc.stderr
    env["JAX_COMPILATION_CACHE_DIR"] = str(tmp_path / "from-env")
    proc = jaxcache("run", "--quiet", "--", sys.executable, "-c", show, env=env)
    assert proc.stdout.split() == [str(tmp_path / "from-env"), "None"], proc.stderr


def test_cache_dir_spelled_wrong_and_record_that_cannot_be_written(tmp_path):
    marker = tmp_path / "ran"
    job = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    for bad, fragment in (("~/jax-cache", "starts with '~'"), ("", "--cache-dir is empty")):
        proc = run(bad, tmp_path / "r.json", *job)
        assert proc.returncode == 2 and fragment in proc.stderr, proc.stderr
    ro = tmp_path / "ro"
    ro.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=16k", "tmpfs", str(ro)],
                   check=False, capture_output=True)
    try:
        if not os.path.ismount(ro):
            pytest.skip("cannot mount a read-only tmpfs here (needs root)")
        proc = run(tmp_path / "c", ro / "r.json", *job)
        assert proc.returncode == 2 and "cannot write the record" in proc.stderr, proc.stderr
    finally:
        subprocess.run(["umount", str(ro)], capture_output=True)
    assert not marker.exists()  # checked before the job, which never started


def test_an_inherited_gate_variable_does_not_hold_the_job(tmp_path):
    """JAXCACHE_GATE (a name older versions' probes waited on) left in the environment, by a
    CI variable of that name or an older outer run, must not make the job wait on anything."""
    cache = tmp_path / "cache"
    env = {**os.environ, "JAXCACHE_GATE": str(tmp_path / "nowhere" / "gate"),
           "JAXCACHE_GATE_PID": "1", "XDG_STATE_HOME": str(tmp_path / "state"),
           "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, "-m", "jaxcache", "run", "-q", "--cache-dir",
                           str(cache), "--", sys.executable, "-c",
                           "import jax; print('ran', jax.numpy.ones(2).sum())"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0 and "ran 2.0" in proc.stdout, proc.stderr


@pytest.mark.parametrize("python", [True, False], ids=["python-job", "shell-script"])
def test_an_outer_runs_cache_variables_do_not_reach_a_nested_run(tmp_path, python):
    """A run inside another's job (`jaxcache run --sealed ... -- bash -c "jaxcache run ..."`)
    gets the cache its own audit granted: none of the outer run's per-run variables (a sealed
    outer run's JAXCACHE_SEAL made the inner job's probe enable the outer's sealed cache).
    Both kinds of job: a Python program, a shell script that starts one."""
    from jaxcache import jobenv

    outer = {name: f"outer-{name}" for name in jobenv.PER_RUN}
    show = tmp_path / "show.py"
    show.write_text("import json, os, sys\n"
                    "print(json.dumps({n: os.environ.get(n) for n in sys.argv[1:]}))\n")
    script = tmp_path / "job.sh"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} {show} "$@"\n')
    script.chmod(0o755)
    job = [sys.executable, str(show)] if python else [str(script)]
    env = {**os.environ, **outer, "XDG_STATE_HOME": str(tmp_path / "state")}
    proc = subprocess.run([sys.executable, "-m", "jaxcache", "run", "-q", "--cache-dir",
                           str(tmp_path / "cache"), "--", *job, *sorted(outer)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(seen) == set(outer)
    # the inner run's own grant names some (its directory, its witness): never the outer's
    assert [n for n, v in seen.items() if v == outer[n]] == []
    assert seen[jobenv.SEAL] is None and seen[jobenv.PREFETCH] is None


def test_the_default_record_is_never_written_where_others_can_write(tmp_path):
    """A state folder others may write (another user's, or one left open): the job runs and
    keeps its status, its record (argv, cwd, environment) is not written there but reported
    not written, as `jaxcache records` would refuse to read it."""
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o777)
    marker = tmp_path / "ran"
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    proc = subprocess.run([sys.executable, "-m", "jaxcache", "run", "-q", "--cache-dir",
                           str(tmp_path / "cache"), "--", sys.executable, "-c",
                           f"open({str(marker)!r}, 'w')"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0 and marker.exists(), proc.stderr
    assert "record" in proc.stderr and "refusing to keep a run record" in proc.stderr, \
        proc.stderr
    assert not any(p.name.endswith(".json") for p in state.rglob("*"))


def test_a_refused_directory_holding_signatures_names_the_sealed_reader(tmp_path):
    """A directory others may write, holding signature files, refused for a plain run: the
    refusal says how such a cache is read (--sealed), where a plain refusal only says to use a
    private directory; a directory without signatures gets no such hint."""
    key = "jit_f-" + "a" * 64
    for name, signed in (("sealed", True), ("open", False)):
        d = tmp_path / name
        d.mkdir()
        d.chmod(0o777)
        (d / f"{key}-cache").write_bytes(b"x")
        if signed:
            (d / f"{key}-cache.sig").write_bytes(b"x")
        proc = subprocess.run([sys.executable, "-m", "jaxcache", "run", "--cache-dir", str(d),
                               "--", "true"], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")})
        assert proc.returncode == 1 and "refusing cache" in proc.stderr, proc.stderr
        said = " ".join(proc.stderr.split())
        assert ("jaxcache run --sealed --trusted-key KEY" in said) is signed, said


def test_a_sealed_reader_of_a_directory_that_does_not_exist_is_one_line(tmp_path):
    """A sealed reader's mistyped path: refused in one line, nothing made (a new private
    directory would load nothing and keep its publisher out), the job never started."""
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    made = subprocess.run([sys.executable, "-m", "jaxcache", "keygen", "-q",
                           str(tmp_path / "k")], capture_output=True, text=True, env=env)
    assert made.returncode == 0, made.stderr
    marker = tmp_path / "ran"
    proc = subprocess.run([sys.executable, "-m", "jaxcache", "run", "--sealed", "--trusted-key",
                           str(tmp_path / "k.pub"), "--cache-dir", str(tmp_path / "typo"), "--",
                           sys.executable, "-c", f"open({str(marker)!r}, 'w')"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "does not exist" in proc.stderr
    assert not (tmp_path / "typo").exists() and not marker.exists()


def test_a_cache_directory_run_makes_is_said_once(tmp_path):
    """A cache directory that did not exist is made private, and said before the job (a
    mistyped path would otherwise start empty, silently, at every run); not again once it
    exists, nor with -q."""
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    cache = tmp_path / "new" / "cache"

    def run_once(*flags: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "jaxcache", "run", *flags, "--cache-dir",
                               str(cache), "--", "true"], capture_output=True, text=True,
                              env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return proc.stderr

    first = run_once()
    assert f"jaxcache: created {cache} (mode 0700, and 1 folder above it)" in first, first
    assert (cache.stat().st_mode & 0o777) == 0o700
    assert "created" not in run_once()
    cache.rmdir()
    assert run_once("-q") == ""
