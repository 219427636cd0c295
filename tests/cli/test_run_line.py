"""`jaxcache run`'s command line as main() reads it (argparse, as every command): our flags
up to the job's first word or `--`, the rest the job's, verbatim; a bad line is one usage line
and exit 2, before any work."""

from __future__ import annotations

import gc

import pytest

from jaxcache.cli import build_parser, common, main, split_command

SH = ["sh"]


def _read(line: list[str]) -> tuple[dict[str, object], list[str]]:
    """run's options as argparse gives them, and the job's command (the part before `--`
    from the job's first word, then what follows `--`)."""
    ours, tail = split_command(line)
    args, extra = build_parser(only="run").parse_known_args(ours)
    assert not extra
    return vars(args), common.user_command(args.command, tail)


@pytest.mark.parametrize("line,given,job", [
    (["run", "--", "python", "x.py"], {}, ["python", "x.py"]),
    (["run", "-q", "--cache-dir", "/c", "--record", "/r", "--", "python", "x.py", "--help"],
     {"quiet": True, "cache_dir": "/c", "record_path": "/r"}, ["python", "x.py", "--help"]),
    (["-q", "run", "--", "python"], {"quiet": True}, ["python"]),
    (["--quiet", "run", "--verbose", "--", "python"], {"quiet": True, "verbose": True},
     ["python"]),
    # from the job's first word on, nothing is ours: flags after it are the job's
    (["run", "python", "x.py", "--cache-dir", "/elsewhere", "-q"], {"cache_dir": None},
     ["python", "x.py", "--cache-dir", "/elsewhere", "-q"]),
    (["run", "--cache-dir", "/a", "--cache-dir", "/b", "python", "--", "after"],
     {"cache_dir": "/b"}, ["python", "--", "after"]),  # a later `--` is the job's
    (["run", "--namespace", "fingerprint", "--policy", "p.toml", "--allow-untrusted",
      "--require-origin", "--unverified-jax", "--", *SH],
     {"namespace": "fingerprint", "policy_path": "p.toml", "allow_untrusted": True,
      "require_origin": True, "unverified_jax": True}, SH),
    (["run", "--sealed", "--signing-key", "k", "--local", "/l", "--trusted-key", "t", "--",
      *SH], {"sealed": True, "signing_key": "k", "local": "/l", "trusted_keys": ["t"]}, SH),
    (["run", "--max-size", "10G", "--max-age", "30d", "--color", "never", "--", *SH],
     {"max_size": "10G", "max_age": "30d", "color": "never"}, SH),
    (["--color", "never", "run", "--", *SH], {"color": "never"}, SH),
    (["run", "--cache-dir", "", "--", *SH], {"cache_dir": ""}, SH),  # the library refuses it
    (["run", "--cache-dir=/c", "-qv", "--", *SH],
     {"cache_dir": "/c", "quiet": True, "verbose": True}, SH),
    (["run", "--min-compile-time", "0", "--", *SH], {"min_compile_time": 0.0}, SH),
    (["run", "-", "x"], {}, ["-", "x"]),
    (["run", "-q"], {"quiet": True}, []),  # no command: run's handler says so
    (["run"], {"cache_dir": None, "sealed": False, "prefetch": True}, []),
], ids=" ".join)
def test_our_flags_then_the_job(line, given, job):
    args, command = _read(line)
    assert {k: args.get(k) for k in given} == given
    assert command == job


@pytest.fixture
def main_in_process():
    """main() sets the collector's thresholds: put this process's back."""
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


@pytest.mark.parametrize("line,message", [
    (["run", "--cache-dir", "--", *SH], "argument --cache-dir: expected one argument"),
    (["run", "--cache-dir", "-x", "--", *SH], "argument --cache-dir: expected one argument"),
    (["run", "--namespace", "other", "--", *SH], "argument --namespace: invalid choice"),
    (["run", "--color", "pink", "--", *SH], "argument --color: invalid choice"),
    (["run", "--cache", "/c", "--", *SH], "unrecognized arguments: --cache"),  # no abbrevs
    (["run", "--bogus", "--", *SH], "unrecognized arguments: --bogus"),
    (["run", "-q", "-v", "--", *SH], "-q/--quiet and -v/--verbose contradict each other"),
], ids=" ".join)
def test_a_bad_line_is_one_usage_line(main_in_process, capsys, line, message):
    with pytest.raises(SystemExit) as exc:
        main(line)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("jaxcache run: error: ") and message in err, err
    assert err.endswith(" (see jaxcache run --help)\n") and err.count("\n") == 1


@pytest.mark.parametrize("line", [["run", "-h"], ["run", "--help", "--", *SH]], ids=" ".join)
def test_help_before_the_job_is_ours(main_in_process, capsys, line):
    with pytest.raises(SystemExit) as exc:
        main(line)
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("usage: jaxcache run ")
