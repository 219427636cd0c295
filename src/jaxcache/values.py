"""Frozen value classes at a fraction of dataclasses' start-up cost.

Every millisecond before the job starts is a millisecond on its start (`jaxcache run` audits,
then starts the job).
On a 2-core machine importing `dataclasses` costs ~9 ms (it imports inspect, ast, dis and
tokenize) and each `@dataclass(frozen=True)` ~0.7 ms more (it compiles six functions, one
`exec` each); the run path defines over thirty. `@frozen` makes the same class (__init__ with
defaults, `field(default_factory=...)` and __post_init__; __repr__, __eq__, __hash__ over the
fields; assignment refused; `@ordered` adds the comparisons) compiling only __init__ (~0.1
ms, once per shape of fields, and only when the class first makes a value: `run` defines ~60
classes, uses ~40 of 18 shapes; the comparisons and hash read the fields through one
attrgetter, __repr__ is shared), and the class is still a dataclass to `dataclasses.asdict`,
`replace` and `fields`: its field list is made on first use, from a real dataclass of the
same fields (only reports and a few edits ask, never `run`'s path). Type checkers see
dataclass semantics (PEP 681).
"""

from __future__ import annotations

from operator import attrgetter, eq, ge, gt, le, lt  # imported by collections already

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import CodeType
    from typing import Any, TypeVar

    from typing_extensions import dataclass_transform  # typing's only from Python 3.11

    T = TypeVar("T")
    # A JSON object as a document holds it, where no typed model reads it yet (issue 43:
    # these shrink as models take over); for type checkers only, like everything here.
    JsonObject = dict[str, Any]

__all__ = ["FrozenInstanceError", "field", "frozen", "ordered"]


class FrozenInstanceError(AttributeError):
    """An assignment to (or deletion of) a field of a frozen value."""


class _Factory:
    __slots__ = ("make",)

    def __init__(self, make: Callable[[], object]) -> None:
        self.make = make


_MISSING = object()
_OWN = ("__setattr__", "__delattr__")  # a frozen class may not bring its own (as dataclasses)
_SHARED = ("__repr__", *_OWN)  # one function for every class: keeps the name it was defined with
_INIT = "__init__"


def field(*, default_factory: Callable[[], T]) -> T:
    """A field whose default is made anew for each value (dataclasses.field's default_factory:
    a shared mutable default would be one object for every value)."""
    return _Factory(default_factory)  # type: ignore[return-value]


class _Fields:
    """`__dataclass_fields__`, made when first asked for (dataclasses.asdict, replace, fields):
    a real dataclass of the same fields is defined once and its field list taken."""

    def __init__(self, names: tuple[str, ...], defaults: dict[str, object]) -> None:
        self.names, self.defaults = names, defaults

    def __get__(self, obj: object, owner: type) -> dict[str, Any]:
        import dataclasses

        body: dict[str, object] = {
            "__annotations__": {n: owner.__annotations__[n] for n in self.names},
            "__module__": owner.__module__, "__qualname__": owner.__qualname__}
        for name, value in self.defaults.items():
            body[name] = dataclasses.field(default_factory=value.make) \
                if isinstance(value, _Factory) else value
        made: Any = dataclasses.dataclass(frozen=True)(type(owner.__name__, (), body))
        fields: dict[str, Any] = made.__dataclass_fields__
        type.__setattr__(owner, "__dataclass_fields__", fields)  # asked once
        return fields


def _none(value: object) -> tuple[object, ...]:
    return ()


def _compare(get: Callable[[object], object], op: Callable[[Any, Any], Any]
             ) -> Callable[[object, object], object]:
    """__eq__ (or __lt__ ...): the fields compared in order, within one class only."""
    def method(self: object, other: object) -> object:
        if other.__class__ is self.__class__:
            return op(get(self), get(other))
        return NotImplemented
    return method


def _hash(get: Callable[[object], object]) -> Callable[[object], int]:
    def method(self: object) -> int:
        return hash(get(self))
    return method


def _repr(self: object) -> str:
    names: tuple[str, ...] = getattr(self, "__match_args__", ())
    return (type(self).__qualname__ + "("
            + ", ".join(f"{n}={getattr(self, n)!r}" for n in names) + ")")


def _refuse_set(self: object, name: str, value: object) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _refuse_delete(self: object, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


# __init__'s code by shape: (fields, the positions of those with a factory, stored in the
# instance's dict, with __post_init__), over the placeholder names f0, f1, ...; a class takes
# its shape's code with its own names put in (CodeType.replace): one compile per shape, not
# per class (~0.1 ms each, and `run` makes values of ~40 classes of ~15 shapes)
_SHAPES: dict[tuple[int, tuple[int, ...], bool, bool], CodeType] = {}


def shape_source(count: int, factories: tuple[int, ...], plain: bool, post: bool,
                 name: str = _INIT, typed: bool = False) -> str:
    """The source of __init__ for a shape (see _SHAPES), as a function called `name` (`typed`:
    its parameters annotated, for the type checker of value_shapes.py)."""
    body = ["    _s = self.__dict__"] if plain and count else []
    for i in range(count):
        value = f"_f_f{i}() if f{i} is _MISSING else f{i}" if i in factories else f"f{i}"
        body.append(f"    _s['f{i}'] = {value}" if plain else f"    _set(self, 'f{i}', {value})")
    if post:
        body.append("    self.__post_init__()")
    kind = ": object" if typed else ""
    params = "".join(f", f{i}{kind}" for i in range(count))
    returns = " -> None" if typed else ""
    return "\n".join([f"def {name}(self{kind}{params}){returns}:",
                      *(body or ["    pass"])]) + "\n"


PLAIN_SHAPES = 25  # value_shapes.py holds the plain shapes of 0 to 24 fields, compiled ahead


def _shape_code(count: int, factories: tuple[int, ...], plain: bool, post: bool) -> CodeType:
    key = (count, factories, plain, post)
    code = _SHAPES.get(key)
    if code is None:
        if plain and not factories and not post and count < PLAIN_SHAPES:
            from jaxcache import value_shapes

            made = getattr(value_shapes, f"_plain_{count}").__code__
            code = made.replace(co_name=_INIT, co_qualname=_INIT)
        else:
            env: dict[str, object] = {}
            exec(shape_source(count, factories, plain, post), env)  # noqa: S102 (placeholder
            code = env[_INIT].__code__  # type: ignore[attr-defined]  # names only: our own)
        _SHAPES[key] = code
    return code


def _compiled_when_made(cls: type, names: tuple[str, ...], factories: tuple[int, ...],
                        plain: bool, post: bool, argdefs: tuple[object, ...],
                        env: dict[str, object]) -> Callable[..., None]:
    """__init__ made when the class first makes a value, then in its place (of the ~60
    classes `jaxcache run` defines before and beside the job ~25 never make one there): its
    shape's code (_shape_code) with the field names put in for the placeholders, as
    parameters and as the keys it stores under; defaults as the function's own."""
    def __init__(self: object, *args: object, **kwargs: object) -> None:
        made: Any = vars(cls)[_INIT]
        if made is __init__:  # not yet made (by another thread, meanwhile)
            from types import FunctionType  # loaded already (functools imports it)

            code = _shape_code(len(names), factories, plain, post)
            rename = {f"f{i}": name for i, name in enumerate(names)}
            code = code.replace(
                co_varnames=tuple(rename.get(n, n) for n in code.co_varnames),
                co_consts=tuple(rename.get(c, c) if isinstance(c, str) else c
                                for c in code.co_consts))
            made = FunctionType(code, env, _INIT, argdefs or None)
            made.__qualname__, made.__module__ = __init__.__qualname__, __init__.__module__
            type.__setattr__(cls, "__init__", made)
        made(self, *args, **kwargs)
    return __init__


def _make(cls: type, order: bool) -> type:
    own, what = cls.__dict__, cls.__qualname__
    names = tuple(n for n, t in own.get("__annotations__", {}).items()
                  if not str(t).startswith(("ClassVar", "typing.ClassVar")))
    # refused rather than half-made: what the generated code could not do as dataclasses do
    for name in _OWN:
        if name in own:
            raise TypeError(f"frozen class {what} defines {name}")
    if any("__dataclass_fields__" in vars(base) for base in cls.__mro__[1:]):
        raise TypeError(f"frozen class {what} derives from a dataclass: its fields would be lost")
    for name in names:
        if name.startswith("_") or name in ("self", "other"):
            raise TypeError(f"field {name!r} of {what}: a name the generated methods use")
        if name in own and not isinstance(own[name], _Factory) \
                and type(own[name]).__hash__ is None:
            raise TypeError(f"mutable default for field {name!r} of {what}: use "
                            "field(default_factory=...)")
    env: dict[str, object] = {"_set": object.__setattr__, "_MISSING": _MISSING}
    defaults: dict[str, object] = {}
    factories: list[int] = []
    argdefs: list[object] = []
    # fields are stored in the instance's dict, past the refusing __setattr__: twice as fast
    # as object.__setattr__ per field (gc builds 100,000 Entry values); a class with slots
    # and no dict stores through object.__setattr__, as dataclasses do
    plain = all("__slots__" not in vars(c) for c in cls.__mro__[:-1])
    for i, name in enumerate(names):
        if name in own:
            value = defaults[name] = own[name]
            if isinstance(value, _Factory):
                env[f"_f_f{i}"] = value.make
                factories.append(i)
                argdefs.append(_MISSING)
                delattr(cls, name)
                continue
            argdefs.append(value)
        elif defaults:
            raise TypeError(f"non-default field {name!r} of {what} follows a default one")
    # only __init__ is made per class (gc builds 100,000 values: it must be fast); the
    # comparisons and the hash read the fields through one C attrgetter, and __repr__ and the
    # refusals are shared functions: compiling them per class cost ~0.1 ms a class on run's path
    env[_INIT] = _compiled_when_made(cls, names, tuple(factories), plain,
                                     "__post_init__" in own, tuple(argdefs), env)
    # one field: its value itself (attrgetter of one name), compared and hashed as well as a
    # 1-tuple would be, within one class
    get = attrgetter(*names) if names else _none
    env.update(__repr__=_repr, __setattr__=_refuse_set, __delattr__=_refuse_delete,
               __eq__=_compare(get, eq), __hash__=_hash(get))
    made = ["__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__"]
    if order:
        for op, method in ((lt, "__lt__"), (le, "__le__"), (gt, "__gt__"), (ge, "__ge__")):
            env[method] = _compare(get, op)
            made.append(method)
    explicit_hash = own.get("__hash__") is not None
    for method in made:  # what the class defines itself stays (as with dataclasses)
        if not explicit_hash if method == "__hash__" else method not in own or method in _OWN:
            function = env[method]
            if method not in _SHARED:  # a shared function keeps its own names
                function.__qualname__ = f"{what}.{method}"  # type: ignore[attr-defined]
                function.__module__ = cls.__module__
            setattr(cls, method, function)
    setattr(cls, "__match_args__", names)  # noqa: B010 (a class attribute type checkers
    setattr(cls, "__dataclass_fields__", _Fields(names, defaults))  # noqa: B010 know of)
    return cls


if TYPE_CHECKING:
    @dataclass_transform(frozen_default=True, field_specifiers=(field,))
    def frozen(cls: type[T]) -> type[T]: ...

    @dataclass_transform(frozen_default=True, order_default=True, field_specifiers=(field,))
    def ordered(cls: type[T]) -> type[T]: ...
else:
    def frozen(cls):
        """@dataclass(frozen=True), made in one exec."""
        return _make(cls, False)

    def ordered(cls):
        """@dataclass(frozen=True, order=True), made in one exec."""
        return _make(cls, True)
