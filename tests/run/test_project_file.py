"""The project file (issue 44) as a job sees it: `jaxcache run` and `jaxcache.enable()` take the
cache directory, JAX's write thresholds and the records folder from it when not given, and the
directory it names is audited like any other. Real JAX on the CPU, real subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support import paths
from support.jobs import clean_env, jaxcache

pytest.importorskip("jax")

JOB = str(paths.PROGRAMS / "quick_compiles.py")


def test_run_takes_cache_dir_thresholds_and_records_dir_from_the_project_file(tmp_path):
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    # every compile of the job is quick: only a threshold of 0 writes them
    (root / "pyproject.toml").write_text(
        '[tool.jaxcache]\ncache_dir = "jax-cache"\nmin_compile_time = 0\n'
        '[tool.jaxcache.records]\ndir = "runs"\n')
    env = clean_env(NO_COLOR="1", XDG_STATE_HOME=str(tmp_path / "state"))
    proc = jaxcache("run", "--", sys.executable, JOB, "2", cwd=str(root / "src"), env=env)
    assert proc.returncode == 0, proc.stderr
    records = sorted((root / "runs").iterdir())
    assert len(records) == 1 and not (tmp_path / "state" / "jaxcache" / "runs").exists()
    doc = json.loads(records[0].read_text())
    assert doc["cache_dir"]["path"] == str(root / "jax-cache")
    assert doc["cache_dir"]["verdict"] == "PRIVATE"
    assert doc["env"]["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] == "0.0"
    assert doc["counts"]["outcomes"].get("written", 0) >= 3, doc["counts"]
    # `jaxcache records` lists from the same folder
    listed = jaxcache("records", "--format", "json", cwd=str(root), env=env)
    assert listed.returncode == 0, listed.stderr
    assert [r["name"] for r in json.loads(listed.stdout)["records"]] == [records[0].name]
    # a flag beats the file: the threshold's default is back, nothing quick is written
    flagged = tmp_path / "flagged.json"
    proc = jaxcache("run", "--min-compile-time", "1000", "--record", str(flagged),
                    "--cache-dir", str(tmp_path / "other"), "--", sys.executable, JOB, "2",
                    cwd=str(root), env=env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(flagged.read_text())
    assert doc["cache_dir"]["path"] == str(tmp_path / "other")
    assert "written" not in doc["counts"]["outcomes"]


def test_a_cache_dir_from_the_project_file_is_audited_like_any_other(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)  # anyone can write it: refused, project file or not
    (tmp_path / ".jaxcache.toml").write_text(f'cache_dir = "{shared}"\n')
    record = tmp_path / "rec.json"
    proc = jaxcache("run", "--record", str(record), "--", sys.executable, "-c", "print(1)",
                    cwd=str(tmp_path), env=clean_env(NO_COLOR="1"))
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith(f"jaxcache: refusing cache {shared}: verdict UNSAFE")
    assert proc.stdout == ""  # the job never ran


ENABLE = """
import json, jaxcache
r = jaxcache.enable()
print(json.dumps([r.path, list(r.thresholds)]))
jaxcache.disable()
r = jaxcache.enable(min_compile_time=0.5)
print(json.dumps([r.path, list(r.thresholds)]))
"""


def test_enable_takes_cache_dir_and_thresholds_from_the_project_file(tmp_path):
    (tmp_path / ".jaxcache.toml").write_text(
        'cache_dir = "cache"\nmin_compile_time = 0.25\nmin_entry_size = 7\n')
    proc = subprocess.run([sys.executable, "-c", ENABLE], capture_output=True, text=True,
                          cwd=tmp_path, env=clean_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    first, second = (json.loads(line) for line in proc.stdout.splitlines())
    assert first == [str(tmp_path / "cache"), [0.25, 7]]
    assert second == [str(tmp_path / "cache"), [0.5, 7]]  # given: the argument wins
    # JAX's own variable beats the file: enable() leaves what JAX read alone
    proc = subprocess.run([sys.executable, "-c", ENABLE], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300,
                          env=clean_env(JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="3"))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[0]) == [str(tmp_path / "cache"), [0.25, 3]]


def test_enable_refuses_a_trust_setting_in_the_project_file(tmp_path):
    (tmp_path / ".jaxcache.toml").write_text('trusted_users = ["mallory"]\n')
    code = ("import jaxcache\ntry:\n    jaxcache.enable()\nexcept jaxcache.JaxcacheError as e:\n"
            "    print('refused:', e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, env=clean_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"refused: project file {tmp_path / '.jaxcache.toml'}: "
                                  "trusted_users is a trust setting"), proc.stdout
    assert not (tmp_path / "cache").exists()
