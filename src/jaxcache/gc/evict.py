"""Carrying out a plan: its units handed to a delete function, by one thread or several.

Deleting is what gc spends its time on in a big directory (an identity check and an unlink per
file), and on ext4 a second thread halves it: DELETERS threads take the plan's units in small
batches, in the plan's order, each unit wholly by one thread, so that its entry still goes
before its signatures. The result keeps the plan's order whatever thread deleted what.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from jaxcache.gc.units import Unit

# threads deleting a directory's units: on ext4 two take half the time of one for 50,000
# re-checks and unlinks (benchmarks/gc_speed.py; four took more than two on 2 cores)
DELETERS = 2
_BATCH = 16  # units a deleting thread takes at a time: near the plan's order, few lock turns


def evict(plan: tuple[Unit, ...], until_ns: int | None, gone: Callable[[Unit], bool],
          workers: int = 1) -> tuple[list[Unit], bool]:
    """The units of `plan` that `gone` removed (with a dry run: would remove), in the plan's
    order, and whether `until_ns` (time.monotonic_ns()) came first: the rest goes next time.
    `workers` > 1: that many threads take the plan's units in turn (one unit wholly by one
    thread, so its entry still goes before its sidecars); the first error stops them all and
    is raised."""
    starts = iter(range(0, len(plan), _BATCH))
    taking = threading.Lock()
    gone_at: list[int] = []
    stopped: list[bool] = []
    failed: list[BaseException] = []

    def work() -> None:
        try:
            while not failed:
                with taking:
                    start = next(starts, None)
                if start is None:
                    return
                for i in range(start, min(start + _BATCH, len(plan))):
                    if until_ns is not None and time.monotonic_ns() > until_ns or failed:
                        stopped.append(True)
                        return
                    if gone(plan[i]):
                        gone_at.append(i)
        except BaseException as exc:  # raised again in the caller's thread, below
            failed.append(exc)

    helpers = []
    for i in range(workers - 1 if len(plan) >= 2 * workers else 0):  # none for a few units
        t = threading.Thread(target=work, name=f"jaxcache-gc-{i}", daemon=True)
        try:
            t.start()
        except RuntimeError:  # Python 3.12 starts none from an atexit handler (gh-113964)
            break
        helpers.append(t)
    work()  # this thread too: alone, when no helper could start
    for t in helpers:
        t.join()
    if failed:
        raise failed[0]
    gone_at.sort()
    return [plan[i] for i in gone_at], bool(stopped)
