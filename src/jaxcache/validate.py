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

# The shape of TOML text, bounded before the parser reads it. tomllib's work on one dotted key
# (`a.b.c = 1`) grows with the square of its parts: a 30 KB key of 15,000 parts costs seconds
# and ~0.9 GB, 60 KB ~20 s and ~3.5 GB, before MAX_DEPTH could refuse the result. The policy and
# the project file nest 4 levels at most, their keys a word or two: these are far above any
# legitimate file, and each is refused with the line it is on.
MAX_KEY_PARTS = 32  # the dotted parts of one key (a.b.c has 3)
MAX_KEY_CHARS = 1024  # the text of one key, its dots and quotes included
MAX_TOML_BYTES = 1 << 20  # what the policy's and the project file's readers already read at most

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
    """Bytes that are not a document at all (not UTF-8, not JSON or TOML, too deep, TOML past
    its bounds); the message is the reason, one line, safe to print."""


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
    """A TOML document from bytes, under the same rules as parse_json, its shape bounded before
    the parser reads it (toml_shape). The one TOML parse of every file jaxcache reads."""
    import tomllib

    if len(data) > MAX_TOML_BYTES:
        raise Unreadable(f"larger than {MAX_TOML_BYTES >> 20} MiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Unreadable("not UTF-8 text") from None
    toml_shape(text)
    try:
        doc = tomllib.loads(text)
    except RecursionError:
        raise Unreadable(f"nested more than {MAX_DEPTH} deep") from None
    except tomllib.TOMLDecodeError as exc:
        raise Unreadable(f"not valid TOML: {safe(str(exc))}") from None
    except ValueError as exc:  # tomllib's int() on a huge number, and the like
        raise Unreadable(f"not valid TOML: {safe(str(exc))}") from None
    if not depth_ok(doc):
        raise Unreadable(f"nested more than {MAX_DEPTH} deep")
    return doc


# The text up to the next mark of TOML's structure (a bracket or brace, `=`, `,`, `.`, a new
# line), or to a quote that opens no whole string (the parser stops there), or to the end. The
# text skipped is strings (a multi-line one first, which up to two more quotes still close),
# comments and anything else. Each string is an unrolled loop (its ordinary characters, then
# an escape or a lone quote and more ordinary ones): linear even when it never closes.
_TOML_MARK = r"""
    (?: \"\"\"[^"\\]*(?:(?:\\[\s\S]|"(?!""))[^"\\]*)*\"\"\"\"{0,2}
      | '''[^']*(?:'(?!'')[^']*)*''''{0,2}
      | "[^"\\\n]*(?:\\.[^"\\\n]*)*"
      | '[^'\n]*'
      | \#[^\n]*
      | [^][{}=,.\n"'\#]+
    )* (?P<mark> [][{}=,.\n] | ["'] | \Z )
"""


def toml_shape(text: str) -> None:
    """Unreadable, naming the line, for TOML text shaped to make the parser's work grow faster
    than the text: a key of more than MAX_KEY_PARTS dotted parts or MAX_KEY_CHARS characters,
    arrays and inline tables nested more than MAX_DEPTH deep. One pass over the marks outside
    strings and comments. Dots are counted between two other marks, which a key never spans
    and a value holds one of at most (1.5); a key is the text before `=` or in a [header]."""
    import re

    nest: list[str] = []  # the arrays and inline tables open here
    value = header = False  # after a top-level `=` until the line ends; inside a [header]
    start = dots = 0  # where the text since the last mark but a dot starts; its dots
    for found in re.finditer(_TOML_MARK, text, re.VERBOSE):
        mark, at = found.group("mark"), found.start("mark")
        if not mark or mark in "\"'":
            return  # the end, or a string that never closes: the parser refuses it there
        if mark == ".":
            dots += 1
            if dots >= MAX_KEY_PARTS:
                raise Unreadable(f"not read: line {_line(text, at)} holds a key of more than "
                                 f"{MAX_KEY_PARTS} dotted parts")
            continue
        if (mark == "=" or (mark == "]" and header)) and len(
                text[start:at].strip(" \t")) > MAX_KEY_CHARS:
            raise Unreadable(f"not read: line {_line(text, at)} holds a key longer than "
                             f"{MAX_KEY_CHARS} characters")
        if mark in "[{" and (value or nest):
            nest.append(mark)
            if len(nest) > MAX_DEPTH:
                raise Unreadable(f"nested more than {MAX_DEPTH} deep (line {_line(text, at)})")
        elif mark == "[":
            header = True  # [table] or [[array]]: a key up to the first `]`
        elif mark in "]}" and nest:
            nest.pop()
        elif mark == "]":
            header = False
        elif mark == "=" and not nest:
            value = True
        elif mark == "\n" and not nest:
            value = header = False
        start, dots = at + 1, 0


def _line(text: str, at: int) -> int:
    return text.count("\n", 0, at) + 1


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
