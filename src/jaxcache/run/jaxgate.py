"""Which JAX a job will import, found before it starts, without importing JAX or running it.

`jaxcache run` sits on the job's start-up path: a second interpreter asked over a pipe would
cost tens of milliseconds, so we only read metadata on disk. The job's interpreter is a
virtual environment's whose site-packages holds a `jax-<version>.dist-info`. Anything else
(a shell script, a system or conda python, a launcher) is None: the version is then checked
after the job, from what the probe recorded.

Outside the jaxcompat package on purpose: importing anything in it imports the package
(dataclasses, inspect), ~35 ms on this project's machine, before the job could start.
"""

from __future__ import annotations

import glob
import os
import sys

VERSIONS_PY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "jaxcompat", "versions.py")


def jax_version_for(exe: str) -> str | None:
    """The JAX version the interpreter `exe` would import, when cheap to tell; else None."""
    try:
        base = os.path.dirname(os.path.dirname(os.path.abspath(exe)))  # symlinks kept: venvs
        if not os.path.isfile(os.path.join(base, "pyvenv.cfg")):
            return None  # not a venv: where it looks for packages is its own business
        found = glob.glob(os.path.join(glob.escape(base), "lib", "python3*", "site-packages",
                                       "jax-*.dist-info"))
    except OSError:
        return None
    if len(found) != 1:
        return None
    return os.path.basename(found[0])[len("jax-"):-len(".dist-info")]


def _versions():
    """jaxcompat/versions.py (stdlib only), by its path unless already imported."""
    loaded = sys.modules.get("jaxcache.jaxcompat.versions")
    if loaded is not None:
        return loaded
    import importlib.util

    spec = importlib.util.spec_from_file_location("_jaxcache_gate_versions", VERSIONS_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def refusal(exe: str) -> str | None:
    """One line saying why `jaxcache run` should not vouch for a record of this job (None:
    the job's JAX is supported, or cannot be told before it runs)."""
    version = jax_version_for(exe)
    return None if version is None else _versions().why_unverified(version)
