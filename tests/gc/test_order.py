"""The order gc evicts in: least recently used, or least compile time saved per byte and run
(gc/plan.py with gc/usage.py), with hits in run records moving an entry's last use."""

from __future__ import annotations

import random

from jaxcache.gc import plan
from jaxcache.gc.units import Unit
from jaxcache.gc.usage import KeyUse
from jaxcache.trust.kernel.entries import Entry

DAY_NS = 86_400 * 10**9


def _unit(name: str, size: int, used_ns: int) -> Unit:
    e = Entry(f"{name}-{'0' * 64}-cache", "cache", name, "0" * 64, "file", size, 0, "me",
              0o600, 0.0, 1, False, (), (), (1, 2, used_ns, used_ns))
    return Unit(e, (), used_ns)


def test_value_keeps_what_saves_most_per_byte_and_run_and_lru_keeps_the_recent():
    now = 100 * DAY_NS
    a = _unit("a", 1000, now - 1 * DAY_NS)  # recent, cheap to compile
    b = _unit("b", 1000, now - 9 * DAY_NS)  # old, expensive, asked by many runs
    c = _unit("c", 4000, now - 5 * DAY_NS)  # expensive but big
    d = _unit("d", 10, now - 2 * DAY_NS)  # no record shows it compiled: worth unknown
    uses = {a.name: KeyUse(0, 0.5, 1), b.name: KeyUse(0, 20.0, 5), c.name: KeyUse(0, 20.0, 1)}
    units = [a, b, c, d]
    total = sum(u.size for u in units)
    lru = plan.choose(units, total, max_size=total - 1, max_age_s=None, now_ns=now)
    assert [u.name for u in lru.evict] == [b.name]  # the oldest use
    val = plan.choose(units, total, max_size=2000, max_age_s=None, now_ns=now,
                      order=plan.Order.VALUE, uses=uses)
    # d (unknown: 0), a (0.5 s / 1000 B), c (20 s / 4000 B) in that order until the size
    # holds; b (100 s per 1000 B) stays, and so does a, which fits back under the limit
    assert [u.name for u in val.evict] == [d.name, c.name]
    assert val.after_bytes == 2000 and val.over_by == 0
    # an age limit still takes what is old, whatever its value
    aged = plan.choose(units, total, max_size=None, max_age_s=8 * 86_400, now_ns=now,
                       order=plan.Order.VALUE, uses=uses)
    assert [u.name for u in aged.evict] == [b.name]


def test_a_hit_in_a_record_is_a_use():
    now = 100 * DAY_NS
    old = _unit("a", 10, now - 40 * DAY_NS)
    moved = plan.with_hits([old], {old.name: KeyUse(now - DAY_NS, 1.0, 2)})
    assert moved[0].last_used_ns == now - DAY_NS
    assert plan.with_hits([old], {old.name: KeyUse(now - 50 * DAY_NS)})[0] is old  # earlier
    got = plan.choose(moved, 10, max_size=None, max_age_s=30 * 86_400, now_ns=now)
    assert got.evict == ()


def _reference(units: list[Unit], total: int, max_size: int | None, max_age_s: float | None,
               now: int) -> list[str]:
    """The plan's rule written plainly (docs/reference/gc.md): oldest use first (ties by name), a
    unit goes if it is older than the age or the directory is still over the size; then, the
    last to go first, one that went for the size alone and fits back under it stays."""
    out, held = [], total
    for u in sorted(units, key=lambda u: (u.last_used_ns, u.name)):
        old = max_age_s is not None and now - u.last_used_ns > max_age_s * 1e9
        if old or (max_size is not None and held > max_size):
            out.append((u, old))
            held -= u.size
    for u, old in reversed(list(out)):
        if max_size is not None and not old and held + u.size <= max_size:
            out.remove((u, old))
            held += u.size
    return [u.name for u, _ in out]


def test_gc_frees_no_more_than_the_limit_needs():
    """A small old entry beside a large newer one: the large one alone brings the directory
    under the limit, so the small one stays (plain LRU deleted both)."""
    now = 100 * DAY_NS
    small = _unit("init_params", 50_000, now - 3 * DAY_NS)
    large = _unit("train_step", 450_000, now - 2 * DAY_NS)
    recent = _unit("eval_step", 365_000, now - DAY_NS)
    units = [small, large, recent]
    total = sum(u.size for u in units)  # 865,000
    got = plan.choose(units, total, max_size=700_000, max_age_s=None, now_ns=now)
    assert [u.name for u in got.evict] == [large.name]
    assert got.after_bytes == 415_000 and got.over_by == 0
    # where the oldest alone is enough, only it goes, as before
    got = plan.choose(units, total, max_size=820_000, max_age_s=None, now_ns=now)
    assert [u.name for u in got.evict] == [small.name]
    # an entry past the age goes whatever the size (it is never given back)
    got = plan.choose(units, total, max_size=700_000, max_age_s=2.5 * 86_400, now_ns=now)
    assert [u.name for u in got.evict] == [small.name, large.name]


def test_the_fast_plan_is_the_plain_rule_on_random_caches():
    """choose() stops at the first unit that stays and filters by age before sorting (a big
    cache has 100,000 units): the same plan as the plain rule, ties and edges included."""
    rng = random.Random(41)
    now = 100 * DAY_NS
    for _ in range(300):
        units = [_unit(f"m{i}", rng.choice((1, 10, 100, 1000)),
                       now - rng.choice((0, 1, 2, 30, 31)) * DAY_NS - rng.choice((0, 0, 1)))
                 for i in range(rng.randrange(0, 30))]
        total = sum(u.size for u in units) + rng.choice((0, 50))  # files gc may not delete
        max_size = rng.choice((None, 0, total // 2, total))
        max_age = rng.choice((None, 30 * 86_400, 30 * 86_400 + 1e-9, 1.5 * 86_400)) \
            if max_size is not None else rng.choice((30 * 86_400, 1.5 * 86_400, 0.0))
        got = plan.choose(list(units), total, max_size=max_size, max_age_s=max_age,
                          now_ns=now)
        assert [u.name for u in got.evict] == _reference(units, total, max_size, max_age, now)
        assert got.after_bytes == total - sum(u.size for u in got.evict)
