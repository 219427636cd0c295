"""Where bench keeps each result (the state directory, as run keeps its records), so that
`jaxcache decide PATH` finds the last one of a job that used PATH (decide/bench_choice.py)
without a second bench or a --json file."""

from __future__ import annotations

import os

from jaxcache.errors import JaxcacheError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator


def benches_dir() -> str:
    from jaxcache.userdirs import user_dir

    return os.path.join(user_dir("state"), "benches")


def new_path() -> str | None:
    """A fresh name in benches_dir() (made private if missing), unique per call; None where
    that directory cannot be made (a user without a home: the result is not kept)."""
    directory = benches_dir()
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    except OSError:
        return None
    from jaxcache.records.record_dir import new_name

    return os.path.join(directory, new_name())


def is_kept(path: str) -> bool:
    return os.path.dirname(os.path.abspath(path)) == os.path.abspath(benches_dir())


def newest_first() -> Iterator[tuple[str, dict[str, object]]]:
    """The kept results that read as bench documents, newest first (names sort by time), read
    one at a time as asked for; files that do not read are passed over, as records list
    passes over what is not a record."""
    from jaxcache.documents.read import load_bench

    try:
        names = sorted((n for n in os.listdir(benches_dir()) if n.endswith(".json")),
                       reverse=True)
    except OSError:
        return
    for name in names:
        path = os.path.join(benches_dir(), name)
        try:
            doc = load_bench(path)
        except JaxcacheError:
            continue
        yield path, doc


def when(path: str) -> str | None:
    """When a kept result was written, from its name (UTC, to the second: `2025-01-31 09:15:02
    UTC`); None for a name that carries no time."""
    import time

    from jaxcache.records.record_dir import when_ns

    ns = when_ns(os.path.basename(path))
    if ns is None:
        return None
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ns / 1e9))
