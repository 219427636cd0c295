"""`enable(path, max_size=..., max_age=...)`: collect the cache when the process ends.

The job's own process is the only one there is (no wrapper after it), so gc runs from an atexit
handler, once, for at most DEADLINE_S of deleting (the rest goes at the next exit), and never
raises into the interpreter's shutdown: a gc that cannot run is one line on stderr. A later enable()
replaces the limits; disable() cancels them.
"""

from __future__ import annotations

import atexit
import contextlib
import sys
import time

from jaxcache.errors import JaxcacheError

DEADLINE_S = 10.0
_pending: dict[str, tuple[str, int | None, float | None]] = {}


def limits(max_size: int | str | None, max_age: float | str | None
           ) -> tuple[int | None, float | None]:
    """The limits as gc takes them: bytes and seconds, from numbers or `10G` / `30d`;
    JaxcacheError (one line) for anything else."""
    from jaxcache import text

    try:
        size = text.parse_size(max_size) if isinstance(max_size, str) else max_size
        age = text.parse_age(max_age) if isinstance(max_age, str) else max_age
    except ValueError as exc:
        raise JaxcacheError(str(exc)) from None
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        raise JaxcacheError(f"max_size must be bytes (an int >= 0) or a size like '10G', not "
                            f"{size!r}")
    if age is not None and (isinstance(age, bool) or not isinstance(age, int | float)
                            or age < 0):
        raise JaxcacheError(f"max_age must be seconds (>= 0) or an age like '30d', not {age!r}")
    return size, age


def schedule(path: str, max_size: int | None, max_age_s: float | None) -> None:
    """Collect `path` when this process exits (replacing what an earlier call asked)."""
    if max_size is None and max_age_s is None:
        _pending.clear()
        return
    if not _pending:
        atexit.register(_run)
    _pending["gc"] = (path, max_size, max_age_s)


def cancel() -> None:
    _pending.clear()


def _used_here(path: str) -> frozenset[str]:
    """The entries this process loaded or wrote in `path` (the guard watched each get and
    put): its working set, never evicted by its own gc at exit."""
    import os

    from jaxcache.jaxcompat import guard

    real = os.path.realpath(path)
    return frozenset(name for directory, name in guard.USED.copy()  # a thread may add
                     if os.path.realpath(directory) == real)


def _run() -> None:
    job = _pending.pop("gc", None)
    if job is None:
        return
    path, max_size, max_age_s = job
    try:
        from jaxcache.gc import collect, compaction
        from jaxcache.trust.provenance.ledger_place import crowded

        until = time.monotonic_ns() + int(DEADLINE_S * 1e9)
        done = collect.collect(path, max_size=max_size, max_age_s=max_age_s, until_ns=until,
                               keep=_used_here(path))
        if done.job_over_limit:  # a line, not a warning:
            sys.stderr.write(  # -W error must not turn it into a traceback at exit
                f"jaxcache: gc at exit: the limit cannot hold what this process used "
                f"({done.kept_for_job} entries, {done.kept_for_job_bytes} bytes): kept, so the "
                "next start does not compile them again\n")
        if crowded():
            compaction.compact(until_ns=until)
    except Exception as exc:  # noqa: BLE001 (never into the interpreter's shutdown)
        # a line, not a warning: under -W error a warning would raise out of the handler
        with contextlib.suppress(Exception):
            sys.stderr.write(f"jaxcache: gc at exit skipped: {exc}\n")
