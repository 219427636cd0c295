"""One order: `jaxcache run` audits the cache, and only then starts the job, with the cache
granted through its probe (never its environment). A refusal comes before any of the job runs;
the job's processes, whichever start first, get the directory JAX may use; what stops a job
stops all of it. Each found by an attack on the run's path."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time

import pytest
from support import paths
from support.jobs import JOB_TIMEOUT_S, clean_env, environ_without, jaxcache
from support.users import mkdir

PY = sys.executable


def _run(cache, record, code: str, *opts: str) -> subprocess.CompletedProcess:
    return jaxcache("run", *opts, "--cache-dir", str(cache), "--record", str(record), "--",
                    PY, "-c", code, env=clean_env())


JOB = """
import os, sys
print("before import:", os.environ.get("JAX_COMPILATION_CACHE_DIR"), flush=True)
import jax
print("after import:", jax.config.jax_compilation_cache_dir, flush=True)
print("env after:", os.environ.get("JAX_COMPILATION_CACHE_DIR"), flush=True)
"""


def test_jax_gets_the_directory_only_through_the_probe(tmp_path):
    pytest.importorskip("jax")
    cache = mkdir(tmp_path / "cache", 0o700)
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_COMPILATION_CACHE_DIR": "/nonexistent"}
    proc = jaxcache("run", "--quiet", "--cache-dir", str(cache), "--record",
                    str(tmp_path / "r.json"), "--", PY, "-c", JOB, env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    # and never through the environment: a child without the probe gets no directory
    assert lines == ["before import: None", f"after import: {cache}", "env after: None"]


@pytest.mark.skipif(os.geteuid() != 0, reason="chattr +i needs root")
def test_a_directory_the_kernel_disagrees_on_is_refused_before_the_job(tmp_path):
    """Permission bits are not all: an immutable directory (chattr +i) looks private, but the
    kernel disagrees with the model: UNVERIFIABLE, and the job never runs."""
    pytest.importorskip("jax")
    cache = mkdir(tmp_path / "cache", 0o700)
    if subprocess.run(["chattr", "+i", str(cache)], capture_output=True).returncode != 0:
        pytest.skip("this filesystem has no immutable flag")
    try:
        proc = jaxcache("run", "--quiet", "--cache-dir", str(cache), "--record",
                        str(tmp_path / "r.json"), "--", PY, "-c", JOB,
                        env={**os.environ, "JAX_PLATFORMS": "cpu"})
    finally:
        subprocess.run(["chattr", "-i", str(cache)], check=True)
    assert proc.returncode == 1 and "refusing cache" in proc.stderr, proc.stderr
    assert "UNVERIFIABLE" in proc.stderr and proc.stdout == ""
    assert list(cache.iterdir()) == [] and not (tmp_path / "r.json").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="chattr +i needs root")
def test_a_refused_cache_leaves_no_process_of_the_job_behind(tmp_path):
    """A job that starts helpers at once: refused, none of it ran, so no helper exists to be
    stopped (or to write once its parent is gone), and the refusal is one clear line."""
    cache = mkdir(tmp_path / "cache", 0o700)
    marker, pidfile = tmp_path / "helper-ran-on", tmp_path / "helper.pid"
    helper = (f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
              "parent = os.getppid()\nwhile os.getppid() == parent:\n"
              f"    time.sleep(0.01)\nopen({str(marker)!r}, 'w')\n")
    job = (f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', {helper!r}],"
           " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)"  # a leftover holds no pipe
           "\ntime.sleep(0.2)\nimport jax\nprint('past the audit')\n")
    if subprocess.run(["chattr", "+i", str(cache)], capture_output=True).returncode != 0:
        pytest.skip("this filesystem has no immutable flag")
    try:
        proc = _run(cache, tmp_path / "r.json", job)
    finally:
        subprocess.run(["chattr", "-i", str(cache)], check=True)
    assert proc.returncode == 1 and "refusing cache" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and "past the audit" not in proc.stdout
    time.sleep(1.0)  # a helper left running writes within milliseconds of its parent's end
    assert not marker.exists() and not pidfile.exists()


def _worker(tmp_path):
    """A Python worker that imports jax and says which cache directory JAX has."""
    worker = tmp_path / "worker.py"
    worker.write_text("import jax\nprint('worker:', jax.config.jax_compilation_cache_dir)\n")
    return worker


def test_workers_spawned_before_the_jobs_import_of_jax_get_the_directory_too(tmp_path):
    """A job that starts a Python worker before importing jax: the worker's probe hands its
    JAX the directory, as its parent's does."""
    pytest.importorskip("jax")
    cache = mkdir(tmp_path / "cache", 0o700)
    worker = _worker(tmp_path)
    job = (f"import subprocess, sys\np = subprocess.Popen([sys.executable, {str(worker)!r}])\n"
           "import jax\np.wait()\nprint('main:', jax.config.jax_compilation_cache_dir)\n")
    proc = jaxcache("run", "--quiet", "--cache-dir", str(cache), "--record",
                    str(tmp_path / "r.json"), "--", PY, "-c", job,
                    env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.splitlines()) == [f"main: {cache}", f"worker: {cache}"]


def test_a_worker_with_its_descriptors_closed_gets_the_directory(tmp_path):
    """The job's first process never imports jax; a worker it starts later (its descriptors
    closed, as subprocess does) does, and gets the directory through its own probe."""
    pytest.importorskip("jax")
    cache = mkdir(tmp_path / "cache", 0o700)
    worker = _worker(tmp_path)
    job = (f"import subprocess, sys\nsubprocess.run([sys.executable, {str(worker)!r}], "
           "check=True, close_fds=True)\n")
    record = tmp_path / "r.json"
    proc = jaxcache("run", "--quiet", "--cache-dir", str(cache), "--record", str(record),
                    "--", PY, "-c", job, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"worker: {cache}"]
    assert json.loads(record.read_text())["cache_dir"]["verdict"] == "PRIVATE"


def test_a_job_that_never_imports_jax_is_audited_all_the_same(tmp_path):
    """The audit comes first whatever the job does: one that never imports jax runs after it,
    its output untouched, and its record and summary give the verdict and the entries."""
    cache = mkdir(tmp_path / "cache", 0o700)
    (cache / "jit_f-0-cache").write_bytes(b"x")
    record = tmp_path / "r.json"
    proc = jaxcache("run", "--cache-dir", str(cache), "--record", str(record), "--", PY, "-c",
                    "print('no jax here')", env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "no jax here\n"
    assert f"cache {cache} (PRIVATE): entries 1 before, 1 after" in proc.stderr
    part = json.loads(record.read_text())["cache_dir"]
    assert part["verdict"] == "PRIVATE" and part["before"]["entries"] == 1
    assert "audited_after_job" not in part


def test_a_refused_record_stops_the_job_before_its_program(tmp_path):
    """A --record naming a file jaxcache may not replace: refused before the job starts, the
    file untouched, none of the program run, one line."""
    cache = mkdir(tmp_path / "cache", 0o700)
    precious, marker = tmp_path / "precious.txt", tmp_path / "ran"
    precious.write_text("do not lose me")
    proc = jaxcache("run", "--cache-dir", str(cache), "--record", str(precious), "--", PY, "-c",
                    f"open({str(marker)!r}, 'w')")
    assert proc.returncode == 2 and "refusing to overwrite" in proc.stderr, proc.stderr
    assert precious.read_text() == "do not lose me" and not marker.exists()
    assert "Traceback" not in proc.stderr


def test_probe_directory_never_lives_where_others_could_swap_it(tmp_path):
    """TMPDIR writable by others (not sticky): whoever can rename the probe directory would
    choose the job's sitecustomize and forge the lease. jaxcache uses /tmp instead."""
    from jaxcache.probe import probe_folder

    open_dir = mkdir(tmp_path / "open", 0o777)
    private = mkdir(tmp_path / "mine", 0o700)
    saved = os.environ.get("TMPDIR")
    try:
        os.environ["TMPDIR"] = str(open_dir)
        assert probe_folder.tmp_root() != str(open_dir)
        os.environ["TMPDIR"] = str(private)
        assert probe_folder.tmp_root() in (str(private), os.environ.get("XDG_RUNTIME_DIR"))
    finally:
        if saved is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved
    seen = tmp_path / "seen"
    job = f"import os; open({str(seen)!r}, 'w').write(os.environ['JAXCACHE_PROBE_DIR'])"
    proc = jaxcache("run", "--quiet", "--cache-dir", str(private), "--record",
                    str(tmp_path / "r.json"), "--", PY, "-c", job,
                    env={**os.environ, "TMPDIR": str(open_dir)})
    assert proc.returncode == 0, proc.stderr
    assert not seen.read_text().startswith(str(open_dir)) and list(open_dir.iterdir()) == []


@pytest.mark.parametrize("how", ["CI=true", "--require-origin", "--sealed"])
def test_jax_uses_what_jaxcache_sets_and_the_record_says_so(tmp_path, how):
    """Where entries of unknown origin are refused, and for a sealed reader, jaxcache turns
    XLA's sub-caches off (XLA loads them unjudged); it also sets the cache directory (through
    the probe, after `import jax`) and the write threshold asked for. All of it must be in
    force, and the record must say what JAX used, as the job sees it."""
    pytest.importorskip("jax")
    cache = mkdir(tmp_path / "cache", 0o700)
    job = [PY, str(paths.PROGRAMS / "cache_options.py")]
    env = clean_env(XDG_STATE_HOME=str(tmp_path / "state"),
                    XDG_CONFIG_HOME=str(tmp_path / "config"))
    flags = [how] if how != "CI=true" else []
    if how == "CI=true":
        env["CI"] = "true"
    if how == "--sealed":
        pytest.importorskip("cryptography")
        key = tmp_path / "keys" / "ci.key"
        assert jaxcache("keygen", str(key), env=env).returncode == 0
        flags += ["--trusted-key", (tmp_path / "keys" / "ci.key.pub").read_text().strip()]
    record = tmp_path / "r.json"
    proc = jaxcache("run", "--quiet", *flags, "--min-compile-time", "0", "--cache-dir",
                    str(cache), "--record", str(record), "--", *job, env=env)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.splitlines()[0])
    assert seen["jax_persistent_cache_enable_xla_caches"] == "none", seen
    assert seen["jax_compilation_cache_dir"] == str(cache)
    assert seen["jax_persistent_cache_min_compile_time_secs"] == 0
    said = json.loads(record.read_text())["cache_options_at_first_compile"]
    assert {name: said[name] for name in seen} == seen


def test_more_than_1024_open_descriptors_in_jaxcache_do_not_fail_the_run(tmp_path):
    """A jaxcache that inherited descriptors numbered 1024 and more (select() cannot watch
    them) still runs the job and writes its record."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2048:
        pytest.skip(f"the hard limit on open files is {hard}")
    cache = mkdir(tmp_path / "cache", 0o700)
    record = tmp_path / "r.json"
    lift = (f"import os, resource, sys\nresource.setrlimit(resource.RLIMIT_NOFILE, (2048, "
            f"{hard if hard != resource.RLIM_INFINITY else 2048}))\n"
            "fds = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]\n"
            "for fd in fds:\n    os.set_inheritable(fd, True)\n"
            "os.execv(sys.executable, [sys.executable, '-m', 'jaxcache', *sys.argv[1:]])\n")
    proc = subprocess.run([PY, "-c", lift, "run", "--cache-dir", str(cache), "--record",
                           str(record), "--", PY, "-c", "print('ran')"], capture_output=True,
                          text=True, env=clean_env(), timeout=JOB_TIMEOUT_S)
    assert proc.returncode == 0 and proc.stdout == "ran\n", proc.stderr
    assert json.loads(record.read_text())["cache_dir"]["verdict"] == "PRIVATE"
    del soft


def test_looking_for_jax_before_importing_it_keeps_the_probe(tmp_path):
    """`importlib.util.find_spec("jax")` first (an "is it installed?" check): the probe's
    watcher stays for the import itself, which gets the cache."""
    pytest.importorskip("jax")
    cache = mkdir(tmp_path / "cache", 0o700)
    record = tmp_path / "r.json"
    job = ("import importlib.util\nassert importlib.util.find_spec('jax') is not None\n"
           "import jax\nprint(jax.config.jax_compilation_cache_dir)\n")
    proc = _run(cache, record, job, "-q")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{cache}\n"
    doc = json.loads(record.read_text())
    assert doc["cache_dir"]["verdict"] == "PRIVATE" and doc["probe"]["loaded"] is True


def test_a_failed_first_import_of_jax_leaves_the_watcher_for_the_next(tmp_path):
    """The first `import jax` fails (a missing jaxlib, say); the program sets a directory of
    its own and tries again: the probe watches that import too, and the program's directory
    is the guard's to judge: refused (never hit, never written), and the run says so."""
    pytest.importorskip("jax")
    cache = mkdir(tmp_path / "cache", 0o700)
    other = mkdir(tmp_path / "other", 0o700)
    job = ("import os, sys\nsys.modules['jaxlib'] = None\ntry:\n    import jax\n"
           "except ImportError:\n    pass\ndel sys.modules['jaxlib']\n"
           "for name in [m for m in sys.modules if m == 'jax' or m.startswith('jax.')]:\n"
           "    del sys.modules[name]\n"
           f"os.environ['JAX_COMPILATION_CACHE_DIR'] = {str(other)!r}\n"
           "import jax\nprint(jax.config.jax_compilation_cache_dir)\n"
           "jax.config.update('jax_persistent_cache_min_compile_time_secs', 0)\n"
           "jax.jit(lambda x: x + 1)(1.0)\n")
    record = tmp_path / "r.json"
    proc = _run(cache, record, job, "-q")
    assert proc.returncode == 1, proc.stderr  # JAX was pointed at another directory
    assert proc.stdout == f"{other}\n"
    doc = json.loads(record.read_text())
    assert [(d["path"], d["status"]) for d in doc["jax_cache_dirs"]] == [(str(other), "refused")]
    assert os.listdir(other) == []


def test_a_run_that_is_gone_is_seen_even_unreaped(tmp_path):
    """The probe asks whether its run still holds the lease by the lease FIFO's read end,
    which only jaxcache holds open: a jaxcache killed and not yet reaped (a zombie, which a
    signal still reaches, and whose pid another process could take) is gone."""
    from jaxcache.probe import launch

    here = mkdir(tmp_path / "probe", 0o700)
    site = os.path.join(os.path.dirname(launch.__file__), "site.py")
    with open(site, "rb") as f:
        (here / "sitecustomize.py").write_bytes(f.read())
    os.mkfifo(here / "lease", 0o600)
    code = ("import os, signal, time, sitecustomize as s\n"
            f"fifo = {str(here / 'lease')!r}\npid = os.fork()\nif pid == 0:\n"
            "    os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)\n    time.sleep(60)\n"
            "    os._exit(0)\n"
            "while s._lease() != s.HELD:\n    time.sleep(0.01)\n"
            "os.kill(pid, signal.SIGKILL)\n"
            "while s._lease() == s.HELD:\n    time.sleep(0.01)\n"
            "print('gone while a zombie:', open(f'/proc/{pid}/stat').read().split()[2])\n")
    env = environ_without("JAXCACHE_")
    proc = subprocess.run([PY, "-c", code], capture_output=True, text=True,
                          env={**env, "PYTHONPATH": str(here),
                               "JAXCACHE_LEASE": launch._lease(str(here / "lease"))},
                          timeout=JOB_TIMEOUT_S)
    assert proc.stdout == "gone while a zombie: Z\n", proc.stdout + proc.stderr


def test_an_empty_record_path_is_one_line(tmp_path):
    cache = mkdir(tmp_path / "cache", 0o700)
    proc = jaxcache("run", "--cache-dir", str(cache), "--record", "", "--", PY, "-c", "1")
    assert proc.returncode == 2 and proc.stderr == "jaxcache: --record is empty\n", proc.stderr


def test_a_record_kept_in_the_cache_is_written_and_names_no_directory_in_the_env(tmp_path):
    """A record inside the cache (claimed before the audit, so the audit sees it) is written;
    its env is what the job had: no JAX_COMPILATION_CACHE_DIR, though the user's env held
    one (the directory reaches JAX through the probe)."""
    cache = mkdir(tmp_path / "cache", 0o700)
    record = cache / "r.json"
    proc = jaxcache("run", "--cache-dir", str(cache), "--record", str(record), "--", PY, "-c",
                    "1", env=clean_env(JAX_COMPILATION_CACHE_DIR=str(cache)))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(record.read_text())
    assert doc["cache_dir"]["verdict"] == "PRIVATE"
    assert "JAX_COMPILATION_CACHE_DIR" not in doc["env"]


def test_a_refusal_for_origins_comes_before_the_program(tmp_path):
    """--require-origin (and CI) refuse a cache holding entries no watched job wrote: before
    the job's program runs, as a policy's refusal does."""
    cache = mkdir(tmp_path / "cache", 0o700)
    (cache / f"jit_f-{'0' * 64}-cache").write_bytes(b"x" * 100)
    marker = tmp_path / "ran"
    for how in (["--require-origin"], []):
        env = clean_env(XDG_STATE_HOME=str(tmp_path / "state"), **({} if how else {"CI": "true"}))
        proc = jaxcache("run", *how, "--cache-dir", str(cache), "--record",
                        str(tmp_path / "r.json"), "--", PY, "-c",
                        f"open({str(marker)!r}, 'w')", env=env)
        assert proc.returncode == 1 and "refusing cache" in proc.stderr, proc.stderr
        assert not marker.exists()


def test_a_dangling_policy_link_is_refused_before_the_program(tmp_path):
    config = tmp_path / "config" / "jaxcache"
    config.mkdir(parents=True)
    (config / "policy.toml").symlink_to(tmp_path / "nowhere.toml")
    cache = mkdir(tmp_path / "cache", 0o700)
    marker = tmp_path / "ran"
    proc = jaxcache("run", "--cache-dir", str(cache), "--record", str(tmp_path / "r.json"),
                    "--", PY, "-c", f"open({str(marker)!r}, 'w')",
                    env=clean_env(XDG_CONFIG_HOME=str(tmp_path / "config")))
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert not marker.exists()


def test_a_job_is_stopped_when_the_process_table_cannot_be_read(monkeypatch):
    """Stopping a job kills its first process whatever else fails (no descriptor left to
    list /proc with): never left running after jaxcache exits with an error."""
    from jaxcache.probe import job_tree

    child = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"])
    job = job_tree.Job(child.pid, interactive=True)

    def no_fds(pid: int) -> list[int]:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(job_tree, "descendants", no_fds)
    job.stop()
    assert job.reaped
    with pytest.raises(ProcessLookupError):  # killed and reaped: gone
        os.kill(child.pid, 0)
    child.returncode = -9  # reaped by Job.stop, not by Popen


def test_a_closed_stdout_is_not_an_internal_error(tmp_path):
    cache = mkdir(tmp_path / "cache", 0o700)
    script = ("import os, sys\nos.close(1)\nos.execv(sys.executable, [sys.executable, '-m', "
              "'jaxcache', *sys.argv[1:]])\n")
    proc = subprocess.run([PY, "-c", script, "run", "-q", "--cache-dir", str(cache), "--record",
                           str(tmp_path / "r.json"), "--", PY, "-c", "1"], capture_output=True,
                          text=True, env=clean_env(), timeout=JOB_TIMEOUT_S)
    assert proc.returncode == 0 and "internal error" not in proc.stderr, proc.stderr
