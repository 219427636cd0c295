"""enable()'s warnings point at the caller's line, not at jaxcache's (a user reading a warning
must find their own call). A real JAX process, a real directory holding entries of unknown
origin (the warning outside CI)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.jobs import clean_env

pytest.importorskip("jax")


def test_an_origin_warning_names_the_line_that_called_enable(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    (cache / f"jit_f-{'ab' * 32}-cache").write_bytes(b"x")  # not written by a watched job
    job = tmp_path / "job.py"
    job.write_text("import warnings\nimport jax\nimport jaxcache\n"
                   "with warnings.catch_warnings(record=True) as seen:\n"
                   "    warnings.simplefilter('always')\n"
                   f"    jaxcache.enable({str(cache)!r})\n"
                   "print([f'{w.filename}:{w.lineno}' for w in seen])\n")
    proc = subprocess.run([sys.executable, str(job)], capture_output=True, text=True,
                          env=clean_env(XDG_STATE_HOME=str(tmp_path / "state")), timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"['{job}:6']", proc.stdout
