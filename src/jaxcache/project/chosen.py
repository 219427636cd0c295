"""Each setting's value and where it came from: a flag (or enable()'s argument), else JAX's
variable where JAX has one, else the project file, else the built-in default. The one place
that weighs them: the commands' defaults (cli/common.py), the default cache directory
(trust/create.py), the records folder (records/record_dir.py), enable() and `jaxcache config`
all ask here.
"""

from __future__ import annotations

from enum import Enum

from jaxcache import project
from jaxcache.values import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

CACHE_VARIABLE = "JAX_COMPILATION_CACHE_DIR"
COMPILE_VARIABLE = "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"
SIZE_VARIABLE = "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"
JAX_DEFAULTS = (1.0, 0)  # JAX's own write thresholds: 1 s, 0 bytes


class From(str, Enum):
    """Where a setting's value came from."""

    DEFAULT = "default"
    ENV = "env"
    FILE = "file"
    FLAG = "flag"


Value = str | int | float | None


@frozen
class Setting:
    """One effective setting: its name as the project file writes it, its value, and where it
    came from (`where`: the variable, the file and table, or the flag; None for a default)."""

    name: str
    value: Value
    source: From
    where: str | None = None

    @property
    def source_text(self) -> str:
        """default | env NAME | FILE [table] | flag --NAME."""
        if self.source is From.ENV or self.source is From.FLAG:
            return f"{self.source.value} {self.where}"
        return self.where if self.source is From.FILE and self.where else self.source.value


def _pick(name: str, flag: Value, flag_name: str, env_value: Value, env_name: str | None,
          file_value: Value, default: Value) -> Setting:
    if flag is not None:
        return Setting(name, flag, From.FLAG, flag_name)
    if env_value is not None:
        return Setting(name, env_value, From.ENV, env_name)
    if file_value is not None:
        return Setting(name, file_value, From.FILE, project.current().label)
    return Setting(name, default, From.DEFAULT)


def cache_dir(env: Mapping[str, str], flag: str | None = None) -> Setting:
    """The cache directory: --cache-dir, else $JAX_COMPILATION_CACHE_DIR (what JAX itself
    would use; empty counts as unset, as JAX takes it), else the project file's, else the
    directory a plain `jaxcache init` makes."""
    from jaxcache.userdirs import default_cache_dir

    return _pick("cache_dir", flag, "--cache-dir", env.get(CACHE_VARIABLE) or None,
                 CACHE_VARIABLE, project.current().cache_dir, default_cache_dir())


def default_cache_dir(env: Mapping[str, str]) -> str:
    """cache_dir()'s value with no flag: the one rule every command given no directory
    follows, and enable() given none."""
    return str(cache_dir(env).value)


def thresholds(env: Mapping[str, str], min_compile_time: float | None = None,
               min_entry_size: int | None = None, flags: tuple[str, str] = (
                   "--min-compile-time", "--min-entry-size")) -> tuple[Setting, Setting]:
    """JAX's two write thresholds: given (a flag, enable()'s argument), else JAX's variable,
    else the project file's, else JAX's default."""
    config = project.current()
    return (_pick("min_compile_time", min_compile_time, flags[0],
                  _number(env.get(COMPILE_VARIABLE), float), COMPILE_VARIABLE,
                  config.min_compile_time, JAX_DEFAULTS[0]),
            _pick("min_entry_size", min_entry_size, flags[1],
                  _number(env.get(SIZE_VARIABLE), int), SIZE_VARIABLE,
                  config.min_entry_size, JAX_DEFAULTS[1]))


def _number(text: str | None, kind: type[int] | type[float]) -> Value:
    """A variable's value as JAX would read it; set but not a number: shown as written."""
    if text is None:
        return None
    try:
        return kind(text)
    except ValueError:
        return text


def file_thresholds(env: Mapping[str, str]) -> tuple[float | None, int | None]:
    """The project file's thresholds that apply where nothing was given: each one whose JAX
    variable is not set (JAX reads that at import: it stands). None: leave JAX's alone."""
    config = project.current()
    return (config.min_compile_time if env.get(COMPILE_VARIABLE) is None else None,
            config.min_entry_size if env.get(SIZE_VARIABLE) is None else None)


def records_dir() -> str:
    """Where run records are written and read unless a flag says: the project file's
    [records] dir, else the state folder's jaxcache/runs."""
    from jaxcache.userdirs import default_runs_dir

    return project.current().records_dir or default_runs_dir()


def records_keep() -> int | None:
    """`jaxcache records prune --keep`'s value when not given: the project file's, else None."""
    return project.current().records_keep


def bench_trials(default: int) -> int:
    """-t/--trials's default: the project file's [bench] trials, else `default` (bench's)."""
    trials = project.current().bench_trials
    return default if trials is None else trials


def bench_warm(default: int) -> int:
    """-k/--warm's default: the project file's [bench] warm, else `default` (bench's)."""
    warm = project.current().bench_warm
    return default if warm is None else warm


def settings(env: Mapping[str, str], *, cache_flag: str | None = None,
             compile_flag: float | None = None, size_flag: int | None = None,
             bench_defaults: tuple[int, int]) -> tuple[Setting, ...]:
    """Every setting, as `jaxcache config` shows them (bench's own defaults passed in: they
    are bench's, a layer above)."""
    from jaxcache.userdirs import default_runs_dir

    config = project.current()
    return (cache_dir(env, cache_flag), *thresholds(env, compile_flag, size_flag),
            _pick("records.dir", None, "", None, None, config.records_dir, default_runs_dir()),
            _pick("records.keep", None, "", None, None, config.records_keep, None),
            _pick("bench.trials", None, "", None, None, config.bench_trials,
                  bench_defaults[0]),
            _pick("bench.warm", None, "", None, None, config.bench_warm, bench_defaults[1]))
