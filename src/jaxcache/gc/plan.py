"""What gc deletes: the least recently used units first (or the least valuable), until the
limits hold.

`--max-age`: every unit not used for longer goes. `--max-size`: then, oldest use first (with
`--order value`: least compile seconds saved per byte and per run first, gc/usage.py; ties by
oldest use), units go until what the directory holds (every file in it, those gc may not delete
too) is within the size. Then, the last to go first (the most recently used; the most
valuable with `--order value`), every unit that went for the size alone and fits back under it
stays: the oldest unit may be small and the next one large, and
the large one alone was enough. So nothing goes that the limit could have kept. Only units gc
may delete count as candidates (collect.py judges them); when those are not enough, the plan
says how far over the limit the directory stays.

`keep`: the entries the job that just ran used (`run --max-size`: its hits and writes). They are
never candidates: a limit below one job's working set would otherwise delete, after every run,
an entry the next run compiles again (and then another), and the run says so instead.
"""

from __future__ import annotations

import enum
import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass

from jaxcache.gc.units import Clock, Unit
from jaxcache.gc.usage import KeyUse, value


class Order(enum.Enum):
    """Which units go first when the size is over the limit."""

    LRU = "lru"  # the least recently used
    VALUE = "value"  # the least compile time saved per byte and per run (gc/usage.py)

    @property
    def words(self) -> str:
        return {Order.LRU: "least recently used first",
                Order.VALUE: "least compile time saved per byte and per run first"}[self]

@dataclass(frozen=True, slots=True)
class Plan:
    evict: tuple[Unit, ...]  # in the order they go: least recently used first
    before_bytes: int  # every file the directory holds
    after_bytes: int  # what it holds once `evict` is gone
    over_by: int  # bytes over max_size that gc may not delete (0: within, or no size limit)
    kept_bytes: int = 0  # of what stays, the units `keep` named (the job's working set)


def with_hits(units: list[Unit], uses: Mapping[str, KeyUse]) -> list[Unit]:
    """`units` with each one's last use moved to its latest hit in a run record, if later."""
    out = []
    for u in units:
        hit = uses[u.name].last_hit_ns if u.name in uses else 0
        out.append(Unit(u.entry, u.sidecars, hit, Clock.RECORD) if hit > u.last_used_ns else u)
    return out


def choose(units: list[Unit], total_bytes: int, *, max_size: int | None,
           max_age_s: float | None, now_ns: int, order: Order = Order.LRU,
           uses: Mapping[str, KeyUse] | None = None, keep: frozenset[str] = frozenset()
           ) -> Plan:
    """The plan for `units` (those gc may delete) of a directory holding `total_bytes`;
    `uses` (gc/usage.py) for Order.VALUE; `keep`: names never to evict."""
    if max_size is None and max_age_s is None:
        raise ValueError("give max_size or max_age_s")
    kept_bytes = sum(u.size for u in units if u.name in keep) if keep else 0
    if keep:
        units = [u for u in units if u.name not in keep]
    # now - last use > max_age, in whole nanoseconds (floor: exact for a fractional age)
    old_ns = math.floor(max_age_s * 1e9) if max_age_s is not None else None
    if old_ns is not None and max_size is None:  # only the old go: only they are ordered
        cutoff = now_ns - old_ns
        units = [u for u in units if u.last_used_ns < cutoff]
    if order is Order.VALUE:
        known = uses or {}
        queue = sorted(units, key=lambda u: (value(known.get(u.name), u.size),
                                             u.last_used_ns, u.name))
    else:
        queue = sorted(units, key=_BY_USE)  # in C: a big cache has 100,000 units
    evict: list[tuple[Unit, bool]] = []  # (unit, went for its age)
    held = total_bytes
    for u in queue:
        aged = old_ns is not None and now_ns - u.last_used_ns > old_ns
        if aged or (max_size is not None and held > max_size):
            evict.append((u, aged))
            held -= u.size
        elif order is Order.LRU:
            break  # the rest is used later still, and the size holds: none of it goes
    if max_size is not None and held <= max_size:
        # the last to go first: the most recently used (with Order.VALUE, the most valuable)
        for i in range(len(evict) - 1, -1, -1):
            u, aged = evict[i]
            if not aged and held + u.size <= max_size:
                del evict[i]
                held += u.size
    over = max(0, held - max_size) if max_size is not None else 0
    return Plan(tuple(u for u, _ in evict), total_bytes, held, over, kept_bytes)


_BY_USE = operator.attrgetter("last_used_ns", "entry.name")
