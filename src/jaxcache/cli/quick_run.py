"""The usual `jaxcache run` command line, read without argparse.

argparse's import and the building of run's parser cost ~5 ms before the user's job starts,
a good part of what `run` may add to it. The lines most runs use are read here into the
namespace argparse would give: the flags below, each written out in full and a value as the
next word, the command after `--` or from the first word that is not an option (argparse's
REMAINDER). Anything else (help, --opt=value, a short flag cluster, a value that starts with
`-`, a choice not offered, any other flag) returns None and argparse reads the line as
before, errors and help included; so does a usage error found later (args.parser builds
argparse's parser then). tests/cli/test_quick_run.py holds the two readers to one namespace.
"""

from __future__ import annotations

from types import SimpleNamespace

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from typing import NoReturn

# the flags read here and their destinations: switches (store_true), then those with a value
SWITCHES = {"-q": "quiet", "--quiet": "quiet", "-v": "verbose", "--verbose": "verbose",
            "--allow-untrusted": "allow_untrusted", "--require-origin": "require_origin",
            "--unverified-jax": "unverified_jax", "--sealed": "sealed"}
VALUES = {"--cache-dir": "cache_dir", "--record": "record_path", "--policy": "policy_path",
          "--namespace": "namespace", "--max-size": "max_size", "--max-age": "max_age",
          "--signing-key": "signing_key", "--local": "local", "--color": "color"}
GLOBAL = ("-q", "--quiet", "-v", "--verbose", "--color")  # also before the command's name


def defaults() -> dict[str, object]:
    """run's own options as argparse leaves them when not given (the global flags are left
    out, as argparse's SUPPRESS does)."""
    from jaxcache.trust.rules import namespace

    return {"command": [], "cache_dir": None, "namespace": namespace.NONE, "record_path": None,
            "policy_path": None, "allow_untrusted": False, "require_origin": False,
            "max_size": None, "max_age": None, "unverified_jax": False,
            "min_compile_time": None, "min_entry_size": None, "sealed": False,
            "signing_key": None, "trusted_keys": None, "local": None, "identity": None,
            "sigstore_config": None, "prefetch": True, "prefetch_from": None,
            "prefetch_workers": 8, "prefetch_memory": 1024}


class _Later:
    """args.parser of a line read here: argparse's own run parser, built for a usage error."""

    def __init__(self, full: Callable[[], argparse.Namespace]) -> None:
        self._full = full

    def error(self, message: str) -> NoReturn:
        self._full().parser.error(message)
        raise AssertionError("unreachable: the parser's error() exits")


def parse(ours: list[str], at: int, handler: Callable[..., None],
          full: Callable[[], argparse.Namespace]) -> argparse.Namespace | None:
    """`ours` (the line before the user's `--`, split_command; `run` at `at`) as argparse
    would read it, or None where argparse must. `handler`: run's (cli/run.py handle);
    `full()` reads the line with argparse (for a usage error later)."""
    from jaxcache.trust.rules import namespace

    choices = {"namespace": namespace.CHOICES, "color": ("auto", "always", "never")}
    given: dict[str, object] = {}
    for word in ours[:at]:
        if word not in GLOBAL or word == "--color":
            return None
        given[SWITCHES[word]] = True
    words = ours[at + 1:]
    i = 0
    while i < len(words):
        word = words[i]
        if not word.startswith("-"):
            given["command"] = words[i:]  # REMAINDER: from here on nothing is ours
            break
        if word in SWITCHES:
            given[SWITCHES[word]] = True
        elif word in VALUES and i + 1 < len(words) and not words[i + 1].startswith("-"):
            dest, value = VALUES[word], words[i + 1]
            if value not in choices.get(dest, (value,)):
                return None
            given[dest] = value
            i += 1
        else:
            return None
        i += 1
    args = {**defaults(), **given, "name": "run", "handler": handler,
            "parser": _Later(full), "command_name": "run", "kind": None}
    return SimpleNamespace(**args)  # type: ignore[return-value]  # argparse's, by its fields
