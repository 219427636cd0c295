"""The probe's guard when it cannot be installed: the job runs with no persistent cache, and
the record and summary say so first (fail closed, never an unguarded cache)."""

from __future__ import annotations

import json
import os
import sys

import pytest
from support import paths
from support.jobs import environ_without

pytest.importorskip("jax")

JOB = str(paths.PROGRAMS / "redirect_job.py")


def test_a_guard_that_cannot_be_installed_turns_the_cache_off(tmp_path):
    from jaxcache.probe import runner
    from jaxcache.records import run_record as recordmod
    from jaxcache.records.run_document import RunRecord
    from jaxcache.report import run as run_report

    fake = tmp_path / "lib" / "jaxcache"  # a jaxcache whose guard meets a changed JAX
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "jaxcompat.py").write_text(
        "def put_in_force(env):\n"
        "    import jax\n"
        "    jax.config.update('jax_compilation_cache_dir', env['JAX_COMPILATION_CACHE_DIR'])\n"
        "def guard_cache_dirs(*args, **kwargs):\n"
        "    raise RuntimeError('get_file_cache is gone')\n")
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    env = environ_without("JAX_", "JAXCACHE_")
    env.update(JAX_PLATFORMS="cpu", JAX_COMPILATION_CACHE_DIR=str(cache),
               JAXCACHE_AUDITED=str(cache), JAXCACHE_LIB=str(fake))
    out = tmp_path / "out.txt"
    with open(out, "wb") as stdout:
        outcome = runner.run([sys.executable, JOB], env, stdout=stdout)
    assert outcome.status == 0
    printed = json.loads(out.read_text().splitlines()[-1])
    assert printed["dir"] is None  # JAX was left no cache directory
    assert os.listdir(cache) == []
    doc = recordmod.build(outcome, cache_dir=str(cache), verdict="PRIVATE",
                          before=recordmod.DirSnapshot(str(cache), {}),
                          after=recordmod.DirSnapshot.at(str(cache)), env=env,
                          cwd=".").to_json()
    assert doc["cache_guard_errors"] == [{"pid": outcome.pid,
                                          "error": "RuntimeError: get_file_cache is gone"}]
    first = run_report.render_text(RunRecord.from_json(doc), "rec.json").splitlines()[0]
    assert first.startswith(f"WARNING: process {outcome.pid}: jaxcache could not guard")
    assert "turned off" in first
