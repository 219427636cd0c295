"""The project file: `[tool.jaxcache]` in pyproject.toml, or `.jaxcache.toml` beside it.

A project's defaults for every command and for enable(): the cache directory, JAX's write
thresholds, the records folder, bench's trials. Found by walking up from the working directory
to the nearest folder holding either file (locate.py: read through a descriptor, no link
followed, bounded, owned by you or root), parsed once into a typed model (project_toml.py),
and weighed against flags and JAX's variables in one place (chosen.py), which also says where
each setting came from (`jaxcache config`). Trust settings are never read from it: they are
the protected policy's (trust/inputs/policy.py), and a project file naming one is refused.

Nothing is imported and nothing parsed when no file is found: `jaxcache run` pays a few
`open` calls that fail.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.project.project_toml import ProjectConfig

_LOADED: dict[str, ProjectConfig] = {}  # per working directory: read once a process


def current() -> ProjectConfig:
    """The project file's settings as seen from the working directory (an empty ProjectConfig
    when there is none), read once per directory; JaxcacheError (one line) when the file is
    refused."""
    try:
        start = os.getcwd()
    except OSError:  # the working directory was removed: no project above it
        start = ""
    known = _LOADED.get(start)
    if known is None:
        from jaxcache.project import locate, project_toml

        found = locate.find(start) if start else None
        known = _LOADED[start] = project_toml.parse(found, start)
    return known
