"""The project file's TOML read into ProjectConfig, once: every key checked here, JaxcacheError
(one line naming the file and the key) for anything else.

The file (a table of pyproject.toml, or a whole .jaxcache.toml):

    cache_dir = "build/jax-cache"   # relative: to the file's folder
    min_compile_time = 0.5          # seconds: jax_persistent_cache_min_compile_time_secs
    min_entry_size = 0              # bytes: jax_persistent_cache_min_entry_size_bytes

    [records]
    dir = "runs"                    # where `jaxcache run` writes its records
    keep = 100                      # `jaxcache records prune`'s --keep when not given

    [bench]
    trials = 8                      # -t/--trials of bench, decide -- CMD and demo
    warm = 2                        # -k/--warm

    [gc]
    max_size = "10G"                # a limit that lasts: every `jaxcache run` and enable()
    max_age = "30d"                 # collect the cache after the job (as --max-size/--max-age)

Trust settings (anything the policy holds) and the flags that switch a check off are refused
by name: a project file is whoever can write the checkout's to change.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from jaxcache.errors import JaxcacheError
from jaxcache.project import MAX_TRIALS, MAX_WARM, policy_keys
from jaxcache.text import parse_age, parse_size, quoted, safe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from typing import TypeVar

    from jaxcache.project.locate import Found

    N = TypeVar("N", int, float)

# every key of the policy file's top level, as its parser knows them (a [[cache]] table holds
# the same settings, and its path, which names no trust alone: a key in a `cache` table is
# refused for the table's name); a key's misspelling; the policy's own name
TRUST_KEYS = policy_keys.TOP_LEVEL | {"trusted_key", "policy"}
# the opt-outs a command line gives, one job at a time, never a file
FLAG_ONLY = frozenset({"allow_untrusted", "unverified_jax"})
KEYS = ("cache_dir", "min_compile_time", "min_entry_size", "records.dir", "records.keep",
        "bench.trials", "bench.warm", "gc.max_size", "gc.max_age")
TABLES = ("records", "bench", "gc")


@dataclass(frozen=True, slots=True)
class ProjectConfig:
    """What the project file sets (None: not set there), and where it is."""

    path: str  # the file
    table: str | None = None  # "tool.jaxcache" in a pyproject.toml; None: .jaxcache.toml
    cache_dir: str | None = None
    min_compile_time: float | None = None
    min_entry_size: int | None = None
    records_dir: str | None = None
    records_keep: int | None = None
    bench_trials: int | None = None
    bench_warm: int | None = None
    gc_max_size: int | None = None  # bytes
    gc_max_age_s: float | None = None

    @property
    def label(self) -> str:
        """The file as messages and `jaxcache config` name it (escaped)."""
        return safe(self.path) + (f" [{self.table}]" if self.table else "")

    def label_of(self, name: str) -> str:
        """The file and the table a dotted setting lives in: records.dir is in
        [tool.jaxcache.records] (in a .jaxcache.toml, [records])."""
        sub = name.rpartition(".")[0]
        table = ".".join(t for t in (self.table, sub) if t)
        return safe(self.path) + (f" [{table}]" if table else "")


def parse(found: Found) -> ProjectConfig:
    """The settings of the file found (its bytes are there: locate.py read them)."""
    from jaxcache import validate as v

    try:
        doc: Mapping[str, object] = v.parse_toml(found.data or b"")
    except v.Unreadable as exc:
        raise JaxcacheError(f"project file {safe(found.path)} is {exc}") from None
    if found.table is not None:
        for part in found.table.split("."):
            inner = doc.get(part, {})
            if not isinstance(inner, dict):
                raise JaxcacheError(f"project file {safe(found.path)}: [{found.table}] must be "
                                    "a table")
            doc = inner
    return _settings(doc, found)


def _settings(doc: Mapping[str, object], found: Found) -> ProjectConfig:
    where = found.label
    flat = dict(_flat("", doc))
    # a trust setting is named as such wherever it sits ([tool.jaxcache.x] too), before any
    # unknown key: it is the one mistake with a stake
    for key in sorted(flat, key=lambda k: not _names(k, TRUST_KEYS | FLAG_ONLY)):
        _known(where, key)
    base = os.path.dirname(found.path)
    return ProjectConfig(
        found.path, found.table,
        cache_dir=_path(where, "cache_dir", flat.get("cache_dir"), base, urls=True),
        min_compile_time=_seconds(where, "min_compile_time", flat.get("min_compile_time")),
        min_entry_size=_whole(where, "min_entry_size", flat.get("min_entry_size"), -1, None),
        records_dir=_path(where, "records.dir", flat.get("records.dir"), base),
        records_keep=_whole(where, "records.keep", flat.get("records.keep"), 0, None),
        bench_trials=_whole(where, "bench.trials", flat.get("bench.trials"), 1, MAX_TRIALS),
        bench_warm=_whole(where, "bench.warm", flat.get("bench.warm"), 1, MAX_WARM),
        gc_max_size=_limit(where, "gc.max_size", flat.get("gc.max_size"), parse_size),
        gc_max_age_s=_limit(where, "gc.max_age", flat.get("gc.max_age"), parse_age))


def _flat(prefix: str, doc: Mapping[str, object]) -> Iterator[tuple[str, object]]:
    """Every key with its dotted name, tables at any depth opened (an empty one of ours is
    nothing, any other a key)."""
    for key, value in doc.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            yield from _flat(name + ".", value)
        elif not (isinstance(value, dict) and name in TABLES):  # an empty [records] is fine
            yield name, value


def _names(key: str, names: frozenset[str]) -> bool:
    """Whether a part of the dotted key is one of `names`: a trust setting's own fields
    ([trusted_identities] issuer = ...) and a [cache] table's path are trust settings too."""
    return not names.isdisjoint(key.split("."))


def _known(where: str, key: str) -> None:
    if _names(key, TRUST_KEYS):
        raise JaxcacheError(f"project file {where}: {safe(key)} is a trust setting: it belongs "
                            "in the protected policy (docs/reference/policy-file.md), never in a "
                            "project file whoever can write the checkout controls")
    if _names(key, FLAG_ONLY):
        raise JaxcacheError(f"project file {where}: {safe(key)} switches a check off, which "
                            "only a flag on the command line does, for one job")
    if key in TABLES:
        raise JaxcacheError(f"project file {where}: {safe(key)} must be a table ([{key}])")
    if key not in KEYS:
        import difflib

        close = difflib.get_close_matches(key, KEYS, n=1)
        hint = f" (did you mean {close[0]}?)" if close else f" (known: {', '.join(KEYS)})"
        raise JaxcacheError(f"project file {where}: {safe(key)} is an unknown key{hint}")


def _shown(value: object) -> str:
    return quoted(value) if isinstance(value, str) else safe(str(value)[:40])


def _seconds(where: str, key: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            math.isfinite(value) and value >= 0):
        raise JaxcacheError(f"project file {where}: {key} must be a number of seconds >= 0, "
                            f"not {_shown(value)}")
    return float(value)


def _limit(where: str, key: str, value: object, parse: Callable[[str], N]) -> N | None:
    """A size ("10G", or bytes) or an age ("30d", or seconds), as the flags take it."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise JaxcacheError(f"project file {where}: {key} must be a string such as \"10G\" or "
                            f"\"30d\", or a number, not {_shown(value)}")
    try:
        return parse(str(value))
    except ValueError as exc:
        raise JaxcacheError(f"project file {where}: {key} is {exc}") from None


def _whole(where: str, key: str, value: object, lo: int, hi: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < lo or (
            hi is not None and value > hi):
        bounds = f"from {lo} to {hi}" if hi is not None else f">= {lo}"
        raise JaxcacheError(f"project file {where}: {key} must be a whole number {bounds}, "
                            f"not {_shown(value)}")
    return value


def _path(where: str, key: str, value: object, base: str, urls: bool = False) -> str | None:
    """A directory: absolute, or relative to the file's folder (a bucket URL as written)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        raise JaxcacheError(f"project file {where}: {key} must be a directory path (a "
                            f"non-empty string), not {_shown(value)}")
    if value.startswith("~"):
        raise JaxcacheError(f"project file {where}: {key} {quoted(value)} starts with '~', "
                            "which neither jaxcache nor JAX expands: write it out, or relative "
                            "to the file's folder")
    if urls and value.startswith(("gs://", "s3://")):
        return value
    return os.path.normpath(os.path.join(base, value))
