"""Each setting as `jaxcache config` shows it: its value and where it came from.

The candidates and the rule (the first set wins) are effective.py's,
which the commands and enable() use for the values alone; here each value is named by its
place: a flag, JAX's variable, the project file, or the built-in default.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from jaxcache import thresholds
from jaxcache.jaxcompat.internals import (
    DEFAULT_MIN_COMPILE_TIME_SECS,
    DEFAULT_MIN_ENTRY_SIZE_BYTES,
)
from jaxcache.project import effective

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


class From(StrEnum):
    """Where a setting's value came from, in the order of the candidates' places."""

    FLAG = "flag"
    ENV = "env"
    FILE = "file"
    DEFAULT = "default"


Value = str | int | float | None


@dataclass(frozen=True, slots=True)
class Setting:
    """One effective setting: its name as the project file writes it, its value, and where it
    came from (`where`: the flag, the variable, the file and its table; None: a default)."""

    name: str
    value: Value
    source: From
    where: str | None = None

    @property
    def source_text(self) -> str:
        """flag --NAME | env NAME | FILE [table] | default."""
        if self.source is From.FLAG or self.source is From.ENV:
            return f"{self.source.value} {self.where}"
        return self.where if self.source is From.FILE and self.where else self.source.value


def _setting(name: str, candidates: tuple[Value, ...], default: Value,
             names: tuple[str | None, str | None]) -> Setting:
    """`candidates` are (flag, variable, file): the first set wins (effective.first)."""
    place, value = effective.first(candidates, default)
    source = (From.FLAG, From.ENV, From.FILE, From.DEFAULT)[place]
    config = effective.current()
    where = {From.FLAG: names[0], From.ENV: names[1],
             From.FILE: config.label_of(name) if config else None}.get(source)
    return Setting(name, value, source, where)


def settings(env: Mapping[str, str], *, cache_flag: str | None = None,
             compile_flag: float | None = None, size_flag: int | None = None,
             bench_defaults: tuple[int, int]) -> tuple[Setting, ...]:
    """Every setting (bench's own defaults passed in: they are bench's, a layer above)."""
    from jaxcache.userdirs import default_cache_dir, default_runs_dir

    config = effective.current()
    none = (None, None)
    return (
        _setting("cache_dir", effective.cache_dir_candidates(env, cache_flag),
                 default_cache_dir(), ("--cache-dir", effective.CACHE_VARIABLE)),
        _setting("min_compile_time", effective.compile_time_candidates(env, compile_flag),
                 DEFAULT_MIN_COMPILE_TIME_SECS,
                 ("--min-compile-time", thresholds.COMPILE_VARIABLE)),
        _setting("min_entry_size", effective.entry_size_candidates(env, size_flag),
                 DEFAULT_MIN_ENTRY_SIZE_BYTES, ("--min-entry-size", thresholds.SIZE_VARIABLE)),
        _setting("records.dir", (*none, config.records_dir if config else None),
                 default_runs_dir(), none),
        _setting("records.keep", (*none, config.records_keep if config else None), None,
                 none),
        _setting("bench.trials", (*none, config.bench_trials if config else None),
                 bench_defaults[0], none),
        _setting("bench.warm", (*none, config.bench_warm if config else None),
                 bench_defaults[1], none),
        _setting("gc.max_size", (*none, config.gc_max_size if config else None), None,
                 none),
        _setting("gc.max_age", (*none, config.gc_max_age_s if config else None), None,
                 none))
