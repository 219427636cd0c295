"""cli/quick_run.py reads the usual `run` line as argparse does, and leaves the rest to it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from jaxcache.cli import _name_at, build_parser, quick_run, run, split_command

READ_HERE = [
    ["run", "--", "python", "x.py"],
    ["run", "-q", "--cache-dir", "/c", "--record", "/r", "--", "python", "x.py", "--help"],
    ["-q", "run", "--", "python"],
    ["--quiet", "run", "--verbose", "--", "python"],
    ["run", "python", "x.py", "--cache-dir", "/elsewhere", "-q"],
    ["run", "--cache-dir", "/a", "--cache-dir", "/b", "python", "--", "after"],
    ["run", "--namespace", "fingerprint", "--policy", "p.toml", "--allow-untrusted",
     "--require-origin", "--unverified-jax", "--", "sh"],
    ["run", "--sealed", "--signing-key", "k", "--local", "/l", "--", "sh"],
    ["run", "--max-size", "10G", "--max-age", "30d", "--color", "never", "--", "sh"],
    ["run", "--cache-dir", "", "--", "sh"],
    ["run", "-q"],
    ["run"],
]

LEFT_TO_ARGPARSE = [
    ["run", "-h"],
    ["run", "--help", "--", "sh"],
    ["--color", "never", "run", "--", "sh"],
    ["run", "--cache-dir=/c", "--", "sh"],
    ["run", "-qv", "--", "sh"],
    ["run", "--cache-dir", "--", "sh"],
    ["run", "--cache-dir", "-x", "--", "sh"],
    ["run", "--namespace", "other", "--", "sh"],
    ["run", "--color", "pink", "--", "sh"],
    ["run", "--trusted-key", "k", "--", "sh"],
    ["run", "--min-compile-time", "0", "--", "sh"],
    ["run", "--cache", "/c", "--", "sh"],
    ["run", "-", "x"],
    ["run", "--bogus", "--", "sh"],
]


def _both(line: list[str]):
    ours, _ = split_command(line)
    at = _name_at(ours)
    assert at is not None
    args, extra = build_parser(only="run").parse_known_args(ours)
    assert not extra
    return quick_run.parse(ours, at, run.handle, lambda: args), args


@pytest.mark.parametrize("line", READ_HERE, ids=" ".join)
def test_the_usual_line_gives_argparse_namespace(line):
    quick, full = _both(line)
    assert quick is not None
    mine, theirs = vars(quick), vars(full)
    assert mine.pop("handler") is theirs.pop("handler")
    mine.pop("parser")
    theirs.pop("parser")
    assert mine == theirs


@pytest.mark.parametrize("line", LEFT_TO_ARGPARSE, ids=" ".join)
def test_any_other_line_is_argparse_own(line):
    ours, _ = split_command(line)
    at = _name_at(ours)
    assert at is not None
    assert quick_run.parse(ours, at, run.handle,
                           lambda: pytest.fail("not for parse to call")) is None


def test_a_later_usage_error_is_argparse_own(capsys):
    ours, _ = split_command(["run", "-q", "-v", "--", "sh"])
    quick, full = _both(["run", "-q", "-v", "--", "sh"])
    assert quick is not None
    with pytest.raises(SystemExit) as exc:
        quick.parser.error("-q/--quiet and -v/--verbose contradict each other")
    assert exc.value.code == 2
    assert capsys.readouterr().err == ("jaxcache run: error: -q/--quiet and -v/--verbose "
                                       "contradict each other (see jaxcache run --help)\n")


def test_the_usual_run_imports_no_argparse(tmp_path):
    """What the reader is for: argparse (and gettext, locale) stay off the job's start-up."""
    cache = tmp_path / "cache"
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "jaxcache", "run", "-q",
                           "--cache-dir", str(cache), "--record", str(tmp_path / "r.json"),
                           "--", sys.executable, "-c", "pass"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")})
    assert proc.returncode == 0, proc.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}
    assert "jaxcache.run.command" in imported  # the job ran
    assert not imported & {"argparse", "gettext", "locale"}
