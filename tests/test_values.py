"""@frozen and @ordered (values.py): the frozen dataclass `jaxcache run`'s path is built of,
made in one exec. What dataclasses gave these classes must hold: construction with defaults
and factories, __post_init__, no assignment, equality and hashing by fields, ordering, and
dataclasses.asdict / replace / fields on them (the reports and a few edits use those)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from jaxcache.values import FrozenInstanceError, field, frozen, ordered


@frozen
class Point:
    x: int
    label: str = "p"
    tags: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        object.__setattr__(self, "label", self.label.strip())


@frozen
class Outer:
    inner: Point
    others: tuple[Point, ...] = ()


@ordered
class Rank:
    kind: str
    n: int


def test_construction_defaults_factories_and_post_init():
    a, b = Point(1), Point(2, " q ", ["t"])
    assert (a.x, a.label, a.tags) == (1, "p", [])
    assert (b.x, b.label, b.tags) == (2, "q", ["t"])
    assert Point(1).tags is not Point(1).tags  # a factory makes one per value
    assert Point(x=3, label="k") == Point(3, "k")
    with pytest.raises(TypeError):
        Point()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Point(1, "a", [], "extra")  # type: ignore[call-arg]


def test_frozen():
    p = Point(1)
    with pytest.raises(FrozenInstanceError):
        p.x = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del p.label  # type: ignore[misc]
    assert p.x == 1


def test_a_class_with_slots_is_made_without_an_instance_dict():
    """Fields go into the instance dict where there is one (the fast path); a class whose
    instances have none (slots) is set through object.__setattr__ and stays frozen."""

    @frozen
    class Slotted:
        __slots__ = ("a", "b")
        a: int
        b: str

    s = Slotted(1, "x")
    assert (s.a, s.b) == (1, "x") and not hasattr(s, "__dict__")
    with pytest.raises(FrozenInstanceError):
        s.a = 2  # type: ignore[misc]
    plain = Point(3)
    assert vars(plain) == {"x": 3, "label": "p", "tags": []}


def test_equality_hash_and_repr_by_fields():
    assert Point(1, "a") == Point(1, "a") and Point(1, "a") != Point(1, "b")
    assert hash(Rank("a", 1)) == hash(Rank("a", 1))
    assert len({Rank("a", 1), Rank("a", 1), Rank("a", 2), Rank("b", 1)}) == 3
    with pytest.raises(TypeError):
        hash(Point(1))  # a list among the fields: unhashable, as a dataclass's would be
    assert Point(1) != (1, "p", [])  # another class is never equal, even with equal fields
    assert repr(Point(1, "a")) == "Point(x=1, label='a', tags=[])"
    assert Point.__init__.__qualname__ == "Point.__init__"  # tracebacks name the class


def test_ordered():
    ranks = [Rank("b", 1), Rank("a", 2), Rank("a", 1)]
    assert sorted(ranks) == [Rank("a", 1), Rank("a", 2), Rank("b", 1)]
    assert Rank("a", 1) < Rank("a", 2) <= Rank("a", 2) and Rank("b", 0) > Rank("a", 9)
    with pytest.raises(TypeError):
        _ = Point(1) < Point(2)  # type: ignore[operator]  # @frozen alone has no order


def test_dataclasses_functions_see_a_dataclass():
    o = Outer(Point(1, "a", ["t"]), (Point(2),))
    assert dataclasses.is_dataclass(o)
    assert [f.name for f in dataclasses.fields(Point)] == ["x", "label", "tags"]
    assert dataclasses.asdict(o) == {"inner": {"x": 1, "label": "a", "tags": ["t"]},
                                     "others": ({"x": 2, "label": "p", "tags": []},)}
    moved = dataclasses.replace(o.inner, x=5)
    assert moved == Point(5, "a", ["t"]) and o.inner.x == 1
    assert dataclasses.replace(Point(1), label=" z ").label == "z"  # __post_init__ ran


def test_what_a_class_defines_itself_stays():
    @frozen
    class Loose:
        a: int

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Loose)

        __hash__ = object.__hash__

    assert Loose(1) == Loose(2)
    x = Loose(1)
    assert hash(x) == object.__hash__(x)


def test_mistakes_are_refused_when_the_class_is_made():
    with pytest.raises(TypeError, match="follows a default"):
        @frozen
        class Bad:
            a: int = 1
            b: int  # type: ignore[misc]

    with pytest.raises(TypeError, match="mutable default"):
        @frozen
        class Shared:
            xs: list[int] = []  # noqa: RUF012 (the mistake refused)

    with pytest.raises(TypeError, match="the generated methods use"):
        @frozen
        class Clash:
            _set: int

    with pytest.raises(TypeError, match="derives from a dataclass"):
        @frozen
        class Sub(Point):
            y: int = 0

    with pytest.raises(TypeError, match="defines __setattr__"):
        @frozen
        class Thawed:
            a: int

            def __setattr__(self, name: str, value: object) -> None:
                pass


def test_jaxcache_run_imports_no_dataclasses(tmp_path):
    """The reason for this module: `jaxcache run` (parser, audit, job, record) never imports
    dataclasses (and with it inspect, ast, dis, tokenize): ~30 ms of start-up on 2 cores."""
    cache = tmp_path / "c"
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "jaxcache", "run", "-q", "--cache-dir",
         str(cache), "--record", str(tmp_path / "r.json"), "--", sys.executable, "-c", "pass"],
        capture_output=True, text=True, env={"PATH": "/usr/bin:/bin",
                                             "XDG_STATE_HOME": str(tmp_path / "state")})
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert {"jaxcache.trust.judgement.audit", "jaxcache.records.run_record"} <= imported
    assert {"dataclasses", "inspect"} & imported == set()


def test_the_shapes_compiled_ahead_are_the_ones_values_would_compile():
    """value_shapes.py is generated from values.shape_source (scripts/value_shapes.py): each
    of its functions behaves as the one compiled on first use, and the file is current."""
    from jaxcache import value_shapes, values

    check = subprocess.run([sys.executable, "scripts/value_shapes.py", "--check"],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    for count in range(values.PLAIN_SHAPES):
        ahead = getattr(value_shapes, f"_plain_{count}").__code__
        env: dict[str, object] = {}
        exec(values.shape_source(count, (), True, False), env)  # noqa: S102
        fresh = env["__init__"].__code__  # type: ignore[attr-defined]
        assert (ahead.co_code, ahead.co_consts, ahead.co_varnames) == \
            (fresh.co_code, fresh.co_consts, fresh.co_varnames)


@frozen
class Wide:
    a: int
    b: int = 2
    c: str = "c"


def test_a_class_of_a_shape_compiled_ahead_binds_as_before():
    assert Wide(1) == Wide(1, 2, "c") and Wide(1, c="z").c == "z"
    with pytest.raises(TypeError):
        Wide()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Wide(1, 2, "c", 4)  # type: ignore[call-arg]
    assert Wide.__init__.__code__.co_varnames[:4] == ("self", "a", "b", "c")
