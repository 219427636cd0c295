"""Each cache key as this machine's run records show it (gc/usage.py's KeyUse): its last hit,
its latest compile time and how many runs asked for it, for one cache location."""

from __future__ import annotations

from jaxcache.gc.usage import KeyUse
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
    from jaxcache.records import record_dir as store

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
