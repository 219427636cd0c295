"""What a user does first, on the interpreter this suite runs on: audit a private cache, run a
job on it twice (the second loads what the first wrote), and a sealed publisher's run then a
reader's that loads what it signed. `make test` runs this file on the lowest Python the package
declares; `make matrix` runs it again on the newest JAX line, inside a Debian 13 root, on the
highest (scripts/matrix-line.sh). A Python outside the declared range is the version gate's
(tests/run/test_grant_lease.py: one line, no cache)."""

from __future__ import annotations

import json
import os
import sys
import tomllib

from support import paths
from support.jobs import clean_env, jaxcache

JOB = ("import jax, jax.numpy as jnp\n"
       "print(float(jax.jit(lambda x: (x * 3.0 - 1.0).sum())(jnp.arange(32.0))))\n")


def _declared() -> tuple[int, int]:
    text = (paths.CHECKOUT / "pyproject.toml").read_text()
    spec = tomllib.loads(text)["project"]["requires-python"]
    assert spec.startswith(">="), spec
    major, minor = spec[2:].strip().split(".")[:2]
    return int(major), int(minor)


def _env(tmp_path) -> dict:
    config = tmp_path / "config"
    config.mkdir(mode=0o700, exist_ok=True)
    return clean_env(XDG_STATE_HOME=str(tmp_path / "state"), XDG_CONFIG_HOME=str(config),
                     HOME=str(tmp_path), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                     JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")


def _outcomes(record) -> list[str]:
    return [m.get("outcome") for m in json.loads(record.read_text())["modules"]]


def test_this_interpreter_is_one_the_package_declares():
    assert sys.version_info[:2] >= _declared()


def test_audit_run_and_a_sealed_run_work_here(tmp_path):
    env = _env(tmp_path)
    job = tmp_path / "job.py"
    job.write_text(JOB)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    audited = jaxcache("audit", "--format", "json", str(cache), env=env)
    assert audited.returncode == 0, audited.stderr
    assert json.loads(audited.stdout)["verdict"] == "PRIVATE"

    for n, expected in ((1, "written"), (2, "hit")):
        record = tmp_path / f"plain{n}.json"
        ran = jaxcache("run", "-q", "--cache-dir", str(cache), "--record", str(record), "--",
                       sys.executable, str(job), env=env)
        assert ran.returncode == 0, ran.stderr
        assert expected in _outcomes(record), (n, _outcomes(record))

    key = tmp_path / "signing.key"
    made = jaxcache("keygen", str(key), env=env)
    assert made.returncode == 0, made.stderr
    sealed = tmp_path / "sealed"
    for who, flags, expected in (("publisher", ["--signing-key", str(key)], "written"),
                                 ("reader", ["--trusted-key", f"{key}.pub"], "hit")):
        record = tmp_path / f"{who}.json"
        ran = jaxcache("run", "-q", "--sealed", "--cache-dir", str(sealed), *flags,
                       "--record", str(record), "--", sys.executable, str(job), env=env)
        assert ran.returncode == 0, (who, ran.stderr)
        assert expected in _outcomes(record), (who, _outcomes(record))
    assert oct(os.stat(sealed).st_mode & 0o777) == oct(0o700)
