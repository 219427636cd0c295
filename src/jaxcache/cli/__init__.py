"""The `jaxcache` command: parse, call, format, exit. No logic lives here.

Exit codes everywhere: 0 fine, 1 a finding you must act on, 2 usage or input error.

argparse, not click: `jaxcache run -- CMD` must add as little as possible to the start-up of
the user's job, and argparse costs a fraction of click's import time. One module per command
(its options and the call into the library), imported only when that command runs; each
imports what it needs when it runs. common.py holds what they share.
"""

from __future__ import annotations

import gc
import os
import sys
from types import ModuleType

from jaxcache._package import __version__
from jaxcache.cli import common
from jaxcache.errors import JaxcacheError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

OVERVIEW = """\
Use JAX's persistent compilation cache safely, and know what it buys you.

Every cache entry is a compiled executable that JAX loads unchecked: whoever can write the
cache directory, or replace it through any parent, decides what your process runs.
Start with the trust boundary:

  jaxcache init                 make a private cache directory and print how to use it
  jaxcache audit PATH           who can change what JAX loads from PATH, and why
  jaxcache ls PATH              inventory of the entries in a cache directory
  jaxcache run -- CMD...        run a job with the cache on and record what JAX did
  jaxcache bench -- CMD...      cold vs warm in separate processes: what the cache buys
  jaxcache explain REC...       why modules were or were not cached, and cross-run misses
  jaxcache net [--pid P]        JAX's network services: a trust boundary of their own
  jaxcache fingerprint          this build and CPU, which JAX's cache key leaves out
  jaxcache decide PATH ...      share the cache? writers, compatibility, saving
  jaxcache gc PATH --max-size S delete least recently used entries, only what is yours
  jaxcache records [ACTION]     the run records kept: list, prune, stats
  jaxcache explain-finding CODE what a finding code means, why, and what to do
  jaxcache config               the project file's settings, and where each came from

A sealed cache (docs/how-to/sealed-cache.md): entries signed, loaded only if a trusted key \
signed them:

  jaxcache keygen KEYFILE       an Ed25519 signing key; prints the public key to trust
  jaxcache seal DIR --signing-key K   sign the entries of a directory you trust
  jaxcache verify DIR           valid / unsigned / bad signature / unknown key, per entry
  jaxcache run --sealed ...     run a job that loads only signed entries (and signs with a key)

The same flags everywhere: --format text|json (and sarif for audit and net), -o/--output FILE,
-q/--quiet, -v/--verbose ({verbose} only) and --color
(these three before or after the command); without PATH, audit, ls, gc, verify and run use
$JAX_COMPILATION_CACHE_DIR, else the project file's cache_dir \
(docs/reference/project-file.md), else the
directory `jaxcache init` makes (seal and decide need one).
Exit codes: 0 fine, 1 a finding you must act on, 2 usage or input error.
Verdicts are in colour on a terminal: NO_COLOR=1 or --color never turns it off.
""".replace("{verbose}", common.VERBOSE_LISTED)  # the one list the option says too

# name, usage (after `jaxcache NAME `), the kind of document -o writes (None: no -o); in the
# order the overview tells them. The module jaxcache.cli.NAME holds `options` and `handle`.
COMMANDS: tuple[tuple[str, str, str | None], ...] = (
    ("init", "[OPTIONS] [PATH]", "init"),
    ("audit", "[OPTIONS] [PATH]", "audit"),
    ("ls", "[OPTIONS] [PATH]", "ls"),
    ("run", "[OPTIONS] [--] CMD [ARGS...]", None),
    ("bench", "[OPTIONS] [--] CMD [ARGS...]\n"
              "       jaxcache bench --compare A.json B.json", "bench"),
    ("explain", "[OPTIONS] RECORD...\n"
                "       jaxcache explain [OPTIONS] -- CMD [ARGS...]", "explain"),
    ("net", "[OPTIONS]", "net"),
    ("fingerprint", "[OPTIONS]", "fingerprint"),
    ("decide", "[OPTIONS] (PATH | --audit A.json) [-- CMD [ARGS...]]", "decide"),
    ("demo", "[OPTIONS]", "demo"),
    ("keygen", "[OPTIONS] KEYFILE\n"
               "       jaxcache keygen --public-of (pkcs11:URI | KEYFILE)", "keygen"),
    ("seal", "--signing-key KEYFILE [OPTIONS] DIR", "seal-scan"),
    ("verify", "[OPTIONS] [DIR]", "seal-scan"),
    ("gc", "[OPTIONS] [PATH]", "gc"),
    ("records", "[list | prune | stats] [OPTIONS]", None),
    ("explain-finding", "[OPTIONS] [CODE]", "finding-codes"),
    ("config", "[OPTIONS]", "config"),
)
NAMES = tuple(name for name, _, _ in COMMANDS)
RUNS_A_COMMAND = ("run", "bench", "explain", "decide")


def _module(name: str) -> ModuleType:
    # __import__, not importlib.import_module: importlib's package (and warnings) cost `run` an
    # import before the job starts
    full = f"jaxcache.cli.{name.replace('-', '_')}"
    __import__(full)
    return sys.modules[full]


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with `only` (a command's name), that command alone: less to import and build
    before the user's job starts. Help and errors for the whole command line need all."""
    from jaxcache.cli import parsers

    top = parsers.Parser(prog="jaxcache", description=OVERVIEW, formatter_class=parsers.Help,
                         add_help=False, allow_abbrev=False)
    top.add_argument("-V", "--version", action="version", version=f"jaxcache {__version__}",
                     help="Show the version and exit.")
    top.add_argument("-h", "--help", action="help", help="Show this message and exit.")
    common.global_flags(top)
    commands = top.add_subparsers(title="commands", metavar="COMMAND", dest="name",
                                  required=True)
    for name, usage_line, kind in COMMANDS:
        if only in (None, name):
            module = _module(name)
            parser = common.command_parser(commands, name, usage_line, module.handle)
            module.options(parser)
            if kind is not None:
                common.output_flag(parser)
            parser.set_defaults(kind=kind)
    return top


def _name_at(argv: list[str]) -> int | None:
    """Where the command's name is: after the global flags (of which only --color takes a
    value)."""
    skip = False
    for i, word in enumerate(argv):
        if skip:
            skip = False
        elif not word.startswith("-"):
            return i
        elif word == "--":
            return None
        else:
            skip = word == common.COLOR
    return None


def split_command(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """Our arguments, and what followed the first `--` (None without one) for the commands
    that run a command: that part is the user's, verbatim, never parsed as ours. Elsewhere
    `--` keeps argparse's meaning (what follows is positional)."""
    at = _name_at(argv)
    if at is not None and argv[at] in RUNS_A_COMMAND and "--" in argv[at:]:
        cut = argv.index("--", at)
        return argv[:cut], argv[cut + 1:]
    return argv, None


def _parsed(ours: list[str], at: int | None, name: str | None) -> argparse.Namespace:
    """Our arguments as argparse reads them (help, a usage error: it exits); `at`: where the
    command's name is (_name_at), `name`: the command, if it is one."""
    parser = build_parser(only=name)
    if at is None and not any(w in ("-h", "--help", "-V", "--version") for w in ours):
        parser.print_help(sys.stderr)
        sys.exit(2)
    args, extra = parser.parse_known_args(ours)
    if extra:  # named by the command's parser, not the top level's (argparse's default)
        getattr(args, "parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _debugging() -> bool:
    """JAXCACHE_DEBUG set: an error that ends a command shows its traceback, for a report."""
    return bool(os.environ.get("JAXCACHE_DEBUG"))


def _unreadable(exc: BaseException) -> str | None:
    """The line for an error from a part of this install the user cannot read (cli/unreadable.py),
    else None."""
    try:
        from jaxcache.cli import unreadable
    except ImportError:
        return None
    return unreadable.message(exc)


def main(argv: list[str] | None = None) -> None:
    """`jaxcache ...` (and `python -m jaxcache ...`): every error is one line and an exit code."""
    # A command builds big trees of results that hold no cycles (an audit of 100,000 entries:
    # ~10 objects each); the cycle collector's full passes over them cost over a quarter of its time
    # at the default thresholds (700, 10, 10). Rarer passes, same collector.
    gc.set_threshold(10_000, 100, 100)
    try:
        ours, tail = split_command(sys.argv[1:] if argv is None else list(argv))
        at = _name_at(ours)
        name = ours[at] if at is not None and ours[at] in NAMES else None
        if name == "run":
            # run's own work up to the job (its imports, the audit of a cache of up to a few
            # hundred entries) makes ~15,000 objects, which one pass at 10,000 visits all of
            # (~2 ms of every job's start); its trees hold no cycles either
            gc.set_threshold(50_000, 100, 100)
        args = _parsed(ours, at, name)
        args.quiet = getattr(args, "quiet", False)
        args.verbose = getattr(args, "verbose", False)
        if args.quiet and args.verbose:
            common.usage(args, "-q/--quiet and -v/--verbose contradict each other")
        if args.verbose and args.command_name not in common.VERBOSE:  # never ignored
            common.usage(args, f"-v/--verbose adds nothing to `jaxcache {args.command_name}`; "
                               f"it adds detail to {', '.join(common.VERBOSE)}")
        if getattr(args, "color", "auto") != "auto":  # auto costs `run` no import
            from jaxcache.text import set_color

            set_color(args.color)
        from jaxcache.project import effective

        effective.current()  # every command reads the project file: one refused stops it here
        if args.kind is not None:
            common.claim_output(args, args.kind)
        args.handler(args, tail)
    except JaxcacheError as exc:
        common.release_outputs()
        common.fail(str(exc), exc.exit_code)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except KeyboardInterrupt:
        common.release_outputs()
        common.fail("interrupted", 130)
    except OSError as exc:
        common.release_outputs()
        if _debugging():  # where it came from, for a report
            raise
        common.fail(_unreadable(exc) or
                    f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else ""))
    except Exception as exc:  # a bug: fail closed with one line, never a verdict
        common.release_outputs()
        if _debugging():
            raise
        common.fail(_unreadable(exc) or
                    f"internal error ({type(exc).__name__}: {exc}); nothing was judged. "
                    "Set JAXCACHE_DEBUG=1 for the traceback and report it")
    finally:
        common.release_outputs()  # a usage error (SystemExit) after the claim, too
    sys.exit(0)
