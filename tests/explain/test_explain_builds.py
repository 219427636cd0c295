"""explain names another build first (issue 40): processes of the records given that ran
another jaxlib build than the writer, which JAX's key cannot tell apart (the same version
string), so build B silently loads build A's entries. Real jobs under `jaxcache run`: build B
is the venv's jaxlib with bytes appended to its main shared object (tests/support/builds.py)."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest
from support import builds, paths
from support.jobs import clean_env, jaxcache
from support.users import mkdir

pytest.importorskip("jax")

JOB = [sys.executable, str(paths.EXAMPLES / "train.py"), "--steps", "2"]
WRITE_ALL = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}  # written however fast


def run(rec, env: dict, cache, *cmd: str) -> dict:
    proc = jaxcache("run", "--quiet", "--cache-dir", str(cache), "--record", str(rec), "--",
                    *(cmd or JOB), env=env)
    assert rec.exists(), proc.stderr
    return json.loads(rec.read_text())


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Build B, made once for the module."""
    return builds.other_build(tmp_path_factory.mktemp("build"))


def explain(*records, fmt: str = "json"):
    proc = jaxcache("explain", "--format", fmt, *map(str, records))
    assert proc.returncode in (0, 1), proc.stderr
    return proc


def test_build_b_loads_build_a_entries_and_explain_says_so_first(site, tmp_path):
    cache = mkdir(tmp_path / "cache", 0o700)
    a = run(tmp_path / "a.json", builds.build_env(None, clean_env(**WRITE_ALL)), cache)
    b = run(tmp_path / "b.json", builds.build_env(site, clean_env(**WRITE_ALL)), cache)
    assert any(m["outcome"] == "written" for m in a["modules"])
    assert any(m["outcome"] == "hit" for m in b["modules"])  # JAX's key: the same version
    da, db = a["fingerprint"]["build"]["digest"], b["fingerprint"]["build"]["digest"]
    assert da != db
    proc = explain(tmp_path / "a.json", tmp_path / "b.json", fmt="text")
    assert proc.returncode == 1
    first = " ".join(proc.stdout.split("\nMIXED BUILDS")[0].split())
    assert first == (f"BUILD: rank 0 ({tmp_path}/b.json) runs another jaxlib build: digest "
                     f"{da[:16]} (writer) vs {db[:16]} (here); the writer is rank 0 "
                     f"({tmp_path}/a.json)"), proc.stdout
    doc = json.loads(explain(tmp_path / "a.json", tmp_path / "b.json").stdout)
    [diff] = doc["build_diffs"]
    assert diff["fields"] == ["build"] and diff["record"] == str(tmp_path / "b.json")
    assert list(doc).index("build_diffs") < list(doc).index("modules")
    same = json.loads(explain(tmp_path / "a.json", tmp_path / "a.json").stdout)
    assert same["build_diffs"] == []


LAUNCH = """
import os, socket, subprocess, sys
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
job, site = sys.argv[1], sys.argv[2]
# rank 1: build B, before the probe's own entry (jaxcache run's sitecustomize)
envs = [dict(os.environ),
        dict(os.environ, PYTHONPATH=os.pathsep.join([site, os.environ.get("PYTHONPATH", "")]))]
procs = [subprocess.Popen([sys.executable, job, str(port), str(i), "2"], env=envs[i])
         for i in range(2)]
sys.exit(max(p.wait() for p in procs))
"""


def test_rank_1_on_another_build_is_named_and_hashed_by_its_folders(site, tmp_path):
    """Rank 1 loads build B while `jaxcache run` hashed build A: the probe records the folders
    rank 1 loaded, and the record hashes them on this host."""
    launch = tmp_path / "launch.py"
    launch.write_text(textwrap.dedent(LAUNCH))
    cache = mkdir(tmp_path / "cache", 0o700)
    doc = run(tmp_path / "r.json", builds.build_env(None, clean_env()), cache, sys.executable,
              str(launch), str(paths.PROGRAMS / "rank_job.py"), str(site))
    by_rank = {p["identity"]["process_index"]: p for p in [doc, *doc["subprocesses"]]
               if p.get("identity") and p["identity"]["process_index"] is not None}
    assert set(by_rank) == {0, 1}, doc["subprocesses"]
    fa, fb = by_rank[0]["fingerprint"], by_rank[1]["fingerprint"]
    assert fa and fb, (by_rank[0]["fingerprint_unknown"], by_rank[1]["fingerprint_unknown"])
    assert fa["build"]["digest"] != fb["build"]["digest"]
    assert fb["build"]["parts"][0]["package"] == "jaxlib"
    proc = explain(tmp_path / "r.json", fmt="text")
    said = " ".join(proc.stdout.split())
    assert said.startswith(f"BUILD: rank 1 ({tmp_path}/r.json) runs another jaxlib build: "
                           f"digest {fa['build']['digest'][:16]}"), proc.stdout


def test_a_malformed_fingerprint_is_one_line(site, tmp_path):
    cache = mkdir(tmp_path / "cache", 0o700)
    doc = run(tmp_path / "a.json", builds.build_env(None, clean_env()), cache)
    doc["fingerprint"]["cpu"] = "x86"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    bad.chmod(0o600)
    proc = jaxcache("explain", str(bad))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert "fingerprint.cpu" in line, line
