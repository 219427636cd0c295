"""Real users, groups, directories and processes for the tests; created here, removed after."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

# Under CI jaxcache refuses caches of unknown origin (trust/ci.py); the suite may itself run
# under CI, and its tests say when they want a CI environment: none is inherited.
CI_VARIABLES = ("GITHUB_ACTIONS", "GITLAB_CI", "BUILDKITE", "CIRCLECI", "JENKINS_URL", "TF_BUILD",
                "CODEBUILD_BUILD_ID", "TEAMCITY_VERSION", "BITBUCKET_BUILD_NUMBER", "CI")
for _variable in CI_VARIABLES:
    os.environ.pop(_variable, None)

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="needs root to create users, groups and mounts")


def _jaxlib() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("jaxlib")
    except metadata.PackageNotFoundError:
        return None


# jaxlib 0.9.2: a forked child that used JAX can deadlock at interpreter exit (its CPU client's
# thread pool), with or without jaxcache. Tests that fork after JAX skip there, visibly.
fork_after_jax = pytest.mark.skipif(
    _jaxlib() == "0.9.2", reason="jaxlib 0.9.2 deadlocks a forked child at exit (FACTS §10)")
JOB_TIMEOUT_S = 900  # no test may hang CI: a stuck job fails its test instead
needs_setfacl = pytest.mark.skipif(shutil.which("setfacl") is None,
                                   reason="setfacl not installed (make test installs acl as root)")


@dataclass(frozen=True)
class Accounts:
    group: str  # members: a (supplementary), b (primary group)
    a: str
    b: str
    c: str  # not in the group


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


@pytest.fixture(scope="session")
def accounts():
    if not ROOT:
        pytest.skip("needs root to create users and groups")
    tag = secrets.token_hex(3)
    acc = Accounts(f"jxg{tag}", f"jxa{tag}", f"jxb{tag}", f"jxc{tag}")
    _run("groupadd", acc.group)
    made = []
    try:
        for name, extra in ((acc.a, ["-G", acc.group]), (acc.b, ["-N", "-g", acc.group]),
                            (acc.c, [])):
            _run("useradd", "-M", "-d", "/nonexistent", "-s", "/usr/sbin/nologin", *extra, name)
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


def mkdir(path: Path, mode: int, owner: str | None = None, group: str | None = None) -> Path:
    path.mkdir()
    if owner or group:
        shutil.chown(path, owner, group)
    path.chmod(mode)
    return path


def jaxcache(*args: str, user: str | None = None, env: dict | None = None,
             python: str | None = None, cwd: str | None = None) -> subprocess.CompletedProcess:
    """jaxcache in a subprocess; as `user`, from the runtime that user can reach."""
    if user is not None and python is None:
        runtime = user_runtime()
        python = runtime.python
        env = {**(env if env is not None else os.environ), **runtime.env()}
    argv = [python or sys.executable, "-m", "jaxcache", *args]
    if user is not None:
        argv = [*as_user_argv(user), *argv]
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd,
                          errors="surrogateescape", timeout=JOB_TIMEOUT_S)


def clean_env(**extra: str) -> dict:
    """This environment without JAX, jaxcache or XLA variables (an outer run's must not leak
    into a job under test), on the CPU, plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JAX_", "JAXCACHE_", "XLA_"))}
    return {**env, "JAX_PLATFORMS": "cpu", **extra}


@dataclass(frozen=True)
class UserRuntime:
    """What another user can execute of ours. The checkout may sit where only root can enter
    (a clone in a 0700 `mktemp -d`), so jaxcache, its pure-Python dependency and the test
    programs are copied under a 0755 directory and run by the system interpreter."""

    python: str
    lib: Path
    programs: Path

    def program(self, name: str) -> str:
        return str(self.programs / name)

    def env(self, **extra: str) -> dict[str, str]:
        return {"PYTHONPATH": str(self.lib), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
                "HOME": "/nonexistent", "XDG_CONFIG_HOME": "/nonexistent/.config",
                "XDG_STATE_HOME": "/nonexistent/.state", "JAX_PLATFORMS": "cpu", **extra}


_runtime: list[UserRuntime] = []
# jaxcache and what it imports (not JAX: tests that need JAX as another user bring it)
_RUNTIME_MODULES = ("jaxcache", "psutil", "cryptography", "cffi", "_cffi_backend", "pycparser",
                    "blake3")


def _system_python() -> str | None:
    """An interpreter any user can reach: every directory above it searchable by others."""
    for candidate in ("/usr/bin/python3", os.path.realpath(sys.executable)):
        path = Path(os.path.realpath(candidate))
        if path.is_file() and all(p.stat().st_mode & 0o001 for p in [path, *path.parents]):
            return str(path)
    return None


def user_runtime() -> UserRuntime:
    """The runtime, made once per test session and removed at exit."""
    if _runtime:
        return _runtime[0]
    import atexit
    import importlib.util

    python = _system_python()
    if python is None:
        pytest.skip("no Python interpreter that other users can reach on this machine")
    top = Path(tempfile.mkdtemp(prefix="jaxcache-runtime-"))
    atexit.register(shutil.rmtree, top, True)
    lib, programs = top / "lib", top / "programs"
    lib.mkdir(parents=True)
    for name in _RUNTIME_MODULES:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue  # an optional dependency not installed here
        if spec.submodule_search_locations:
            shutil.copytree(Path(spec.origin).parent, lib / name,
                            ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(spec.origin, lib)
    shutil.copytree(Path(__file__).parent / "programs", programs,
                    ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["chmod", "-R", "u=rwX,go=rX", str(top)], check=True)
    _runtime.append(UserRuntime(python, lib, programs))
    return _runtime[0]


def as_user_argv(user: str) -> list[str]:
    """setpriv prefix that becomes `user` with its primary and supplementary groups."""
    import pwd

    gid = pwd.getpwnam(user).pw_gid
    return ["setpriv", f"--reuid={user}", f"--regid={gid}", "--init-groups"]


def audit_json(path, *args: str, **kw) -> tuple[int, dict]:
    proc = jaxcache("audit", "--format", "json", *args, os.fspath(path), **kw)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def untrusted(doc: dict) -> set[str]:
    return set(doc["untrusted_writers"])


def writers(doc: dict) -> set[str]:
    return {w["principal"] for w in doc["writers"]}


def codes(doc: dict) -> set[str]:
    return {f["code"] for f in doc["findings"]}


@pytest.fixture(scope="session")
def slurm():
    """A real single-node Slurm cluster (tests/slurm_cluster.py), up for the whole session."""
    if not ROOT:
        pytest.skip("needs root to run slurmctld, slurmd and munged")
    from slurm_cluster import SlurmCluster, missing

    if missing():
        pytest.skip(f"not installed: {', '.join(missing())} (make test installs them as root)")
    cluster = SlurmCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
