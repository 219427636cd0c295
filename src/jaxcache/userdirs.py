"""Where jaxcache keeps a user's policy, default cache and run records.

These are the built-in defaults; a project file (jaxcache/project/, docs/config.md) may name
another cache directory or records folder, and a command's flag or JAX's variable another still.

On Linux these are the XDG base directories, computed here because importing platformdirs
costs more start-up time than `jaxcache run` may add to a job; other platforms ask
platformdirs. A relative XDG_* value is ignored, as the XDG spec requires.
"""

from __future__ import annotations

import os
import sys

_XDG = {"config": ("XDG_CONFIG_HOME", ".config"), "cache": ("XDG_CACHE_HOME", ".cache"),
        "state": ("XDG_STATE_HOME", os.path.join(".local", "state"))}


def user_dir(kind: str) -> str:
    """The per-user jaxcache directory of `kind`: "config", "cache" or "state"."""
    if not sys.platform.startswith("linux"):
        import platformdirs

        return getattr(platformdirs, f"user_{kind}_dir")("jaxcache")
    variable, fallback = _XDG[kind]
    base = os.environ.get(variable, "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), fallback)
    return os.path.join(base, "jaxcache")


def default_cache_dir() -> str:
    """The cache directory a plain `jaxcache init` makes: your cache dir's jaxcache/jax."""
    return os.path.join(user_dir("cache"), "jax")


def default_runs_dir() -> str:
    """Where `jaxcache run` writes its records unless told otherwise: the state dir's
    jaxcache/runs."""
    return os.path.join(user_dir("state"), "runs")


SYSTEM_POLICY = "/etc/jaxcache/policy.toml"  # a team's, kept by its admins


def policy_file() -> str:
    """The trust policy read when no --policy is given (trust/inputs/policy.py): the user's own
    (~/.config/jaxcache/policy.toml) where there is one, else the system-wide one an admin
    keeps in a protected location, SYSTEM_POLICY (the same checks: owned by you or root, no
    one else can change it or a parent)."""
    mine = os.path.join(user_dir("config"), "policy.toml")
    if not os.path.lexists(mine) and os.path.lexists(SYSTEM_POLICY):
        return SYSTEM_POLICY
    return mine
