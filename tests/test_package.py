"""What `pip install jaxcache` and the sdist really contain, built from this tree by setuptools.

The full path (wheel -> fresh venv with the jax extra -> `jaxcache demo`) takes minutes of
installing JAX: scripts/check-package.sh runs it in CI (.ci/run). Here, in seconds: the
wheel's files and metadata, the sdist's files, and the sdist's tests collecting.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from support import paths

ROOT = paths.CHECKOUT
LEFT_OUT = ("__pycache__", ".git", ".venv", ".venv-jax", "build", "dist", "*.egg-info",
            "demo-output", ".pytest_cache", ".ruff_cache", ".mypy_cache")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    pytest.importorskip("setuptools")
    tree = tmp_path_factory.mktemp("tree") / "jaxcache"
    shutil.copytree(ROOT, tree, symlinks=True, ignore=shutil.ignore_patterns(*LEFT_OUT))
    out = tree / "dist"
    names = []
    for hook in ("build_wheel", "build_sdist"):  # one process each, as a build frontend does
        code = ("import sys; from setuptools import build_meta as b; "
                f"print('@@', b.{hook}(sys.argv[1]))")
        done = subprocess.run([sys.executable, "-c", code, str(out)], cwd=tree,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "SetuptoolsDeprecationWarning" not in done.stderr, done.stderr[-3000:]
        names.append(done.stdout.split("@@ ")[-1].strip())
    wheel, sdist = names
    return out / wheel, out / sdist


def test_wheel_has_the_examples_types_and_license(built):
    wheel, _ = built
    names = set(zipfile.ZipFile(wheel).namelist())
    for member in ("jaxcache/py.typed", "jaxcache/examples/train.py", "jaxcache/examples/mlp.py",
                   "jaxcache/examples/many_small.py", "jaxcache-0.1.0.dist-info/licenses/LICENSE"):
        assert member in names, member
    meta = zipfile.ZipFile(wheel).read("jaxcache-0.1.0.dist-info/METADATA").decode()
    assert "License-Expression: Apache-2.0" in meta
    assert "Requires-Dist: platformdirs>=3; sys_platform != \"linux\"" in meta
    assert "rich" not in [line.split(":")[1].strip()[:4] for line in meta.splitlines()
                          if line.startswith("Requires-Dist:")]


def test_sdist_is_complete_and_its_tests_collect(built, tmp_path):
    _, sdist = built
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
        tar.extractall(tmp_path, filter="data")
    for member in ("LICENSE", "README.md", "Makefile", "constraints.txt", "tests/conftest.py",
                   "tests/programs/two_jits.py", "docs/reference/audit.md", "examples/train.py",
                   "scripts/system-deps.sh", "scripts/check-package.sh",
                   "src/jaxcache/examples/mlp.py", "src/jaxcache/py.typed"):
        assert member in names, member
    unpacked = tmp_path / sdist.name.removesuffix(".tar.gz")
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                           "-p", "no:cacheprovider"], cwd=unpacked, capture_output=True,
                          text=True, env={"PYTHONPATH": str(unpacked / "src"),
                                          "PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    collected = [line for line in done.stdout.splitlines() if "::" in line]
    assert len(collected) > 300 and all(line.startswith("tests/") for line in collected)
