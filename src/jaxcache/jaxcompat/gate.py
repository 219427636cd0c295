"""Which JAX a job will import, found before it starts, without importing JAX or running it.

`jaxcache run` sits on the job's start-up path: a second interpreter asked over a pipe would
cost tens of milliseconds, so we only read metadata on disk. The job's interpreter is a
virtual environment's whose site-packages holds a `jax-<version>.dist-info`. Anything else
(a shell script, a system or conda python, a launcher) is None: the version is then checked
after the job, from what the probe recorded.

Imports only versions.py (stdlib only) of jaxcompat: the package's other modules load when
their names are first used, so nothing heavy runs before the job starts.
"""

from __future__ import annotations

import os

# the probe copies it into the job (probe/launch.py): the job's Python may not see jaxcache
VERSIONS_PY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "versions.py")


def jax_version_for(exe: str) -> str | None:
    """The JAX version the interpreter `exe` would import, when cheap to tell; else None."""
    try:
        base = os.path.dirname(os.path.dirname(os.path.abspath(exe)))  # symlinks kept: venvs
        if not os.path.isfile(os.path.join(base, "pyvenv.cfg")):
            return None  # not a venv: where it looks for packages is its own business
        found = [jax for lib in _named(os.path.join(base, "lib"), "python3", "", dirs=True)
                 for jax in _named(os.path.join(lib, "site-packages"), "jax-", ".dist-info")]
    except OSError:
        return None
    if len(found) != 1:
        return None
    return os.path.basename(found[0])[len("jax-"):-len(".dist-info")]


def _named(directory: str, prefix: str, suffix: str, dirs: bool = False) -> list[str]:
    """What glob's `directory/prefix*suffix` finds (only directories with `dirs`), without
    glob: its import and the patterns it compiles cost ~1.5 ms of every job's start."""
    try:
        with os.scandir(directory) as entries:
            return [e.path for e in entries
                    if e.name.startswith(prefix) and e.name.endswith(suffix)
                    and len(e.name) >= len(prefix) + len(suffix)
                    and (not dirs or e.is_dir())]
    except (FileNotFoundError, NotADirectoryError):
        return []


def refusal(exe: str) -> str | None:
    """One line saying why `jaxcache run` should not vouch for a record of this job (None:
    the job's JAX is supported, or cannot be told before it runs)."""
    from jaxcache.jaxcompat.versions import why_unverified

    version = jax_version_for(exe)
    return None if version is None else why_unverified(version)
