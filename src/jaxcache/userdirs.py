"""Where jaxcache keeps a user's policy, default cache and run records.

These are the built-in defaults; a project file (jaxcache/project/, docs/reference/project-file.md)
may name another cache directory or records folder, and a command's flag or JAX's variable another
still.

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
SYSTEM_POLICY_VARIABLE = "JAXCACHE_SYSTEM_POLICY"


def system_policy() -> str:
    """Where the team's policy is: SYSTEM_POLICY, or the absolute path $JAXCACHE_SYSTEM_POLICY
    names (an image or a module system that keeps it elsewhere; a test suite that must not read
    the machine's). Choosing it grants nothing a policy file of your own could not: yours, where
    there is one, is read instead, and either is read under the same checks."""
    named = os.environ.get(SYSTEM_POLICY_VARIABLE, "")
    if named and not os.path.isabs(named):  # never a file found from wherever the job started
        raise ValueError(f"{SYSTEM_POLICY_VARIABLE} must be an absolute path")
    return named or SYSTEM_POLICY


def policy_file() -> str:
    """The trust policy read when no --policy is given (trust/inputs/policy.py): the user's own
    (~/.config/jaxcache/policy.toml) where there is one, else the system-wide one an admin
    keeps in a protected location, system_policy() (the same checks: owned by you or root, no
    one else can change it or a parent)."""
    mine = os.path.join(user_dir("config"), "policy.toml")
    team = system_policy()
    if not os.path.lexists(mine) and os.path.lexists(team):
        return team
    return mine
