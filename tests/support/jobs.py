"""jaxcache run as a user would run it: in a subprocess, with a clean environment, and the
audit's JSON read back."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from support.users import ISOLATION, as_user_argv, user_runtime

# The variables by which jaxcache knows it runs under CI (trust/rules/ci.py): conftest.py clears
# them, so a test says when it wants a CI environment.
CI_VARIABLES = ("GITHUB_ACTIONS", "GITLAB_CI", "BUILDKITE", "CIRCLECI", "JENKINS_URL", "TF_BUILD",
                "CODEBUILD_BUILD_ID", "TEAMCITY_VERSION", "BITBUCKET_BUILD_NUMBER", "CI")


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


def environ_without(*prefixes: str) -> dict[str, str]:
    """This environment without the variables that start with `prefixes` (an outer run's must
    not leak into a job under test), but for isolation()'s."""
    return {k: v for k, v in os.environ.items() if k in ISOLATION or not k.startswith(prefixes)}


def no_state(tmp_path) -> dict:
    """This environment with a state directory of its own, empty: no run record or bench
    result kept by an earlier test (decide reads the last bench kept there)."""
    return {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}


def clean_env(**extra: str) -> dict:
    """This environment without JAX, jaxcache or XLA variables (an outer run's must not leak
    into a job under test), on the CPU, plus `extra`."""
    return {**environ_without("JAX_", "JAXCACHE_", "XLA_"), "JAX_PLATFORMS": "cpu", **extra}


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




def forked_exit_code(pid: int, timeout_s: float = 60.0) -> int | None:
    """The exit code of a forked child, waited for at most `timeout_s` (then killed: None),
    so that a child that hangs fails its test instead of holding the suite."""
    import time

    deadline = time.monotonic() + timeout_s
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0:
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.01)
    return os.waitstatus_to_exitcode(done[1])
