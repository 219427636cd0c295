"""What every command shares: failing with one line, the common flags, where the answer goes.

Standard library only at import: `jaxcache run -- CMD` loads this module before the user's
job starts, so each helper imports what it needs when it is called.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from jaxcache.project import MAX_TRIALS as MAX_TRIALS
from jaxcache.project import MAX_WARM as MAX_WARM

TYPE_CHECKING = False  # typing itself costs `jaxcache run` ~2 ms: names for the type checker only
if TYPE_CHECKING:
    from typing import Any, NoReturn

    from jaxcache.cli.parsers import Parser
    from jaxcache.documents.claim import Output
    from jaxcache.trust.inputs.public_keys import PublicKey
    from jaxcache.trust.rules.policy_rules import Policy

FORMATS = ("text", "json", "sarif")
TEXT_JSON = ("text", "json")

# bench, decide -- CMD and demo measure with the same bounds (the project file's are checked
# against them too): MAX_TRIALS, MAX_WARM

_CLAIMED: list[Output] = []  # -o targets claimed before the work; released unless written


def fail(message: str, code: int = 2) -> NoReturn:
    """One line on stderr and the exit code: the only way a command reports an error."""
    sys.stderr.write(f"jaxcache: {message}\n")
    sys.stderr.flush()
    sys.exit(code)


def emit(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def note(args: argparse.Namespace, text: str) -> None:
    """A line about the work, not the answer (progress, what was written): stderr, and
    nothing with --quiet."""
    if not args.quiet:
        sys.stderr.write(text)
        sys.stderr.flush()


def usage(args: argparse.Namespace, message: str) -> NoReturn:
    """A usage error in the command's own terms: one line naming the command, exit 2."""
    args.parser.error(message)
    raise AssertionError("unreachable: the parser's error() exits")  # for the type checker


def user_command(before: list[str], after: list[str] | None) -> list[str]:
    """The user's command: words given without `--` (they start at the first one that is not
    our option), then what followed `--`, verbatim (a later `--` is theirs)."""
    if after is None:
        return list(before)
    return [*before, "--", *after] if before else list(after)


def cache_path(args: argparse.Namespace, given: str | None) -> str:
    """PATH, else the one default every command uses (trust/create.py default_cache_dir:
    $JAX_COMPILATION_CACHE_DIR, else the project file's cache_dir, else the directory
    `jaxcache init` makes), as `run` and `init` do."""
    if given is not None:  # an empty PATH given is the library's to refuse, by name
        return given
    from jaxcache.trust import create

    return create.default_cache_dir()


# --- where the answer goes: stdout, or -o FILE --------------------------------------------

def claim_output(args: argparse.Namespace, kind: str) -> None:
    """Claim -o FILE before any work (documents/claim.py: created new with O_EXCL|O_NOFOLLOW,
    or an existing jaxcache document of this kind of yours, replaced by rename when written),
    so a target that cannot be written fails first and nothing is left if the command fails."""
    args.sink = None
    args.buffer = []
    path = getattr(args, "output", None)
    if path is None or path == "-":
        return
    from jaxcache.documents import claim as outputs
    from jaxcache.documents import kinds

    fmt = getattr(args, "fmt", "text")
    recognize = (outputs.json_schema(kinds.prefix(kind)) if fmt == "json" else
                 _sarif if fmt == "sarif" else None)
    args.sink = outputs.claim(path, f"{kind} output", recognize=recognize)
    _CLAIMED.append(args.sink)


def _sarif(data: bytes) -> bool:
    """A SARIF log that jaxcache wrote."""
    from jaxcache import validate as v

    def first_run_ours(runs: object, where: str) -> None:
        if not isinstance(runs, list) or not runs:
            raise v.Invalid(where, "a run")
        v.obj({"tool": v.obj({"driver": v.obj({"name": v.one_of("jaxcache")})})})(
            runs[0], f"{where}[0]")

    try:
        v.obj({"runs": v.both(v.list_of(v.ANY), first_run_ours)})(v.parse_json(data), "")
    except ValueError:  # Unreadable, Invalid
        return False
    return True


def out(args: argparse.Namespace, text: str) -> None:
    """Part of the answer: to stdout at once, or kept for -o FILE (written whole at the end)."""
    if getattr(args, "sink", None) is None:
        emit(text)
    else:
        args.buffer.append(text)


def finish(args: argparse.Namespace, text: str, code: int,
           answer: Callable[[str], str] | None = None) -> NoReturn:
    """Write the answer and exit. With --quiet, text output keeps only `answer(text)` (by
    default its first line: every report says its answer first)."""
    if args.quiet and getattr(args, "fmt", "text") == "text":
        text = (answer or first_line)(text)
    out(args, text)
    flush_output(args)
    sys.exit(code)


def flush_output(args: argparse.Namespace) -> None:
    sink = getattr(args, "sink", None)
    if sink is not None:
        sink.write("".join(args.buffer))
        args.buffer = []


def release_outputs() -> None:
    """Give up every -o target not written (a failed command leaves nothing behind)."""
    while _CLAIMED:
        _CLAIMED.pop().release()


def hashing_notice(size: int, files: int, for_all: bool) -> None:
    """What run, fingerprint and the sealed commands say before hashing the build's binaries
    (fingerprint/: the first run after an install), on stderr; `for_all`: kept for every user
    of the install (you own it), else for you alone."""
    from jaxcache.text import plural
    from jaxcache.text import size as size_text

    sys.stderr.write(f"jaxcache: hashing {plural(files, 'shared object')} of jaxlib and its "
                     f"plugins ({size_text(size)}) for the build's fingerprint: once per "
                     + ("install\n" if for_all else
                        "install and user (the install is not yours: once for all when its "
                        "owner runs jaxcache)\n"))
    sys.stderr.flush()


def first_line(text: str) -> str:
    return text.split("\n", 1)[0] + "\n" if text else text


def lines_starting(*prefixes: str) -> Callable[[str], str]:
    """--quiet's answer for a report that does not say it first: the lines that hold it."""
    import re

    colour = re.compile(r"\x1b\[[0-9;]*m")  # a verdict word in colour still starts its line

    def pick(text: str) -> str:
        return "".join(line + "\n" for line in text.splitlines()
                       if colour.sub("", line).startswith(prefixes))
    return pick


# --- parsing --------------------------------------------------------------------------------

class Range:
    """A number within bounds; out of range is a usage error naming the bounds (exit 2)."""

    def __init__(self, kind: type[int] | type[float], lo: float | None = None,
                 hi: float | None = None) -> None:
        self.kind, self.lo, self.hi = kind, lo, hi

    def __str__(self) -> str:
        if self.hi is None:
            return f"x>={self.lo}"
        return f"{self.lo}<=x<={self.hi}" if self.lo is not None else f"x<={self.hi}"

    def __call__(self, text: str) -> int | float:
        value: int | float | None
        try:
            value = self.kind(text)
        except ValueError:
            value = None
        if value is None or value != value:  # not a number, or NaN
            noun = "an integer" if self.kind is int else "a number"
            raise argparse.ArgumentTypeError(f"{text!r} is not {noun}")
        if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
            raise argparse.ArgumentTypeError(f"{text} is not in the range {self}")
        return value


def option(parser: argparse.ArgumentParser, *names: str, help: str = "",
           show_default: bool = False, type: Callable[[str], object] | None = None,
           **kwargs: Any) -> None:
    """add_argument, with the default and any range shown after the help (`[default: 6;
    1<=x<=1000]`); `%` in help must be written `%%`."""
    notes = ["default: %(default)s"] if show_default else []
    if isinstance(type, Range):
        notes.append(str(type))
    if type is not None:  # not passed when absent: a store_true action takes no type
        kwargs["type"] = type
    if notes:
        help = f"{help}  [{'; '.join(notes)}]" if help else f"[{'; '.join(notes)}]"
    parser.add_argument(*names, help=help or None, **kwargs)


COLOR = "--color"  # the one global flag that takes a value (cli/__init__.py's _name_at)


# the commands -v/--verbose adds detail to, as the option's help and the overview list them
VERBOSE = ("audit", "init", "run", "seal", "verify", "fingerprint", "gc")
VERBOSE_LISTED = ", ".join(VERBOSE)


def identity_options(parser: argparse.ArgumentParser, lead: str) -> None:
    """--identity ci and --sigstore-config, as `run` and `seal` both offer them; `lead` says
    when they apply to that command."""
    option(parser, "--identity", choices=["ci"],
           help=f"{lead} keyless, as the CI job's own identity (its OIDC token: GitHub's "
                "id-token: write, GitLab's id_tokens; one Sigstore certificate per job; the "
                "jaxcache[sigstore] extra). Readers trust it by [[trusted_identities]] "
                "(docs/how-to/keyless.md).")
    option(parser, "--sigstore-config", metavar="FILE",
           help="With --identity: the Sigstore client trust config to sign with (default: "
                "the public-good instance).")


def global_flags(parser: argparse.ArgumentParser) -> None:
    """-q/-v/--color, taken before the command name and after it alike (SUPPRESS: a
    command's parser then does not overwrite what the top level read)."""
    parser.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                        help="Only the answer (a verdict line) and errors: no progress, no "
                             "detail; `run` and `bench -- CMD` say nothing but errors (the "
                             "job's output and the record stay).")
    parser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="More detail: every writer and note of an audit, the audit "
                             "behind init's answer, every entry seal and verify judged "
                             f"({VERBOSE_LISTED} only; elsewhere a usage error).")
    parser.add_argument(COLOR, choices=("auto", "always", "never"), default=argparse.SUPPRESS,
                        help="Verdicts in colour: auto (the default) is on a terminal unless "
                             "NO_COLOR is set.")


def format_flag(parser: argparse.ArgumentParser, choices: tuple[str, ...] = TEXT_JSON) -> None:
    option(parser, "--format", dest="fmt", choices=choices, default="text", show_default=True,
           help="text for people; json (a versioned document whose JSON Schema ships in the "
                "package)" + ("; sarif for code-scanning tools" if "sarif" in choices else "")
                + ".")


def output_flag(parser: argparse.ArgumentParser) -> None:
    option(parser, "-o", "--output", metavar="FILE",
           help="Write the output to FILE ('-': stdout, the default). A new file is created "
                "(never through a symlink); an existing one is replaced only if it is yours and "
                "a jaxcache document of the same kind (or empty). Errors still go to stderr.")


def trials_flags(parser: argparse.ArgumentParser, what: str) -> None:
    """-t/-k for every command that benches: the same names, defaults and bounds; the
    defaults are the project file's [bench] where it sets them (a file jaxcache refuses is
    said when the command runs: its --help still shows bench's own)."""
    from jaxcache.bench.trials import BenchConfig
    from jaxcache.errors import JaxcacheError
    from jaxcache.project import effective

    try:
        trials = effective.bench_trials(BenchConfig.trials)
        warm = effective.bench_warm(BenchConfig.warm)
    except JaxcacheError:
        trials, warm = BenchConfig.trials, BenchConfig.warm
    option(parser, "-t", "--trials", type=Range(int, 1, MAX_TRIALS), default=trials,
           show_default=True, metavar="N",
           help=f"Trials{what}: each a fresh private cache, one cold process, then the warm "
                "ones. The trial is the unit of the statistics: 4 is the fewest for a 95%% "
                "interval.")
    option(parser, "-k", "--warm", type=Range(int, 1, MAX_WARM), default=warm,
           show_default=True, metavar="N",
           help="Warm processes per trial (their median is compared with the cold run).")


def noticeable_flags(parser: argparse.ArgumentParser, default_note: str = "Default: ") -> None:
    """--min-saving / --min-fraction: the one noticeable bar (bench/noticeable.py) of bench
    and decide, with its defaults from there."""
    from jaxcache.bench import noticeable

    option(parser, "--min-saving", type=Range(float, 0), default=None, metavar="SECONDS",
           help="A saving is noticeable when its interval's lower bound reaches this many "
                f"seconds... {default_note}{noticeable.MIN_SAVING_S:g}.")
    option(parser, "--min-fraction", type=Range(float, 0, 1), default=None, metavar="FRACTION",
           help="...and this share of the cold start-up (wall time). "
                f"{default_note}{noticeable.MIN_FRACTION:g}.")


def threshold_flags(parser: argparse.ArgumentParser, where: str = "the job") -> None:
    """--min-compile-time / --min-entry-size: JAX's write thresholds, set for the job's
    processes (its environment) by run, bench and decide alike."""
    option(parser, "--min-compile-time", type=Range(float, 0), metavar="SECONDS",
           help=f"Set jax_persistent_cache_min_compile_time_secs for {where} (default: JAX's "
                "variable, else the project file's min_compile_time, else JAX's 1.0: quicker "
                "compiles are not written). Lower it only where the run summary "
                "or explain calls what the threshold leaves out material, and bench it.")
    option(parser, "--min-entry-size", type=Range(int, -1), metavar="BYTES",
           help=f"Set jax_persistent_cache_min_entry_size_bytes for {where}.")


def threshold_env(args: argparse.Namespace) -> dict[str, str]:
    """The job-environment variables JAX reads its thresholds from: the flags given, else the
    project file's where JAX's own variable is not set (jaxcache/project/)."""
    from jaxcache.project import effective
    from jaxcache.thresholds import FLAGS

    from_file = effective.file_thresholds(os.environ)
    given = {"--min-compile-time": getattr(args, "min_compile_time", None),
             "--min-entry-size": getattr(args, "min_entry_size", None)}
    return {FLAGS[flag]: repr(value if value is not None else filed)
            for (flag, value), filed in zip(given.items(), from_file, strict=True)
            if value is not None or filed is not None}


# each command's page of the manual (docs/), named at the end of its --help
PAGES = {"audit": "reference/audit.md", "init": "reference/enable.md",
         "ls": "reference/ls.md", "run": "reference/run.md",
         "bench": "reference/bench.md", "explain": "reference/explain.md",
         "decide": "reference/decide.md", "records": "reference/records.md",
         "net": "reference/net.md", "seal": "reference/sealed-cache.md",
         "verify": "reference/sealed-cache.md", "keygen": "reference/sealed-cache.md",
         "demo": "reference/setup.md", "fingerprint": "reference/fingerprint.md",
         "explain-finding": "reference/finding-codes.md", "config": "reference/project-file.md"}


def command_parser(commands: argparse._SubParsersAction[Parser], name: str, usage_line: str,
                   handler: Callable[..., None]) -> argparse.ArgumentParser:
    """A command's parser: its handler's docstring is its help (first line) and description;
    its page of the manual closes it."""
    from jaxcache.cli.parsers import Help

    doc = handler.__doc__ or ""
    first, _, rest = doc.partition("\n")
    lines = rest.splitlines()
    indent = min((len(line) - len(line.lstrip()) for line in lines if line.strip()), default=0)
    description = "\n".join([first, *(line[indent:] for line in lines)]).strip()
    parser = commands.add_parser(name, prog=f"jaxcache {name}", usage=f"%(prog)s {usage_line}",
                                 help=first.strip(), description=description,
                                 epilog=f"More: docs/{PAGES[name]} (the manual's index: "
                                        "docs/index.md)" if name in PAGES else None,
                                 formatter_class=Help, add_help=False, allow_abbrev=False)
    parser.add_argument("-h", "--help", action="help", help="Show this message and exit.")
    global_flags(parser)
    parser.set_defaults(handler=handler, parser=parser, command_name=name)
    return parser


# --- sealed-cache options, shared by audit, decide, run ------------------------------------

def sealed_reader_flags(p: argparse.ArgumentParser) -> None:
    option(p, "--sealed", action="store_true",
           help="Judge for a sealed reader (run --sealed, enable(sealed=True)): one that loads "
                "only entries signed by the policy's trusted_keys for this path or "
                "--trusted-key. Only then can the verdict be SEALED.")
    option(p, "--trusted-key", dest="trusted_keys", action="append", metavar="KEY",
           help="With --sealed: a public key the reader trusts (ed25519:... or a .pub file; "
                "repeatable).")


def policy(args: argparse.Namespace) -> Policy:
    """The trust policy of this command (--policy FILE, else the default places), loaded once
    and handed down: no part of a command reads it again."""
    from jaxcache.trust.inputs import policy as policymod
    from jaxcache.trust.kernel.principals import Accounts

    return policymod.load(args.policy_path, Accounts())


def public_keys(args: argparse.Namespace) -> tuple[PublicKey, ...]:
    """--trusted-key values (with --sealed) as public keys."""
    if args.trusted_keys and not args.sealed:
        usage(args, "--trusted-key needs --sealed")
    if not args.trusted_keys:
        return ()
    from jaxcache.trust.inputs.public_keys import load_public

    return tuple(load_public(k) for k in args.trusted_keys)


def unverified_flag(p: argparse.ArgumentParser) -> None:
    option(p, "--unverified-jax", action="store_true",
           help="Record a job whose JAX is outside the supported lines (0.5 to 0.12) "
                "instead of refusing it (exit 2); the record and every report say "
                "'unverified'. Never with --sealed.")
