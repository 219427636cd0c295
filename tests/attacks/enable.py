"""Issue 12, classes 4 and 5: what children inherit from enable(), and the directory JAX
really used. The attacker is a second real user; the victims are real JAX processes.

The attack (FACTS.md section 4): in a shared 0777 directory, the attacker renames a copy of
another program's entry (g) over the victim's key file (f). JAX has no check: the victim's
f silently runs g. The control test shows it working without jaxcache; every other test shows
that, with jaxcache, the planted entry is never loaded, and says where.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from support import paths
from support.jobs import clean_env, jaxcache
from support.users import as_user_argv

pytest.importorskip("jax")

JOB = str(paths.PROGRAMS / "redirect_job.py")


def job(*args: str, env: dict | None = None) -> tuple[dict, subprocess.CompletedProcess]:
    proc = subprocess.run([sys.executable, JOB, *args], capture_output=True, text=True,
                          env=env or clean_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc


def entry(directory: Path, fun: str) -> Path:
    (found,) = [p for p in directory.iterdir()
                if p.name.startswith(f"jit_{fun}-") and p.name.endswith("-cache")]
    return found


@pytest.fixture(scope="module")
def planted_dir(accounts):
    """A 0777 cache filled by an honest job, then f's entry replaced by the attacker (user c)
    with a copy of g's, through a rename she may do in a directory everyone can write."""
    base = Path(tempfile.mkdtemp(prefix="jaxcache-attack-"))  # others can reach inside
    base.chmod(0o755)
    try:
        yield _plant(accounts, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _plant(accounts, base: Path) -> dict:
    shared = base / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    honest, _ = job("--both", env=clean_env(JAX_COMPILATION_CACHE_DIR=str(shared)))
    assert honest["f"] != honest["g"]
    f, g = entry(shared, "f"), entry(shared, "g")
    plant = 'cp "$1" "$2" && mv -f "$2" "$3"'
    swap = subprocess.run([*as_user_argv(accounts.c), "sh", "-c", plant, "sh", str(g),
                           str(shared / ".planted"), str(f)], capture_output=True, text=True)
    assert swap.returncode == 0, swap.stderr
    assert f.read_bytes() == g.read_bytes()
    import pwd

    assert f.stat().st_uid == pwd.getpwnam(accounts.c).pw_uid  # the attacker's file now
    snapshot = {p.name: p.read_bytes() for p in shared.iterdir()}
    return {"base": base, "shared": shared, "f": honest["f"], "g": honest["g"],
           "attacker": accounts.c, "snapshot": snapshot}


def untouched(planted_dir) -> None:
    """Nothing was added to or changed in the shared directory."""
    now = {p.name: p.read_bytes() for p in planted_dir["shared"].iterdir()}
    assert now == planted_dir["snapshot"]


def test_control_without_jaxcache_the_planted_entry_runs(planted_dir):
    out, _ = job(env=clean_env(JAX_COMPILATION_CACHE_DIR=str(planted_dir["shared"])))
    assert out["f"] == planted_dir["g"] != planted_dir["f"]  # f ran g's code, silently
    assert out["hits"] >= 1


def test_enable_points_the_children_at_the_audited_directory(planted_dir, tmp_path):
    """JAX_COMPILATION_CACHE_DIR=<planted_dir> before `import jax`, then enable(private): a Python
    child of the job imports jax afresh and must use the private directory."""
    private = tmp_path / "private"
    out, proc = job("--enable", str(private), "--child",
                    env=clean_env(JAX_COMPILATION_CACHE_DIR=str(planted_dir["shared"])))
    assert out["f"] == planted_dir["f"] and out["dir"] == str(private)
    child = out["child"]
    assert child["f"] == planted_dir["f"], "the child loaded the planted entry"
    assert child["env"] == child["dir"] == str(private)
    assert "the processes this one starts now inherit" in proc.stderr
    assert any(p.name.startswith("jit_f-") for p in private.iterdir())
    untouched(planted_dir)


def test_enable_creates_a_missing_directory_under_the_given_policy(accounts, planted_dir,
                                                                    tmp_path):
    """enable(missing, policy=P): P trusts the group that may write the parent, so the new
    directory is SHARED-BY-POLICY and accepted; without P it is refused and not created."""
    team = planted_dir["base"] / "team"
    team.mkdir()
    os.chown(team, 0, __import__("grp").getgrnam(accounts.group).gr_gid)
    team.chmod(0o775)
    policy = tmp_path / "policy.toml"
    policy.write_text(f'trusted_groups = ["{accounts.group}"]\n')
    policy.chmod(0o600)
    code = f"""
import jax, jaxcache
from jaxcache.lifecycle.enabling import UntrustedCacheError
try:
    jaxcache.enable({str(team / 'refused')!r})
except UntrustedCacheError as e:
    print("refused", e.report.verdict.value)
r = jaxcache.enable({str(team / 'cache')!r}, policy={str(policy)!r})
print(r.report.verdict.value, r.path, jax.config.jax_compilation_cache_dir)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=clean_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "refused UNSAFE"
    assert lines[1] == f"SHARED-BY-POLICY {team / 'cache'} {team / 'cache'}"
    assert not (team / "refused").exists()
    assert (team / "cache").stat().st_mode & 0o777 == 0o700


def run_job(cache: Path, record: Path, *args: str) -> subprocess.CompletedProcess:
    return jaxcache("run", "--cache-dir", str(cache), "--record", str(record), "--",
                    sys.executable, JOB, *args, env=clean_env())


def check_refused_run(planted_dir, proc, record: Path, private: Path) -> dict:
    shared = str(planted_dir["shared"])
    assert proc.returncode == 1, proc.stderr  # the job itself exited 0
    lines = proc.stderr.splitlines()  # the job's own stderr, then the summary
    (start,) = [i for i, line in enumerate(lines) if line.startswith("jaxcache run: ")]
    first = lines[start - 1]  # the summary's first line, before its usual opening
    assert first.startswith(f"WARNING: JAX was pointed at {shared} (UNSAFE"), proc.stderr
    assert planted_dir["attacker"] in first and "refused" in first
    assert lines[-1].startswith("jaxcache: exit 1: JAX was pointed at another cache directory, "
                                "which jaxcache audited and refused"), lines[-1]
    doc = json.loads(record.read_text())
    (other,) = [d for d in doc["jax_cache_dirs"] if not d["audited_dir"]]
    assert other["path"] == shared and other["status"] == "refused"
    assert other["verdict"] == "UNSAFE" and planted_dir["attacker"] in other["verdict_detail"]
    assert doc["cache_dir"]["path"] == str(private)
    f = [m for m in doc["modules"] if m["name"] == "jit_f"]
    assert f and all(m["cache_dir"] == shared and m["cache_dir_status"] == "refused"
                     and m["outcome"] == "skipped" and m["reason"] == "dir-refused" for m in f)
    explain = jaxcache("explain", str(record))
    assert explain.returncode == 1, explain.stdout + explain.stderr
    assert explain.stdout.splitlines()[0].startswith("WARNING:")
    assert f"JAX was pointed at {shared} (UNSAFE" in explain.stdout.splitlines()[0]
    untouched(planted_dir)
    return doc


@pytest.mark.parametrize("existing", [True, False], ids=["existing", "created"])
def test_run_job_that_redirects_jax_never_loads_the_planted_entry(planted_dir, tmp_path, existing):
    """`jaxcache run --cache-dir PRIVATE` and a job that calls
    jax.config.update('jax_compilation_cache_dir', <planted_dir>) itself, before its first compile:
    refused (a cache that never hits and never writes), named first, exit 1."""
    private = tmp_path / "private"
    if existing:  # a private directory that exists, or one the run creates
        private.mkdir(mode=0o700)
    record = tmp_path / "run.json"
    proc = run_job(private, record, "--redirect", str(planted_dir["shared"]))
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["f"] == planted_dir["f"], "the job loaded the planted entry"
    assert out["hits"] == 0
    check_refused_run(planted_dir, proc, record, private)


def test_run_job_that_enables_then_redirects(planted_dir, tmp_path):
    """The job calls jaxcache.enable(PRIVATE) itself, then points JAX at the planted_dir
    directory: enable()'s guard audits it on the spot, refuses it, and the run says so."""
    private = tmp_path / "private"
    record = tmp_path / "run.json"
    proc = run_job(private, record, "--enable", str(private), "--redirect",
                   str(planted_dir["shared"]))
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["f"] == planted_dir["f"] and out["hits"] == 0
    doc = check_refused_run(planted_dir, proc, record, private)
    (other,) = [d for d in doc["jax_cache_dirs"] if not d["audited_dir"]]
    assert other["reason"].startswith("verdict UNSAFE")  # judged in the job, by enable()


def test_enable_then_redirect_without_jaxcache_run(planted_dir, tmp_path):
    """A library caller, no probe: enable(private), then config.update(<planted_dir>)."""
    private = tmp_path / "private"
    out, proc = job("--enable", str(private), "--redirect", str(planted_dir["shared"]))
    assert out["f"] == planted_dir["f"] and out["hits"] == 0
    assert out["dir"] == str(planted_dir["shared"])  # the setting, not served
    assert f"JAX was pointed at {planted_dir['shared']}, which jaxcache refuses: verdict UNSAFE" \
        in proc.stderr
    untouched(planted_dir)


def test_run_job_whose_child_is_pointed_at_the_planted_dir(planted_dir, tmp_path):
    """Under `jaxcache run`, a launcher starts a Python worker with
    JAX_COMPILATION_CACHE_DIR=<planted_dir>: the worker's probe guards it too."""
    private = tmp_path / "private"
    record = tmp_path / "run.json"
    proc = run_job(private, record, "--child-env", str(planted_dir["shared"]))
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["child"]["f"] == planted_dir["f"], "the worker loaded the planted entry"
    assert out["child"]["hits"] == 0 and out["child"]["dir"] == str(planted_dir["shared"])
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(record.read_text())
    (other,) = [d for d in doc["jax_cache_dirs"] if not d["audited_dir"]]
    assert other["status"] == "refused" and other["verdict"] == "UNSAFE"
    (worker,) = doc["subprocesses"]
    assert other["pids"] == [worker["pid"]]
    assert {m["cache_dir_status"] for m in worker["modules"]} == {"refused"}
    assert f"WARNING: JAX was pointed at {planted_dir['shared']} (UNSAFE" in proc.stderr
    untouched(planted_dir)



def test_enable_then_relative_redirect_and_chdir(accounts, tmp_path):
    """The job points JAX at a relative name of the audited directory, then changes its
    working directory: JAX's cache object keeps the name as given, so it would read the same
    name under the new directory, the attacker's. The guard must hand JAX the audited
    absolute path. (Keys hold the cache dir setting on JAX <= 0.10.2: the honest run that
    fills the shared directory uses the same relative name, as the attacker can.)"""
    base = Path(tempfile.mkdtemp(prefix="jaxcache-attack-"))
    base.chmod(0o755)
    try:
        shared = base / "c"
        shared.mkdir()
        shared.chmod(0o777)
        filled = subprocess.run([sys.executable, JOB, "--both"], capture_output=True, text=True,
                                env=clean_env(JAX_COMPILATION_CACHE_DIR="c"), timeout=300,
                                cwd=base)
        assert filled.returncode == 0, filled.stderr[-3000:]
        honest = json.loads(filled.stdout.strip().splitlines()[-1])
        f, g = entry(shared, "f"), entry(shared, "g")
        plant = 'cp "$1" "$2" && mv -f "$2" "$3"'
        swap = subprocess.run([*as_user_argv(accounts.c), "sh", "-c", plant, "sh", str(g),
                               str(shared / ".planted"), str(f)], capture_output=True, text=True)
        assert swap.returncode == 0, swap.stderr
        control = subprocess.run([sys.executable, JOB], capture_output=True, text=True,
                                 env=clean_env(JAX_COMPILATION_CACHE_DIR="c"), timeout=300,
                                 cwd=base)
        assert json.loads(control.stdout.strip().splitlines()[-1])["f"] == honest["g"]
        snapshot = sorted(p.name for p in shared.iterdir())
        work = tmp_path / "work"
        work.mkdir()
        private = work / "c"
        proc = subprocess.run([sys.executable, JOB, "--enable", str(private), "--redirect", "c",
                               "--chdir", str(base)], capture_output=True, text=True,
                              env=clean_env(), timeout=300, cwd=work)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        assert out["f"] == honest["f"] != honest["g"], "the job loaded the planted entry"
        assert sorted(p.name for p in shared.iterdir()) == snapshot  # nothing written there
        assert any(p.name.startswith("jit_f-") for p in private.iterdir())
    finally:
        shutil.rmtree(base, ignore_errors=True)
