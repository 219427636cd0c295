"""Each setting's value: its candidates in the order they win (a flag or enable()'s argument,
JAX's variable where JAX has one, the project file), the first set, else the default; and the
project file found from the working directory, read once (the package's docstring says how).
"""

from __future__ import annotations

import os

from jaxcache.thresholds import COMPILE_VARIABLE, SIZE_VARIABLE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import TypeVar

    from jaxcache.project.locate import Found
    from jaxcache.project.project_toml import ProjectConfig

    T = TypeVar("T")

DOT_FILE = ".jaxcache.toml"
PYPROJECT = "pyproject.toml"
CACHE_VARIABLE = "JAX_COMPILATION_CACHE_DIR"
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY

_LOOKED: dict[str, tuple[Found | None, ProjectConfig | None]] = {}  # per working directory


def _start() -> str:
    try:
        return os.getcwd()
    except OSError:  # the working directory was removed: no project above it
        return ""


def looked() -> tuple[str, Found | None, ProjectConfig | None]:
    """Where the search started, the file that ended it (None: none up to /) and the
    settings it holds (None: none), read once per working directory; JaxcacheError (one
    line) for a file jaxcache refuses."""
    start = _start()
    known = _LOOKED.get(start)
    if known is None:
        found = _walk(start) if start else None
        config = None
        if found is not None and found.data is not None:
            from jaxcache.project import project_toml

            config = project_toml.parse(found)
        known = _LOOKED[start] = (found, config)
    return (start, *known)


def current() -> ProjectConfig | None:
    """The project file's settings here; None when no file sets any."""
    return looked()[2]


def _searchable(folder: str) -> bool:
    """Whether you can look up names in `folder` (run as another user from a working directory
    that user cannot enter: `runuser`, `su` without `-`, a job started in a private folder)."""
    try:
        os.stat(os.path.join(folder, "."))
    except PermissionError:
        return False
    except OSError:
        return True
    return True


def _walk(start: str) -> Found | None:
    """From `start` up: the first folder holding .jaxcache.toml or pyproject.toml ends it, and
    so does a folder you cannot search (nothing in it can be looked for: no settings)."""
    here = start
    while True:
        for name in (DOT_FILE, PYPROJECT):
            path = os.path.join(here, name)
            try:
                fd = os.open(path, _OPEN)
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as exc:
                if isinstance(exc, PermissionError) and not _searchable(here):
                    return None  # no file of yours can be in a folder you cannot search
                from jaxcache.project import locate

                locate.refuse(path, exc)
            from jaxcache.project import locate

            return locate.read(fd, path, in_pyproject=name == PYPROJECT)
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def first(candidates: tuple[T | None, ...], default: T) -> tuple[int, T]:
    """The first candidate set and its place (0: a flag, 1: JAX's variable, 2: the project
    file); none set: the default, at place len(candidates)."""
    for place, value in enumerate(candidates):
        if value is not None:
            return place, value
    return len(candidates), default


# --- each setting's candidates, in the order they win -------------------------------------

def cache_dir_candidates(env: Mapping[str, str], flag: str | None = None
                         ) -> tuple[str | None, str | None, str | None]:
    """--cache-dir; $JAX_COMPILATION_CACHE_DIR (what JAX itself would use; empty counts as
    unset, as JAX takes it); the project file's cache_dir."""
    config = current()
    return flag, env.get(CACHE_VARIABLE) or None, config.cache_dir if config else None


def compile_time_candidates(env: Mapping[str, str], given: float | None = None
                            ) -> tuple[float | str | None, float | str | None, float | None]:
    """--min-compile-time (or enable()'s argument); JAX's variable (read by JAX at import;
    shown as written if it is no number); the project file's min_compile_time."""
    config = current()
    return (given, _seconds(env.get(COMPILE_VARIABLE)),
            config.min_compile_time if config else None)


def entry_size_candidates(env: Mapping[str, str], given: int | None = None
                          ) -> tuple[int | str | None, int | str | None, int | None]:
    """--min-entry-size (or enable()'s argument); JAX's variable; the project file's."""
    config = current()
    return (given, _bytes(env.get(SIZE_VARIABLE)),
            config.min_entry_size if config else None)


def _seconds(text: str | None) -> float | str | None:
    """A variable's value as JAX reads it; set but no number: as written."""
    try:
        return None if text is None else float(text)
    except ValueError:
        return text


def _bytes(text: str | None) -> int | str | None:
    try:
        return None if text is None else int(text)
    except ValueError:
        return text


# --- what the job's path asks: values only --------------------------------------------------

def default_cache_dir(env: Mapping[str, str]) -> str:
    """The cache directory of every command given none, and of enable() given none:
    $JAX_COMPILATION_CACHE_DIR, else the project file's, else the one `jaxcache init` makes."""
    from jaxcache.userdirs import default_cache_dir as built_in

    return first(cache_dir_candidates(env), built_in())[1]


def file_thresholds(env: Mapping[str, str]) -> tuple[float | None, int | None]:
    """The project file's thresholds where they win over JAX's own variable (not set: JAX read
    nothing at import), for a job or enable() given none; None: leave JAX's alone."""
    compile_s, size = compile_time_candidates(env), entry_size_candidates(env)
    return (compile_s[2] if compile_s[1] is None else None,
            size[2] if size[1] is None else None)


def file_gc_limits(env: Mapping[str, str], cache_flag: str | None = None
                   ) -> tuple[int | None, float | None]:
    """The project file's [gc] max_size (bytes) and max_age (seconds): a limit that lasts for
    the project's own cache, which a `jaxcache run` or enable() given none applies after the
    job. Only where that cache is the one in use (the file's cache_dir won: no flag or path,
    no JAX_COMPILATION_CACHE_DIR): a checkout's file never collects a cache it does not name.
    (None, None): none applies."""
    flag, variable, filed = cache_dir_candidates(env, cache_flag)
    config = current()
    if config is None or flag is not None or variable is not None or filed is None:
        return None, None
    return config.gc_max_size, config.gc_max_age_s


def records_dir() -> str:
    """Where run records are written and read unless a flag says: the project file's
    [records] dir, else the state folder's jaxcache/runs."""
    config = current()
    if config is not None and config.records_dir is not None:
        return config.records_dir
    from jaxcache.userdirs import default_runs_dir

    return default_runs_dir()


def records_keep() -> int | None:
    """`jaxcache records prune --keep` when not given: the project file's, else None."""
    config = current()
    return config.records_keep if config else None


def bench_trials(default: int) -> int:
    """-t/--trials's default: the project file's [bench] trials, else `default` (bench's)."""
    config = current()
    return config.bench_trials if config and config.bench_trials is not None else default


def bench_warm(default: int) -> int:
    """-k/--warm's default: the project file's [bench] warm, else `default` (bench's)."""
    config = current()
    return config.bench_warm if config and config.bench_warm is not None else default
