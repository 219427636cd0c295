"""An early-started job is audited once one of its processes begins to import jax (it asks
through the probe folder's FIFO, probe/job_gates.py): what a job that never asks is told, what
the record says when something the probe does not see used the cache anyway, and what a
refusal at that point stops. Each found by an attack on the change."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time

import pytest
from support.jobs import JOB_TIMEOUT_S, clean_env, jaxcache
from support.users import mkdir

from jaxcache.run.early_start import allowed

PY = sys.executable


def _run(cache, record, code: str, *opts: str) -> subprocess.CompletedProcess:
    assert allowed([PY, "-c", code], PY, str(cache), policy_in_use=False, sealed=False)
    return jaxcache("run", *opts, "--cache-dir", str(cache), "--record", str(record), "--",
                    PY, "-c", code, env=clean_env())


def test_a_process_the_probe_does_not_see_makes_the_cache_audited_after_the_job(tmp_path):
    """No process asked, yet the directory changed while the job ran (a `python -I` child,
    which loads no probe, wrote into it): the record does not say nothing happened; the
    cache is audited after the job, and a verdict jaxcache would have refused fails the run
    though the job exited 0."""
    cache = mkdir(tmp_path / "cache", 0o700)
    record = tmp_path / "r.json"
    write = f"open({str(cache / 'jit_x-0-cache')!r}, 'w').write('x')"
    proc = _run(cache, record, f"import subprocess, sys\nsubprocess.run([sys.executable, '-I', "
                               f"'-c', {write!r}], check=True)\n")
    assert proc.returncode == 0, proc.stderr
    part = json.loads(record.read_text())["cache_dir"]
    assert part["verdict"] == "PRIVATE" and part["audited_after_job"] is True
    assert part["before"]["entries"] is None and "changed while it ran" in part["before"]["unknown"]
    assert part["after"]["entries"] == 1
    opened = f"import os; os.chmod({str(cache)!r}, 0o777)"
    proc = _run(cache, record, f"import subprocess, sys\nsubprocess.run([sys.executable, '-I', "
                               f"'-c', {opened!r}], check=True)\n")
    os.chmod(cache, 0o700)
    assert proc.returncode == 1, proc.stderr  # the job's own status was 0
    part = json.loads(record.read_text())["cache_dir"]
    assert part["verdict"] == "UNSAFE" and part["audited_after_job"] is True
    assert "audited after the job" in proc.stderr


def test_a_job_that_never_asks_and_changes_nothing_is_not_audited(tmp_path):
    cache = mkdir(tmp_path / "cache", 0o700)
    record = tmp_path / "r.json"
    proc = _run(cache, record, "print('no jax')")
    assert proc.returncode == 0 and proc.stdout == "no jax\n", proc.stderr
    part = json.loads(record.read_text())["cache_dir"]
    assert part["verdict"] == "NOT-AUDITED" and part["audited_after_job"] is False


@pytest.mark.skipif(os.geteuid() != 0, reason="chattr +i needs root")
def test_a_refusal_at_import_jax_stops_every_process_the_job_started(tmp_path):
    """By its first `import jax` a job may have started helpers: a refusal then stops them
    with it (a helper left running would write once its parent is gone), and says so."""
    pytest.importorskip("jax")
    cache = mkdir(tmp_path / "cache", 0o700)
    marker, pidfile = tmp_path / "helper-ran-on", tmp_path / "helper.pid"
    helper = (f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
              "parent = os.getppid()\nwhile os.getppid() == parent:\n"
              f"    time.sleep(0.01)\nopen({str(marker)!r}, 'w')\n")
    job = (f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', {helper!r}],"
           " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)"  # a leftover holds no pipe
           "\ntime.sleep(0.2)\nimport jax\nprint('past the gate')\n")
    if subprocess.run(["chattr", "+i", str(cache)], capture_output=True).returncode != 0:
        pytest.skip("this filesystem has no immutable flag")
    try:
        proc = _run(cache, tmp_path / "r.json", job)
    finally:
        subprocess.run(["chattr", "-i", str(cache)], check=True)
    assert proc.returncode == 1 and "refusing cache" in proc.stderr, proc.stderr
    assert "it was stopped there, before JAX had the directory, with the processes" in proc.stderr
    assert "past the gate" not in proc.stdout
    time.sleep(1.0)  # a helper left running writes within milliseconds of its parent's end
    assert not marker.exists()
    try:  # and none is left stopped either: gone, or a zombie of init's
        with open(f"/proc/{int(pidfile.read_text())}/stat") as f:
            assert f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        pass


def test_descriptors_numbered_past_1024_are_waited_on(tmp_path):
    """select() cannot watch a descriptor numbered 1024 or more; the wait for the ask must
    not fail (and leave the job running) in a process that holds that many open."""
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
    assert json.loads(record.read_text())["cache_dir"]["verdict"] == "NOT-AUDITED"
    del soft


def test_looking_for_jax_before_importing_it_keeps_the_probe(tmp_path):
    """`importlib.util.find_spec("jax")` first (an "is it installed?" check): the probe's
    watcher stays for the import itself, which asks, waits at the gate and gets the cache."""
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
    its own and tries again: that import too waits at the gate, and the program's directory
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


def test_a_wrapper_that_is_gone_is_seen_even_unreaped(tmp_path):
    """The probe's waits ask whether jaxcache still runs by the ask FIFO's read end, which
    jaxcache holds open: a jaxcache killed and not yet reaped (a zombie, which a signal still
    reaches, and whose pid another process could take) is gone."""
    from jaxcache.probe import launch

    here = mkdir(tmp_path / "probe", 0o700)
    site = os.path.join(os.path.dirname(launch.__file__), "site.py")
    with open(site, "rb") as f:
        (here / "sitecustomize.py").write_bytes(f.read())
    os.mkfifo(here / "ask", 0o600)
    code = ("import os, signal, time, sitecustomize as s\n"
            f"fifo = {str(here / 'ask')!r}\npid = os.fork()\nif pid == 0:\n"
            "    os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)\n    time.sleep(60)\n"
            "    os._exit(0)\n"
            "while not s._held():\n    time.sleep(0.01)\n"
            "os.kill(pid, signal.SIGKILL)\n"
            "while s._held():\n    time.sleep(0.01)\n"
            "print('gone while a zombie:', open(f'/proc/{pid}/stat').read().split()[2])\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAXCACHE_")}
    proc = subprocess.run([PY, "-c", code], capture_output=True, text=True,
                          env={**env, "PYTHONPATH": str(here),
                               "JAXCACHE_LEASE": launch._lease(str(here / "ask"))},
                          timeout=JOB_TIMEOUT_S)
    assert proc.stdout == "gone while a zombie: Z\n", proc.stdout + proc.stderr


def test_a_script_named_python_is_not_started_early(tmp_path):
    """What the start is held by is the probe, which only Python itself loads: a script by
    that name (a shim, a wrapper) would run its own code first, so it is audited first."""
    from jaxcache.run.early_start import loads_probe

    script = tmp_path / "python3"
    script.write_text("#!/bin/sh\nexec python3 \"$@\"\n")
    script.chmod(0o755)
    assert not loads_probe(str(script), ["job.py"])
    assert loads_probe(PY, ["job.py"])


def test_an_empty_record_path_is_one_line(tmp_path):
    cache = mkdir(tmp_path / "cache", 0o700)
    proc = jaxcache("run", "--cache-dir", str(cache), "--record", "", "--", PY, "-c", "1")
    assert proc.returncode == 2 and proc.stderr == "jaxcache: --record is empty\n", proc.stderr


def test_a_record_kept_in_the_cache_is_not_a_change_while_the_job_ran(tmp_path):
    """The cache's state is taken after the record's claim (a record inside the cache makes
    a name there): a job that asked for nothing and changed nothing is NOT-AUDITED, not
    audited after the job as if another process had written there; and its record's env is
    what the job had (no cache directory)."""
    cache = mkdir(tmp_path / "cache", 0o700)
    record = cache / "r.json"
    assert allowed([PY, "-c", "1"], PY, str(cache), policy_in_use=False, sealed=False)
    proc = jaxcache("run", "--cache-dir", str(cache), "--record", str(record), "--", PY, "-c",
                    "1", env=clean_env(JAX_COMPILATION_CACHE_DIR=str(cache)))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(record.read_text())
    assert doc["cache_dir"]["verdict"] == "NOT-AUDITED"
    assert "JAX_COMPILATION_CACHE_DIR" not in doc["env"]


def test_a_refusal_for_origins_comes_before_the_program(tmp_path):
    """--require-origin (and CI) refuse a cache holding entries no watched job wrote: before
    the job's program runs, as a policy's refusal does, not at its `import jax`."""
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


def test_an_isolating_pth_file_or_a_mount_name_with_a_space_is_read_as_it_is(tmp_path):
    from jaxcache.run.early_start import _unescaped, loads_probe

    beside = tmp_path / "bin"
    beside.mkdir()
    (beside / "python3").symlink_to(PY)
    assert loads_probe(str(beside / "python3"), ["job.py"])
    (beside / "python3._pth").write_text(".\n")  # isolated: PYTHONPATH, the probe, ignored
    assert not loads_probe(str(beside / "python3"), ["job.py"])
    assert _unescaped(r"/home/u/my\040cache") == "/home/u/my cache"
    assert _unescaped(r"/a\134b\011c") == "/a\\b\tc"


def test_a_job_is_stopped_when_the_process_table_cannot_be_read(monkeypatch):
    """Stopping a job kills its first process whatever else fails (no descriptor left to
    list /proc with): never left running after jaxcache exits with an error."""
    from jaxcache.probe import job_gates

    child = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"])
    job = job_gates.Job(child.pid, interactive=True)

    def no_fds(pid: int) -> list[int]:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(job_gates, "descendants", no_fds)
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
