"""The fixtures: real users, groups, directories and a Slurm cluster, created here and removed
after. What tests call directly (jobs, users, paths, emulators) is in tests/support/."""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from support.jobs import CI_VARIABLES
from support.users import IS_ROOT, Accounts, run_checked

# Under CI jaxcache refuses caches of unknown origin (trust/rules/ci.py); the suite may itself run
# under CI, and its tests say when they want a CI environment: none is inherited.
for _variable in CI_VARIABLES:
    os.environ.pop(_variable, None)
# Run records and bench results are kept in the state directory (decide reads the last bench):
# the suite keeps its own, never the user's, and removes it at exit.
if "JAXCACHE_TEST_STATE" not in os.environ:
    os.environ["JAXCACHE_TEST_STATE"] = os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(
        prefix="jaxcache-test-state-")
    atexit.register(shutil.rmtree, os.environ["XDG_STATE_HOME"], True)
    # as someone who has run jaxcache on this install before: the build's digests are kept
    # (fingerprint/memo.py), so no job under test starts with the one-time "hashing" line
    # (tests/fingerprint/ say it with state folders of their own)
    from jaxcache import fingerprint

    fingerprint.current()


@pytest.fixture(scope="session")
def accounts():
    if not IS_ROOT:
        pytest.skip("needs root to create users and groups")
    if not all(os.access(f, os.W_OK) for f in ("/etc/passwd", "/etc/group")):
        pytest.skip("the account database is read-only here (the matrix's Debian root is "
                    "mounted read-only): no users can be made")
    tag = secrets.token_hex(3)
    acc = Accounts(f"jxg{tag}", f"jxa{tag}", f"jxb{tag}", f"jxc{tag}")
    run_checked("groupadd", acc.group)
    made = []
    try:
        for name, extra in ((acc.a, ["-G", acc.group]), (acc.b, ["-N", "-g", acc.group]),
                            (acc.c, [])):
            run_checked("useradd", "-M", "-d", "/nonexistent", "-s", "/usr/sbin/nologin",
                        *extra, name)
            made.append(name)
        yield acc
    finally:
        for name in made:
            subprocess.run(["userdel", name], capture_output=True)
        subprocess.run(["groupdel", acc.group], capture_output=True)


@pytest.fixture
def base():
    """A fresh directory under /tmp, root-owned 0755, so other users can reach inside it."""
    path = Path(tempfile.mkdtemp(prefix="jaxcache-test-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        subprocess.run(["chattr", "-R", "-i", str(path)], capture_output=True)
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def slurm():
    """A real single-node Slurm cluster (tests/support/slurm_cluster.py), up for the whole
    session."""
    if not IS_ROOT:
        pytest.skip("needs root to run slurmctld, slurmd and munged")
    from support.slurm_cluster import SlurmCluster, missing

    if missing():
        pytest.skip(f"not installed: {', '.join(missing())} (make test installs them as root)")
    cluster = SlurmCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
