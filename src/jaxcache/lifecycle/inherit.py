"""The environment a job's children inherit must agree with the cache enable() audited.

JAX reads JAX_COMPILATION_CACHE_DIR once, at `import jax`, in every process: a child started
after enable() uses whatever the variable says, not what this process was switched to. So
enable() sets the variable to the audited directory (or, for a sealed cache, removes it: a
child without the sealed backend must not read the shared directory plainly). XLA_FLAGS can
point XLA's own caches (GPU autotune results, compiled kernels) at any other place, for this
process and its children: enable() refuses that, naming the variable, unless it points inside
the audited directory.
"""

from __future__ import annotations

import os
import re

from jaxcache.text import safe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

VARIABLE = "JAX_COMPILATION_CACHE_DIR"
# XLA options that name a file or directory XLA reads cached results from
XLA_CACHE_PATH_FLAGS = ("xla_gpu_per_fusion_autotune_cache_dir", "xla_gpu_kernel_cache_file")


def _inside(path: str, directory: str) -> bool:
    path, directory = os.path.normpath(os.path.abspath(path)), os.path.normpath(directory)
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def conflicts(env: Mapping[str, str], audited: str | None) -> list[str]:
    """Inherited variables that point JAX or XLA at a cache outside `audited` (None: a sealed
    cache, where any such place is read unsigned): one sentence each."""
    found: list[str] = []
    flags = env.get("XLA_FLAGS") or ""
    for flag in XLA_CACHE_PATH_FLAGS:
        for match in re.finditer(rf"--{flag}=(\S*)", flags):
            value = match.group(1)
            if audited is None or not value or not _inside(value, audited):
                where = f"outside {safe(audited)}" if audited else "no signature covers"
                found.append(f"XLA_FLAGS sets --{flag}={safe(value)}: XLA would read cached "
                             f"results from there, a place {where} that jaxcache did not "
                             "audit (for this process and every child); remove it from "
                             "XLA_FLAGS")
    return found


def point_children_at(path: str | None) -> str | None:
    """Make the children this process starts use `path` as their cache (None: no cache);
    returns the value the variable had."""
    before = os.environ.get(VARIABLE)
    if path is None:
        os.environ.pop(VARIABLE, None)
    else:
        os.environ[VARIABLE] = path
    return before
