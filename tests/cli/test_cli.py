"""The command line itself: help, version, `--` and what follows it, usage errors, imports."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.jobs import jaxcache

from jaxcache import __version__

JOB = "import sys; print(sys.argv[1:]); sys.exit(3)"


def run_job(tmp_path, *args):
    return jaxcache("run", "--quiet", "--cache-dir", str(tmp_path / "c"), "--record",
                    str(tmp_path / "r.json"), *args)


def test_version():
    proc = jaxcache("--version")
    assert (proc.returncode, proc.stdout) == (0, f"jaxcache {__version__}\n")


def test_everything_after_dashdash_is_the_jobs(tmp_path):
    proc = run_job(tmp_path, "--", sys.executable, "-c", JOB, "--help", "-q", "--", "x")
    assert proc.returncode == 3, proc.stderr  # the job's own exit code
    assert proc.stdout == "['--help', '-q', '--', 'x']\n"  # our help never printed
    assert "usage:" not in proc.stderr


def test_command_without_dashdash_starts_at_its_first_word(tmp_path):
    proc = run_job(tmp_path, sys.executable, "-c", JOB, "--help", "--", "x")
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "['--help', '--', 'x']\n"


@pytest.mark.parametrize("args,message", [
    (["bench", "-t", "0", "--", "true"], "argument -t/--trials: 0 is not in the range 1<=x<=1000"),
    (["bench", "--confidence", "nan", "--", "true"], "--confidence: 'nan' is not a number"),
    (["decide", "--min-fraction", "2", "/tmp"], "argument --min-fraction: 2 is not in the range"),
    (["net", "--pid", "x"], "argument --pid: invalid int value: 'x'"),
    (["audit", "/tmp", "--bogus"], "jaxcache audit: error: unrecognized arguments: --bogus"),
    (["run", "--cache", "/tmp", "--", "true"], "unrecognized arguments: --cache"),  # no abbrevs
    (["run", "--quiet", "--"], "no command to run"),
    (["bench", "--compare", "a.json", "b.json", "--", "true"], "no command"),
    (["explain", "r.json", "--", "true"], "not both"),
])
def test_usage_error_is_one_clear_message(args, message):
    proc = jaxcache(*args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and message in errors[0], proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("jaxcache")  # one line
    assert proc.stderr.rstrip().endswith("--help)")  # and where to read more


@pytest.mark.parametrize("command,option", [
    ("init", "--name NAME"), ("audit", "--no-processes"), ("ls", "--format {text,json}"),
    ("run", "--cache-dir DIR"), ("bench", "--trials N"), ("explain", "--format {text,json}"),
    ("decide", "--min-saving SECONDS"), ("net", "--pid PID"), ("demo", "--out DIR"),
    ("bench", "--min-fraction FRACTION"), ("seal", "--allow-unhittable"),
    ("records", "--older-than DAYS"),
])
def test_subcommand_help(command, option):
    proc = jaxcache(command, "-h")
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.startswith(f"usage: jaxcache {command} ") and option in proc.stdout


def test_help_keeps_the_examples_as_written():
    top = jaxcache("--help")
    assert top.returncode == 0
    row = "  jaxcache run -- CMD...        run a job with the cache on and record what JAX did"
    assert f"\n{row}\n" in top.stdout
    for name in ("init", "audit", "ls", "run", "bench", "explain", "net", "decide", "demo",
                 "records"):
        assert f"\n    {name} " in top.stdout  # every command listed
    bench = jaxcache("bench", "--help").stdout
    assert "\n  jaxcache bench --compare before.json after.json\n" in bench
    assert "[default: 6; 1<=x<=1000]" in bench and "\\b" not in bench


def test_color_is_global_like_quiet_and_verbose(tmp_path):
    """--color before the command name (with its value) as after it; a bad value is one line."""
    cache = tmp_path / "c"
    cache.mkdir(mode=0o700)
    for argv in (["--color", "always", "audit", "--no-processes", str(cache)],
                 ["--color=always", "audit", "--no-processes", str(cache)],
                 ["audit", "--color", "always", "--no-processes", str(cache)]):
        proc = jaxcache(*argv)
        assert proc.returncode == 0 and proc.stdout.startswith("verdict: \x1b["), argv
    bad = jaxcache("--color", "sometimes", "audit", str(cache))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "sometimes" in bad.stderr


def test_no_arguments_shows_help_and_fails():
    proc = jaxcache()
    assert proc.returncode == 2 and proc.stderr.startswith("usage: jaxcache")


def test_importing_the_cli_stays_light():
    code = ("import sys, jaxcache.cli; "
            "print(sorted(m for m in sys.modules if m == 'click' or m.startswith('click.') "
            "or m.startswith(('jaxcache.trust', 'jaxcache.run', 'jaxcache.bench'))))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert proc.stdout == "[]\n"


def test_a_command_imports_only_its_own_module():
    """`jaxcache run` builds run's parser alone: no other command's module, nothing heavy (its
    --namespace choices come from trust/rules/namespace.py, which imports only text and errors)."""
    code = ("import sys, jaxcache.cli as cli; before = set(sys.modules); "
            "cli.build_parser(only='run'); "
            "print(sorted(m for m in set(sys.modules) - before if m.startswith('jaxcache')), "
            "[m for m in ('jax', 'jaxcache.bench', 'jaxcache.fingerprint') if m in sys.modules])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert proc.stdout == ("['jaxcache.cli.parsers', 'jaxcache.cli.run', 'jaxcache.text', "
                           "'jaxcache.trust', "
                           "'jaxcache.trust.rules', 'jaxcache.trust.rules.namespace'] []\n")
