"""Real users and groups, their directories, and what another user can run of ours."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.paths import PROGRAMS

IS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not IS_ROOT, reason="needs root to create users, groups and mounts")
needs_setfacl = pytest.mark.skipif(shutil.which("setfacl") is None,
                                   reason="setfacl not installed (make test installs acl as root)")


# set by conftest.py to keep jaxcache off the machine's own files (its system policy): an
# environment built from nothing or stripped of jaxcache's variables passes them on
ISOLATION = ("JAXCACHE_SYSTEM_POLICY",)


def isolation() -> dict[str, str]:
    """The variables that keep jaxcache off the machine's own files (conftest.py), for an
    environment built from nothing."""
    return {k: os.environ[k] for k in ISOLATION if k in os.environ}


@dataclass(frozen=True)
class Accounts:
    group: str  # members: a (supplementary), b (primary group)
    a: str
    b: str
    c: str  # not in the group


def run_checked(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


def mkdir(path: Path, mode: int, owner: str | None = None, group: str | None = None) -> Path:
    path.mkdir()
    if owner or group:
        shutil.chown(path, owner, group)
    path.chmod(mode)
    return path


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
                "XDG_STATE_HOME": "/nonexistent/.state", "JAX_PLATFORMS": "cpu", **isolation(),
                **extra}


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
    shutil.copytree(PROGRAMS, programs,
                    ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["chmod", "-R", "u=rwX,go=rX", str(top)], check=True)
    _runtime.append(UserRuntime(python, lib, programs))
    return _runtime[0]


def as_user_argv(user: str) -> list[str]:
    """setpriv prefix that becomes `user` with its primary and supplementary groups."""
    import pwd

    gid = pwd.getpwnam(user).pw_gid
    return ["setpriv", f"--reuid={user}", f"--regid={gid}", "--init-groups"]




class PeerProcess:
    """Another user's process, driven a line at a time: it says `ready` once set up and a word
    after each command; any other line kills it and fails the test with its stderr. `what`
    names it in that failure (an attacker's handle holder, a smuggler...)."""

    what = "peer"

    def __init__(self, user: str, *argv: str) -> None:
        self.proc = subprocess.Popen([*as_user_argv(user), *argv], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.expect("ready")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def expect(self, word: str) -> None:
        line = self.proc.stdout.readline().strip()  # blocks until the process has done it
        if line != word:
            self.proc.kill()
            raise AssertionError(f"{self.what} said {line!r}: {self.proc.stderr.read()[-2000:]}")

    def say(self, line: str, done: str = "done") -> None:
        """One command, done before this returns."""
        self.proc.stdin.write(f"{line}\n")
        self.proc.stdin.flush()
        self.expect(done)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def started(cls):
    """For a fixture (`yield from started(Holder)`): start `cls(*args)` as the test asks, and
    close each one after it."""
    made: list[PeerProcess] = []

    def start(*args, **kw):
        p = cls(*args, **kw)
        made.append(p)
        return p

    yield start
    for p in made:
        p.close()
