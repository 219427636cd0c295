"""A second build of the same jaxlib version: what JAX's cache key cannot tell apart (issue 40).

`other_build(root)` lays out a folder that shadows the installed jaxlib when put first on
PYTHONPATH: every file a symbolic link to the real package's (not a hard link: a new link
changes the real file's ctime, part of its identity in the digest memo, so every jaxcache
process of the session would hash the build again and say so on stderr), but its main shared
object (the largest .so: libjax_common.so on 0.10, the
xla_extension on older lines) is a copy with bytes appended. It still loads, its version
string is the same, and its BLAKE3 digest differs: build B. The dist-info folder comes too,
so `importlib.metadata` says the same version. A process with PYTHONPATH=<folder> (jaxcache's
wrapper and the job alike) runs build B; without it, build A (the venv's own).
"""

from __future__ import annotations

import os
import shutil
from importlib import metadata
from pathlib import Path

APPENDED = b"\0jaxcache test: another build of the same jaxlib version\0" * 64


def _jaxlib_folder() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("jaxlib")
    assert spec is not None and spec.submodule_search_locations, "no jaxlib installed"
    return Path(list(spec.submodule_search_locations)[0]).resolve()


def _link_tree(src: Path, dst: Path, skip: Path | None = None) -> None:
    for folder, _dirs, files in os.walk(src):
        rel = Path(folder).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for name in files:
            here = Path(folder) / name
            if skip is not None and here == skip:
                continue
            os.symlink(here, dst / rel / name)


def main_object(folder: Path) -> Path:
    """The package's largest shared object: the one XLA's code lives in."""
    objects = [p for p in folder.rglob("*.so*") if p.is_file()]
    return max(objects, key=lambda p: p.stat().st_size)


def other_build(root: Path) -> Path:
    """A folder for PYTHONPATH holding build B of the installed jaxlib (see the module)."""
    real = _jaxlib_folder()
    site = root / "build-b"
    target = site / "jaxlib"
    biggest = main_object(real)
    _link_tree(real, target, skip=biggest)
    copy = target / biggest.relative_to(real)
    shutil.copyfile(biggest, copy)
    os.chmod(copy, biggest.stat().st_mode & 0o777)
    with open(copy, "ab") as f:
        f.write(APPENDED)
    dist = metadata.distribution("jaxlib")
    info = Path(str(dist.locate_file(""))) / f"jaxlib-{dist.version}.dist-info"
    if info.is_dir():
        _link_tree(info, site / info.name)
    return site


def build_env(site: Path | None, env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's) running build B when `site` is given, else build A."""
    out = dict(os.environ if env is None else env)
    out.pop("PYTHONPATH", None)
    if site is not None:
        out["PYTHONPATH"] = str(site)
    return out


def build_tier(local: Path) -> Path:
    """The one build folder a sealed job's private tier holds (`<local>/<fingerprint id>`,
    lifecycle/local_tier.py build_tier): every job of a test runs the same build."""
    (folder,) = [p for p in local.iterdir()]
    assert len(folder.name) == 16 and set(folder.name) <= set("0123456789abcdef"), folder
    return folder
