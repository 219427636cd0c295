"""The job-environment protocol has one home, jaxcache/jobenv.py.

The probe (probe/site.py, probe/document.py, probe/recorder.py) runs in the job's own Python,
loaded by path, and may not be able to import jaxcache: it spells the variable names itself.
Each name it spells must be one jobenv.py defines, and no other module spells one: a name
changed in one place and not the other would leave the probe reading nothing. Parsed with ast.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from support import paths

from jaxcache import jobenv

SRC = paths.CHECKOUT / "src" / "jaxcache"
NAME = re.compile(r"JAXCACHE_[A-Z_]+")
PROBE_SIDE = {"probe/site.py", "probe/document.py", "probe/recorder.py", "probe/logtap.py"}
# set by a person, not handed between jaxcache and the probe: the CLI's switch for a traceback,
# the object stores' base deadline (seal/objects/resilient.py reads it where it applies), and
# where the team's policy is (userdirs.py)
NOT_PROTOCOL = {"JAXCACHE_DEBUG", "JAXCACHE_BUCKET_DEADLINE_S", "JAXCACHE_SYSTEM_POLICY"}


def _spelled(path: Path) -> set[str]:
    """The JAXCACHE_ names a module writes as whole string constants (not in prose)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and NAME.fullmatch(node.value)}


def test_the_probe_spells_only_names_the_protocol_defines():
    seen: set[str] = set()
    for rel in sorted(PROBE_SIDE):
        names = _spelled(SRC / rel)
        assert names <= jobenv.ALL, f"{rel} reads {sorted(names - jobenv.ALL)}, not in jobenv"
        seen |= names
    # the probe reads (nearly) the whole protocol: a checker that found nothing proves nothing
    assert {jobenv.PROBE_DIR, jobenv.LEASE, jobenv.AUDITED, jobenv.SEAL, jobenv.LIB} <= seen


def test_no_other_module_spells_a_protocol_name():
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel == "jobenv.py" or rel in PROBE_SIDE:
            continue
        names = _spelled(path) - NOT_PROTOCOL
        if names:
            found[rel] = sorted(names)
    assert not found, f"use jaxcache.jobenv's names instead of literals: {found}"


def test_the_groups_hold_only_protocol_names():
    assert set(jobenv.PER_RUN) <= jobenv.ALL
    assert all(NAME.fullmatch(n) for n in jobenv.ALL)
