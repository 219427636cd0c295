"""A team share: a directory a second user (teamb, accounts.b) owns and fills with a watched
`jaxcache run`, its origin ledger in teamb's own home (tests/trust/conftest.py's `team`
fixture makes it once per session; tests/trust/test_trusted_ledgers*.py judge it as you)."""

from __future__ import annotations

import pwd
import shutil
import subprocess
import sysconfig
from pathlib import Path

from support import paths
from support.jobs import JOB_TIMEOUT_S, clean_env
from support.ledgers import EVERY_COMPILE, TWO_JITS_JOB
from support.users import as_user_argv, isolation, mkdir


def as_user(user: str, state: Path, *argv: str) -> subprocess.CompletedProcess:
    """`argv` run by the system python as `user`, with this checkout's JAX and jaxcache."""
    site = sysconfig.get_paths()["purelib"]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(state), "XDG_STATE_HOME": str(state),
           "JAX_PLATFORMS": "cpu", "LANG": "C.UTF-8", "NO_COLOR": "1",
           "PYTHONPATH": f"{site}:{paths.CHECKOUT / 'src'}", **EVERY_COMPILE, **isolation()}
    return subprocess.run([*as_user_argv(user), "/usr/bin/python3", *argv], env=env,
                          capture_output=True, text=True, cwd="/", timeout=JOB_TIMEOUT_S)


def watched_share(owner: str, top: Path) -> tuple[Path, Path, Path]:
    """`owner` fills a share of theirs (`top`/shared, 0755) with a watched `jaxcache run` of
    the two-jit job, its state in a home of its own (`top`/teamb): (home, share, job file).
    The run's result is asserted; its ledger is home/jaxcache/origin.ledger."""
    home = mkdir(top / "teamb", 0o755, owner)
    share = mkdir(top / "shared", 0o755, owner)
    job = top / "job.py"
    job.write_text(TWO_JITS_JOB)
    job.chmod(0o644)
    ran = as_user(owner, home, "-m", "jaxcache", "run", "-q", "--allow-untrusted",
                  "--cache-dir", str(share), "--", "/usr/bin/python3", str(job))
    assert ran.returncode == 0, ran.stderr
    return home, share, job


def uid(name: str) -> int:
    return pwd.getpwnam(name).pw_uid


def policy(team: dict, writer: str, name: str, extra: str = "", path: Path | None = None
           ) -> str:
    """A policy of yours trusting `writer` to write the share (or `path`), plus `extra`."""
    out = team["top"] / f"{name}.toml"
    out.write_text(f'[[cache]]\npath = "{path or team["shared"]}"\n'
                   f'trusted_users = ["{writer}"]\n' + extra)
    out.chmod(0o600)
    return str(out)


def env(team: dict, **extra: str) -> dict:
    """Your environment: an empty state directory of your own (no ledger), every compile
    written."""
    return clean_env(XDG_STATE_HOME=str(team["state"]), NO_COLOR="1", **EVERY_COMPILE, **extra)


def copy_share(team: dict, name: str) -> Path:
    """A copy of the share with the same owner and bytes (the same ledger lines vouch for its
    entries: a line binds name and digest), for a test that changes what it holds."""
    out = team["top"] / name
    shutil.copytree(team["shared"], out, copy_function=shutil.copy2)
    for p in (out, *out.iterdir()):
        shutil.chown(p, team["owner"])
    return out


def entries(share: Path) -> dict[str, Path]:
    """The share's compiled entries by module (jit_f, jit_h)."""
    return {p.name.split("-", 1)[0]: p for p in share.iterdir() if p.name.endswith("-cache")}



