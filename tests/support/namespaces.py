"""Steps run in a private mount namespace (tests/programs/in_namespace.py, as root): mounts
made there vanish with it. A kernel that refuses the mount skips the test, saying why."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.paths import PROGRAMS


def run_steps(steps: list[dict], tmp: Path) -> list[dict]:
    """Each step's result (in_namespace.py's JSON), in order."""
    plan = tmp / "steps.json"
    plan.write_text(json.dumps(steps))
    proc = subprocess.run(["unshare", "-m", "--propagation", "private", "--", sys.executable,
                           str(PROGRAMS / "in_namespace.py"), str(plan)], capture_output=True,
                          text=True, timeout=600)
    if proc.returncode and "mount failed" in proc.stderr:
        pytest.skip(f"the kernel refused a mount: {proc.stderr.strip()[-300:]}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
