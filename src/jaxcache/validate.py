"""Typed checks of the JSON documents jaxcache reads back, one line naming the field.

jsonschema is only a test extra, and a reader needs less than a schema: the fields a command
uses, with the types it uses them as. Extra fields are accepted (a newer writer may add some);
a field a command relies on that is missing or of the wrong type is named with its path, e.g.
`modules[3].compile_s_logged must be a number or null`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from jaxcache.text import safe

# Deeper than any document jaxcache writes (a run record nests 6 levels; a policy 4): a
# writer's deeper nesting is refused before any reader walks it, so no reader can recurse
# into the interpreter's limit (RecursionError) on a planted document.
MAX_DEPTH = 32

# Beyond this a number is nonsense for seconds, bytes or counts, and formatting it as a float
# could overflow; JSON allows any size, Python reads any size.
MAX_NUMBER = 1e18


class Invalid(ValueError):
    """The document at `where` is not what its reader relies on."""

    def __init__(self, where: str, want: str) -> None:
        self.where, self.want = where, want
        super().__init__(f"{where or 'the document'} must be {want}")


Check = Callable[[object, str], None]


class Unreadable(ValueError):
    """Bytes that are not a document at all (not UTF-8, not JSON or TOML, too deep); the
    message is the reason, one line, safe to print."""


def depth_ok(doc: object, limit: int = MAX_DEPTH) -> bool:
    """No list or object nested deeper than `limit`, walked without recursion."""
    stack = [(doc, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            node = node.values()
        elif not isinstance(node, list):
            continue
        if depth >= limit:
            return False
        stack.extend((child, depth + 1) for child in node)
    return True


def parse_json(data: bytes) -> object:
    """A JSON value from bytes a writer controls: UTF-8, nested at most MAX_DEPTH deep, or
    Unreadable with the reason. The one JSON parse of every document jaxcache reads back."""
    import json

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Unreadable("not UTF-8 text") from None
    try:
        doc = json.loads(text)
    except RecursionError:
        raise Unreadable(f"nested more than {MAX_DEPTH} deep") from None
    except json.JSONDecodeError as exc:
        where = "empty" if not text.strip() else f"line {exc.lineno}, column {exc.colno}"
        raise Unreadable(f"not JSON ({where})") from None
    except ValueError as exc:  # e.g. an integer longer than Python converts
        raise Unreadable(f"not JSON ({safe(str(exc))})") from None
    if not depth_ok(doc):
        raise Unreadable(f"nested more than {MAX_DEPTH} deep")
    return doc


def parse_toml(data: bytes) -> dict[str, object]:
    """A TOML document from bytes, under the same rules as parse_json."""
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise Unreadable("not UTF-8 text") from None
    except RecursionError:
        raise Unreadable(f"nested more than {MAX_DEPTH} deep") from None
    except tomllib.TOMLDecodeError as exc:
        raise Unreadable(f"not valid TOML: {safe(str(exc))}") from None
    except ValueError as exc:  # tomllib's int() on a huge number, and the like
        raise Unreadable(f"not valid TOML: {safe(str(exc))}") from None
    if not depth_ok(doc):
        raise Unreadable(f"nested more than {MAX_DEPTH} deep")
    return doc


def _type(want: str, ok: Callable[[object], bool]) -> Check:
    def check(value: object, where: str) -> None:
        if not ok(value):
            raise Invalid(where, want)
    check.__dict__["want"] = want
    return check


def _is_number(v: object) -> bool:
    # abs(v) <= MAX_NUMBER is False for nan and infinities (no math.isfinite: math costs
    # `jaxcache run` an import, and it raised OverflowError on an integer past a float's range)
    return isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) <= MAX_NUMBER


NUMBER = _type("a number", _is_number)
INTEGER = _type("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)
                and abs(v) <= MAX_NUMBER)
TEXT = _type("a string", lambda v: isinstance(v, str))
BOOLEAN = _type("true or false", lambda v: isinstance(v, bool))
ANY = _type("anything", lambda v: True)


def nullable(check: Check) -> Check:
    want = f"{_want(check)} or null"

    def checked(value: object, where: str) -> None:
        if value is None:
            return
        try:
            check(value, where)
        except Invalid as exc:
            if exc.where == where and exc.want == _want(check):  # the value's own type
                raise Invalid(where, want) from None
            raise
    checked.__dict__["want"] = want
    return checked


def one_of(*values: str) -> Check:
    return _type("one of " + ", ".join(values), lambda v: isinstance(v, str) and v in values)


def list_of(item: Check) -> Check:
    def check(value: object, where: str) -> None:
        if not isinstance(value, list):
            raise Invalid(where, f"a list of {_plural(item)}")
        for i, v in enumerate(value):
            item(v, f"{where}[{i}]")
    check.__dict__["want"] = f"a list of {_plural(item)}"
    return check


def map_of(value_check: Check) -> Check:
    """An object whose keys are free (names chosen by the writer) and whose values are typed."""
    def check(value: object, where: str) -> None:
        if not isinstance(value, dict):
            raise Invalid(where, "an object")
        for k, v in value.items():
            value_check(v, f"{where}.{safe(k)}" if where else safe(k))
    check.__dict__["want"] = "an object"
    return check


def obj(required: Mapping[str, Check] | None = None,
        optional: Mapping[str, Check] | None = None) -> Check:
    """An object with these fields; others are accepted and left alone."""
    required, optional = dict(required or {}), dict(optional or {})

    def check(value: object, where: str) -> None:
        if not isinstance(value, dict):
            raise Invalid(where, "an object")
        for key, field in required.items():
            here = f"{where}.{key}" if where else key
            if key not in value:
                raise Invalid(here, f"present ({_want(field)})")
            field(value[key], here)
        for key, field in optional.items():
            if key in value:
                field(value[key], f"{where}.{key}" if where else key)
    check.__dict__["want"] = "an object"
    return check


def both(first: Check, then: Callable[[object, str], None]) -> Check:
    """`first`, and then a rule across fields (`then` raises Invalid)."""
    def check(value: object, where: str) -> None:
        first(value, where)
        then(value, where)
    check.__dict__["want"] = _want(first)
    return check


def _want(check: Check) -> str:
    """What a check wants, for messages: each check made here carries it as an attribute
    of the function (set through its __dict__, which type checkers know functions have)."""
    return getattr(check, "want", "valid")


def _plural(check: Check) -> str:
    want = _want(check)
    for article in ("an ", "a "):
        if want.startswith(article):
            return want[len(article):] + "s"
    return want
