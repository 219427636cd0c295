"""Each cache key as this machine's run records show it (gc/usage.py's KeyUse): its last hit,
its latest compile time and how many runs asked for it, for one cache location.

And which entries a sealed reader fetches ahead (seal/stores/prefetch.py): the keys the newest
run record of the same command and cache hit, in the order its processes asked for them, or
those of a record named with `--prefetch-from`. Bounded: at most PREFETCH_RECORDS records are
read (newest first, by their names), each no larger than MAX_RECORD_BYTES; a record is the
user's own (record_dir.py reads only files owned by them or root, through a private
directory). What a record names is still a writer's word: the keys are checked for a JAX cache
key's shape and capped where they are used (prefetch_plan.plan_keys)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from jaxcache.gc.usage import KeyUse
from jaxcache.records import record_dir as store
from jaxcache.records.run_document import RunRecord
from jaxcache.records.used_dirs import same_dir

RECORDS_READ = 500  # the newest records read: a year of daily runs, each read whole


def of_records(location: str, directory: str | None = None,
               limit: int = RECORDS_READ) -> dict[str, KeyUse]:
    """Each entry name (`<key>-cache`) the newest `limit` run records in `directory` (default:
    the user's) show for the cache at `location` (an absolute path or a bucket URL), with its
    last hit, its latest compile time and how many runs asked for it. A record that cannot be
    read is skipped (records.store names it elsewhere)."""
    import time

    from jaxcache.errors import JaxcacheError

    try:
        scan = store.scan(directory or store.runs_dir())
    except JaxcacheError:
        return {}  # records that cannot be read say nothing: the cache's own times decide
    now_ns = time.time_ns()
    out: dict[str, KeyUse] = {}
    for found in scan.records[:limit]:  # newest first
        record = RunRecord.from_json(found.doc)
        if not same_dir(record.cache_dir.path_given, location):
            continue
        seen: set[str] = set()
        for m in record.processes[0].modules:
            if m.cache_key is None:
                continue
            name = f"{m.cache_key}-cache"
            use = out.get(name, KeyUse())
            secs = m.compile_or_load_s
            compiled = None if m.hit or secs is None or secs < 0 else secs
            out[name] = KeyUse(
                # a record's time is its name's: never later than now
                max(use.last_hit_ns, min(found.when_ns, now_ns)) if m.hit else use.last_hit_ns,
                use.compile_s if use.compile_s is not None else compiled,  # newest first
                use.runs + (name not in seen))
            seen.add(name)
    return out


PREFETCH_RECORDS = 20  # the newest records looked at for the same command and cache
MAX_RECORD_BYTES = 32 << 20  # a larger record is passed over (a prefetch is not worth it)


@dataclass(frozen=True, slots=True)
class KeySource:
    """The keys to fetch ahead and the record they came from."""

    keys: tuple[str, ...]
    record: str  # the record's path
    entry_bytes: int  # their sizes as the record says (0 where it does not)


def hits_of(record: RunRecord) -> tuple[str, ...]:
    """The keys a record's processes loaded from the cache, in the order they were asked for
    (the main process first), once each."""
    seen: dict[str, None] = {}
    for m in record.modules:
        if m.hit and m.cache_key is not None:
            seen.setdefault(m.cache_key, None)
    return tuple(seen)


def _source(record: RunRecord, path: str) -> KeySource:
    keys = hits_of(record)
    sizes = {m.cache_key: m.entry_bytes or 0 for m in record.modules if m.hit and m.cache_key}
    return KeySource(keys, path, sum(sizes.get(k, 0) for k in keys))


def from_file(path: str) -> KeySource:
    """`--prefetch-from RECORD`: read as every record named on the command line is
    (record_dir.read_file: JaxcacheError, one line, when it is not one)."""
    found = store.read_file(path)
    return _source(RunRecord.from_json(found.doc), found.path)


def newest_for(argv: list[str] | tuple[str, ...], location: str,
               directory: str | None = None, limit: int = PREFETCH_RECORDS) -> KeySource | None:
    """The keys of the newest record (among the newest `limit` in `directory`, default the
    user's) of the same command (`argv`) on the same cache (`location`) that hit any; None
    when there is none. Records that cannot be read are passed over."""
    from jaxcache.errors import JaxcacheError

    try:
        where = directory or store.runs_dir()
        fd = store.open_dir(where)
    except JaxcacheError:
        return None
    if fd is None:
        return None
    try:
        names = sorted(((when, name) for name in os.listdir(fd)
                        if (when := store.when_ns(name)) is not None), reverse=True)
        for _, name in names[:limit]:
            got = store.read_limited(fd, name, MAX_RECORD_BYTES)
            if got is None:
                continue
            record = RunRecord.from_json(got)
            if tuple(record.argv) != tuple(argv) or \
                    not same_dir(record.cache_dir.path_given, location):
                continue
            found = _source(record, os.path.join(where, name))
            if found.keys:
                return found
        return None
    finally:
        os.close(fd)


