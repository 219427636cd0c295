"""The JAX version gate of `jaxcache run` and `explain`: outside the supported lines, one clear
line and exit 2, or a record marked `unverified` with --unverified-jax."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from support.jobs import jaxcache

from jaxcache.jaxcompat import gate as jaxgate
from jaxcache.jaxcompat import versions


def _venv_with_jax(root: Path, version: str) -> Path:
    """A real virtual environment layout (pyvenv.cfg, bin/python -> this interpreter) whose
    site-packages holds jax-<version>.dist-info, as pip leaves it."""
    (root / "bin").mkdir(parents=True)
    (root / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).parent}\n")
    info = root / "lib" / "python3.11" / "site-packages" / f"jax-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: jax\nVersion: {version}\n")
    os.symlink(sys.executable, root / "bin" / "python")
    return root / "bin" / "python"


def test_an_old_jax_is_refused_before_the_job_starts(tmp_path):
    python = _venv_with_jax(tmp_path / "venv", "0.4.30")
    assert jaxgate.jax_version_for(str(python)) == "0.4.30"
    marker = tmp_path / "ran"
    proc = jaxcache("run", "--cache-dir", str(tmp_path / "c"), "--record",
                    str(tmp_path / "r.json"), "--", str(python), "-c",
                    f"open({str(marker)!r}, 'w')")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "0.4.30" in lines[0] and "--unverified-jax" in lines[0], lines
    assert not marker.exists(), "the job ran although its JAX was refused"


@pytest.mark.parametrize("version", ["0.13.0", "1.0.0"])
def test_a_jax_newer_than_the_newest_line_is_refused_before_the_job_starts(tmp_path, version):
    python = _venv_with_jax(tmp_path / "venv", version)
    marker = tmp_path / "ran"
    proc = jaxcache("run", "--cache-dir", str(tmp_path / "c"), "--", str(python), "-c",
                    f"open({str(marker)!r}, 'w')")
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert f"JAX {version} is newer" in line and "0.5 to 0.12" in line, line
    assert not marker.exists(), "the job ran although its JAX was refused"


@pytest.mark.parametrize("version", ["0.11.2", "0.12.0.1", "0.12.1"])
def test_the_new_lines_are_admitted_before_the_job_starts(tmp_path, version):
    python = _venv_with_jax(tmp_path / "venv", version)
    proc = jaxcache("run", "-q", "--cache-dir", str(tmp_path / "c"), "--", str(python), "-c",
                    "print('ok')")
    assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stderr


def test_unverified_flag_runs_it_and_never_applies_to_sealed(tmp_path):
    python = _venv_with_jax(tmp_path / "venv", "0.13.0")
    proc = jaxcache("run", "--unverified-jax", "--cache-dir", str(tmp_path / "c"), "--record",
                    str(tmp_path / "r.json"), "--", str(python), "-c", "print('ok')")
    assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["unverified_allowed"] is True
    proc = jaxcache("run", "--unverified-jax", "--sealed", "--cache-dir", str(tmp_path / "s"),
                    "--", str(python), "-c", "print('ok')")
    assert proc.returncode == 2 and "sealed" in proc.stderr and not proc.stdout


@pytest.mark.parametrize("version,kind", [("0.4.38", "older"), ("0.13.0", "newer"),
                                          ("0.7.0", "supported"), ("0.10.2", "tested"),
                                          ("0.11.0", "supported"), ("0.12.0.1", "tested")])
def test_support_levels(version, kind):
    assert versions.support(version) == kind
    assert (versions.why_unverified(version) is None) == (kind in ("tested", "supported"))


def test_explain_refuses_an_unverified_record_unless_asked(tmp_path):
    pytest.importorskip("jax")
    record = tmp_path / "r.json"
    proc = jaxcache("run", "--cache-dir", str(tmp_path / "c"), "--record", str(record), "--",
                    sys.executable, "-c", "import jax; jax.jit(lambda x: x + 1)(1.0)")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(record.read_text())
    assert doc["unverified"] is None and doc["unverified_allowed"] is False
    doc["unverified"] = versions.why_unverified("0.4.30")  # as run --unverified-jax leaves it
    record.write_text(json.dumps(doc))
    proc = jaxcache("explain", str(record))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "--unverified-jax" in proc.stderr
    proc = jaxcache("explain", "--unverified-jax", "--format", "json", str(record))
    assert json.loads(proc.stdout)["unverified"] == [f"{record}: {doc['unverified']}"]
    proc = jaxcache("explain", "--unverified-jax", str(record))
    assert proc.stdout.startswith("UNVERIFIED: ")


def test_bench_refuses_an_old_jax_before_any_trial(tmp_path):
    python = _venv_with_jax(tmp_path / "venv", "0.4.38")
    proc = jaxcache("bench", "-t", "1", "-k", "1", "--", str(python), "-c", "1")
    assert proc.returncode == 2 and "0.4.38" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("version,in_key,callbacks", [
    ("0.5.3", True, False), ("0.10.2", True, False), ("0.11.0", False, True),
    ("0.12.0.1", False, True), ("0.12.0.dev20261101", False, True),
    (None, None, None), ("", None, None), ("garbage", None, None), ("v0.12", None, None)])
def test_what_each_line_does_with_paths_and_callbacks(version, in_key, callbacks):
    assert versions.path_in_key(version) is in_key
    assert versions.caches_host_callbacks(version) is callbacks
