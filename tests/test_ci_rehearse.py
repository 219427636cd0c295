"""ci-templates/rehearse.sh, the local rehearsal of docs/how-to/ci.md's sealed flow, run end to end
as a team would before pushing the workflow: real JAX compiling on the CPU, fresh homes, a tarball
for the CI cache. The clean cache passes the gate and the consumer hits what the publisher signed;
the poisoned copy (one planted, unsigned entry) is refused by the gate."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from support import paths
from support.jobs import clean_env

SCRIPT = paths.CHECKOUT / "ci-templates" / "rehearse.sh"
BIN = Path(sys.executable).parent  # the venv's bin, whose jaxcache the rehearsal runs


def test_the_rehearsal_passes_the_clean_cache_and_refuses_the_poisoned_one(tmp_path):
    env = clean_env(PATH=f"{BIN}:{os.environ['PATH']}", PYTHON=sys.executable,
                    RUN_FLAGS="--min-compile-time 0", TMPDIR=str(tmp_path))
    # the bundled example, small: JAX's threshold is 0 above, so what it compiles is written
    # whatever this machine's speed
    job = [sys.executable, "-m", "jaxcache.examples.mlp", "--micro-steps", "2", "--width", "16",
           "--steps", "1"]
    proc = subprocess.run(["bash", str(SCRIPT), "--", *job], env=env, capture_output=True,
                          text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    # the steps of docs/how-to/ci.md, in order, each by its role
    steps = [r"\[you\] \$ \S*jaxcache keygen ",
             r"\[publisher\] \$ \S*jaxcache run --sealed --signing-key \S+ --cache-dir ",
             r"\[publisher\] \$ tar -C \S+ -czf \S+/clean\.tgz \.",
             r"\[consumer\] \$ mkdir -p \S+ && tar -C \S+ -xzf \S+/clean\.tgz",
             r"\[consumer\] \$ \S*jaxcache verify --strict ",
             r"\[consumer\] \$ \S*jaxcache run --sealed --cache-dir ",
             r"\[consumer-poisoned\] \$ \S*jaxcache verify --strict "]
    at = 0
    for step in steps:
        found = re.compile(step).search(out, at)
        assert found, (step, out)
        at = found.end()
    hits = re.search(r"the job hit (\d+);", out)
    assert hits and int(hits.group(1)) > 0, out
    assert re.search(r"UNSIGNED +jit_planted-[0-9a-f]{64}-cache", out), out
    assert "the gate refused the poisoned cache (exit 1)" in out
    assert list(tmp_path.iterdir()) == []  # its folder removed (no --keep)


def test_a_job_that_writes_no_entry_fails_the_rehearsal_and_says_why(tmp_path):
    """Nothing to consume is no rehearsal: a job JAX caches nothing of (here, no JAX at all)
    fails it at the publisher, naming JAX's write thresholds."""
    env = clean_env(PATH=f"{BIN}:{os.environ['PATH']}", PYTHON=sys.executable,
                    TMPDIR=str(tmp_path))
    proc = subprocess.run(["bash", str(SCRIPT), "--", sys.executable, "-c", "pass"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "rehearsal FAILED: the publisher's job wrote no entry" in proc.stderr
    assert "--min-compile-time 0" in proc.stderr
