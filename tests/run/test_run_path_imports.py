"""What `jaxcache run` imports on its way through a job: every module is start-up time of
every job (benchmarks/wrapper_cost.py), so the heavy standard-library ones that run's path
does not need stay off it. Each of these was on it once (threading for a sealed reader's
listing thread, importlib.util for the fingerprint's finders). The standard parts run is built
of are on it on purpose, with what they import themselves: argparse; typing, for the
NamedTuples of the path before the job; dataclasses, for the record's model, and threading,
which imports that model while the job runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.users import isolation

# stdlib modules whose import alone costs a job's start-up 2-30 ms here, none needed by a
# plain `run` (each is imported only on the path that uses it), but for what the standard
# parts bring (_standard_parts)
HEAVY = ("typing", "inspect", "threading", "importlib.util", "contextlib", "warnings",
         "subprocess", "tempfile", "shutil", "signal", "logging", "secrets", "hashlib",
         "socket", "datetime", "tomllib")


def _standard_parts() -> set[str]:
    """What importing argparse, typing, dataclasses and threading imports, on this Python
    (inspect, and through it contextlib and warnings, on 3.11)."""
    proc = subprocess.run(
        [sys.executable, "-I", "-c", "import sys; before = set(sys.modules); "
         "import argparse, typing, dataclasses, threading; "
         "print(*sorted(set(sys.modules) - before))"],
        capture_output=True, text=True, check=True)
    return set(proc.stdout.split())


def _imported(args: list[str], tmp_path) -> set[str]:
    """The modules `jaxcache ARGS` imported, through the installed command (`python -m`
    would bring runpy's own imports); -X importtime, not the variable: only ours, not the
    job's."""
    script = Path(sys.executable).with_name("jaxcache")
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", str(script), *args], capture_output=True,
        text=True, env={"PATH": "/usr/bin:/bin", "XDG_STATE_HOME": str(tmp_path / "state"),
                        **isolation()})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()
            if line.startswith("import time:")}


AUDIT = "jaxcache.trust.judgement.audit"


@pytest.mark.parametrize("job", ["python-jax", "python-no-jax", "not-python"])
def test_a_plain_run_imports_none_of_the_heavy_modules(tmp_path, job):
    """Each kind of job (a Python one that imports jax, one that does not, a program that is
    not Python): the audit comes first, then the job, then its record."""
    cache = tmp_path / "c"
    cache.mkdir(mode=0o700)  # a run's steady state: the first one also creates it (trust/create)
    argv = {"python-jax": [sys.executable, "-c", "import jax"],
            "python-no-jax": [sys.executable, "-c", "pass"], "not-python": ["/bin/true"]}[job]
    imported = _imported(["run", "-q", "--cache-dir", str(cache), "--record",
                          str(tmp_path / "r.json"), "--", *argv], tmp_path)
    assert "jaxcache.records.run_record" in imported  # the whole path ran, the record too
    assert {AUDIT, "jaxcache.fingerprint.binaries"} <= imported  # the audit, the fingerprint
    assert (set(HEAVY) & imported) - _standard_parts() == set()
