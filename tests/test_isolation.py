"""The suite runs off the machine's own files. jaxcache reads a team's system policy
(/etc/jaxcache/policy.toml) when a user has none of their own; the suite points it elsewhere
(conftest.py sets JAXCACHE_SYSTEM_POLICY, and support/jobs.py's isolation() and
environ_without() pass it on to environments built from nothing or stripped of jaxcache's
variables), so a machine with a system policy installed stays green. Proved here with a
hostile one, installed in an overlay of /etc inside a private mount namespace (/etc itself is
never touched), under which tests that build their own environments run."""

from __future__ import annotations

import sys

from attacks.storage import in_namespace, needs_ns
from support import paths
from support.users import mkdir, needs_root

pytestmark = [needs_root, needs_ns]

HOSTILE = "this is not = [a policy\n"  # every command that reads it stops with one line
# tests whose jobs get an environment built from nothing, or stripped of jaxcache's variables
UNDER_IT = ("tests/run/test_run_path_imports.py", "tests/probe/test_beside_the_job.py",
            "tests/cli/test_flags.py")


def test_tests_stay_green_with_a_hostile_system_policy_installed(tmp_path):
    upper = mkdir(tmp_path / "upper", 0o755)
    mkdir(upper / "jaxcache", 0o755)
    (upper / "jaxcache" / "policy.toml").write_text(HOSTILE)
    (upper / "jaxcache" / "policy.toml").chmod(0o644)
    work = mkdir(tmp_path / "work", 0o755)
    cache = mkdir(tmp_path / "cache", 0o700)
    audit = [sys.executable, "-m", "jaxcache", "audit", "-q", "--no-processes", str(cache)]
    results = in_namespace([
        {"mount": ["mount", "-t", "overlay", "overlay", "-o",
                   f"lowerdir=/etc,upperdir={upper},workdir={work}", "/etc"]},
        {"run": audit, "env": {"JAXCACHE_SYSTEM_POLICY": ""}},  # as anyone on this machine
        {"run": audit},  # as the suite
        {"run": [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                 "--rootdir", str(paths.CHECKOUT),
                 *(str(paths.CHECKOUT / t) for t in UNDER_IT)]},
    ], tmp_path)
    anyone, suite, tests = [r for r in results if "rc" in r]
    assert anyone["rc"] == 2 and "/etc/jaxcache/policy.toml" in anyone["stderr"], anyone
    assert suite["rc"] == 0, suite["stderr"]
    assert tests["rc"] == 0, tests["stdout"][-3000:] + tests["stderr"][-2000:]
