"""A second real account using jaxcache from an install root made (docs/reference/setup.md, "A
second account"): an editable install (a venv whose __editable__ .pth names a checkout), root-owned.
Readable, it works for the second account, which gets its own private cache under its own HOME
and writes nothing into the install; a folder or file of it the account cannot read is one line
naming the path and the way out, exit 2, never "internal error ... report it"."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from support import paths
from support.users import as_user_argv, isolation, needs_root, user_runtime

pytestmark = needs_root


@pytest.fixture(scope="module")
def install():
    """Root's editable install: a venv of a Python every account can reach, a checkout's src/
    named by its __editable__ .pth, the dependencies beside (support.users' runtime), in a
    folder every account can enter."""
    runtime = user_runtime()
    top = Path(tempfile.mkdtemp(prefix="jaxcache-root-install-"))
    try:
        yield _make(top, runtime)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _make(top: Path, runtime) -> Path:
    top.chmod(0o755)
    shutil.copytree(paths.SRC / "jaxcache", top / "checkout" / "src" / "jaxcache",
                    ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([runtime.python, "-m", "venv", "--without-pip", str(top / "venv")],
                   check=True)
    site = subprocess.run([str(top / "venv" / "bin" / "python"), "-c",
                           "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "__editable__.jaxcache-0.1.0.pth").write_text(f"{top / 'checkout' / 'src'}\n")
    Path(site, "dependencies.pth").write_text(f"{runtime.lib}\n")
    subprocess.run(["chmod", "-R", "u=rwX,go=rX", str(top)], check=True)
    return top


def as_second(user: str, home: Path, python: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(home),
           "JAX_PLATFORMS": "cpu", **isolation()}
    return subprocess.run([*as_user_argv(user), str(python), "-m", "jaxcache", *args], env=env,
                          cwd=str(home), capture_output=True, text=True, timeout=300)


@pytest.fixture
def home(accounts, base):
    path = base / "home"
    path.mkdir(mode=0o700)
    shutil.chown(path, accounts.c)
    return path


def _owned_by(top: Path, uid: int) -> list[str]:
    return [os.path.join(d, n) for d, dirs, files in os.walk(top) for n in dirs + files
            if os.lstat(os.path.join(d, n)).st_uid == uid]


def test_a_second_account_uses_roots_install_with_its_own_cache(accounts, install, home):
    import pwd

    proc = as_second(accounts.c, home, install / "venv" / "bin" / "python", "init")
    assert proc.returncode == 0, proc.stderr
    mine = home / ".cache" / "jaxcache" / "jax"
    assert proc.stdout.startswith(f"created {mine} (mode 0700, verdict PRIVATE)\n"), proc.stdout
    uid = pwd.getpwnam(accounts.c).pw_uid
    assert mine.stat().st_uid == uid
    assert _owned_by(install, uid) == []  # nothing written into the install (__pycache__ too)


@pytest.mark.parametrize("blocked", ["trust/rules", "trust/findings.py"])
def test_a_part_of_the_install_it_cannot_read_is_one_line_naming_it(accounts, install, home,
                                                                     blocked):
    where = install / "checkout" / "src" / "jaxcache" / blocked
    mode = where.stat().st_mode & 0o777
    where.chmod(0o700 if where.is_dir() else 0o600)  # a checkout pulled with umask 077
    try:
        proc = as_second(accounts.c, home, install / "venv" / "bin" / "python", "audit",
                         str(home))
    finally:
        where.chmod(mode)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0] == (f"jaxcache: part of this install of jaxcache is not readable by you: "
                        f"{where} (owner root, mode {0o700 if where.is_dir() else 0o600:04o}); "
                        "install jaxcache for yourself (docs/reference/setup.md, "
                        "\"A second account\"), "
                        "or ask its owner to make it readable (chmod -R go+rX)")
    assert proc.stdout == ""


def test_the_page_says_what_the_test_sees():
    page = (paths.CHECKOUT / "docs" / "reference" / "setup.md").read_text()
    assert "## A second account" in page
    assert ("jaxcache: part of this install of jaxcache is not readable by you: PATH (owner "
            "root, mode 0700); install jaxcache for yourself (docs/reference/setup.md, \"A second "
            "account\"), or ask its owner to make it readable (chmod -R go+rX)") in page
