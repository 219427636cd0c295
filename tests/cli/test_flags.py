"""One set of flags: the same name, default and behaviour for the same thing in every command.

-V, -q/-v before or after the command, -o FILE / -o -, --format json validated against the
shipped schema and written by the one writer, PATH defaulting to $JAX_COMPILATION_CACHE_DIR,
seal --signing-key (and the old --key), the bench/decide/demo defaults.
"""

from __future__ import annotations

import json
import os
import re
import sys

import pytest
from support import paths
from support.jobs import environ_without, jaxcache
from support.users import mkdir

from jaxcache import __version__
from jaxcache.documents import schemas

NO_JAX_ENV = environ_without("JAX_", "JAXCACHE_")


def run(*args: str, env: dict | None = None, cwd: str | None = None):
    return jaxcache(*args, env={**NO_JAX_ENV, "NO_COLOR": "1", **(env or {})}, cwd=cwd)


def one_line_error(proc, code: int = 2) -> str:
    """The one line that says what is wrong (a usage error also shows the command's usage)."""
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.strip().splitlines()
             if not line.startswith(("usage: ", " "))]
    assert len(lines) == 1 and lines[0].startswith("jaxcache"), proc.stderr
    return lines[0]


@pytest.fixture
def pub(tmp_path) -> str:
    """A public key to trust (verify needs one)."""
    keys = mkdir(tmp_path / "keys", 0o700)
    assert run("keygen", str(keys / "k.key"), "-q").returncode == 0
    return str(keys / "k.key.pub")


def as_written(text: str) -> dict:
    """The document, checked to be laid out by the one JSON writer (report/jsonout.py):
    indented by two, and an inventory's entries one compact entry per line."""
    from jaxcache.report import jsonout

    doc = json.loads(text)
    laid = json.loads(text)
    inventory = laid.get("entries") if isinstance(laid, dict) else None
    if isinstance(inventory, dict) and isinstance(inventory.get("entries"), list):
        inventory["entries"] = jsonout.Rows(inventory["entries"])
    assert text == jsonout.document(laid)
    return doc


def test_the_writer_puts_rows_one_per_line_and_reads_back_the_same():
    from jaxcache.report import jsonout

    rows = [{"name": "a\u202e\"b", "flags": ["x", "y"], "n": i} for i in range(3)]
    doc = {"k": [1, {"deep": {"rows": jsonout.Rows(rows), "after": "t"}}],
           "none": jsonout.Rows()}
    text = jsonout.document(doc)
    assert json.loads(text) == {"k": [1, {"deep": {"rows": rows, "after": "t"}}], "none": []}
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.endswith('"rows": ['))
    indent = len(lines[at]) - len(lines[at].lstrip())
    for i in range(3):  # each row on its own line, two deeper than its key, ASCII only
        assert lines[at + 1 + i].startswith(" " * (indent + 2) + '{"name": ')
        assert json.loads(lines[at + 1 + i].strip().rstrip(",")) == rows[i]
    assert lines[at + 4] == " " * indent + "],"
    assert text.isascii() and '"none": []' in text and text.endswith("}\n")


def valid(kind: str, text: str) -> dict:
    doc = as_written(text)
    pytest.importorskip("jsonschema").validate(doc, schemas.load(kind))
    assert doc["schema"] == f"jaxcache.{kind}/1"
    return doc


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version(flag):
    proc = run(flag)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"jaxcache {__version__}\n", "")


@pytest.mark.parametrize("where", ["before", "after"])
def test_quiet_keeps_only_the_answer_wherever_it_is_given(tmp_path, where):
    cache = mkdir(tmp_path / "c", 0o700)
    args = ["audit", str(cache), "--no-processes"]
    full = run(*args)
    quiet = run("-q", *args) if where == "before" else run(*args, "--quiet")
    assert full.returncode == quiet.returncode == 0
    assert len(full.stdout.splitlines()) > 3
    assert quiet.stdout == full.stdout.splitlines()[0] + "\n"
    assert quiet.stdout.startswith("verdict: PRIVATE")


def test_verbose_before_or_after_the_command_is_the_same(tmp_path):
    target = tmp_path / "new"
    before = run("-v", "init", str(target))
    plain = run("init", str(tmp_path / "other"))
    after = run("init", str(target), "--verbose")  # accepted now that it exists
    assert before.returncode == after.returncode == plain.returncode == 0
    assert "verdict: PRIVATE" in before.stdout and "verdict: PRIVATE" in after.stdout
    assert "verdict: PRIVATE" not in plain.stdout  # -v adds the audit behind the answer


def test_quiet_and_verbose_together_is_a_usage_error(tmp_path):
    line = one_line_error(run("-q", "audit", str(tmp_path), "-v"))
    assert "contradict" in line


@pytest.mark.parametrize("argv", [["-v", "ls", "DIR", "--format", "json", "-o", "OUT"],
                                  ["ls", "DIR", "--verbose"], ["-v", "net", "-o", "OUT"],
                                  ["records", "list", "-v"]])
def test_verbose_where_it_adds_nothing_is_a_usage_error(tmp_path, argv):
    """-v is never accepted and then ignored: outside audit, init, run, seal and verify it is
    one line naming where it does something, before any work (nothing listed, nothing
    written)."""
    out = tmp_path / "out.json"
    proc = run(*[{"DIR": str(tmp_path), "OUT": str(out)}.get(a, a) for a in argv])
    line = one_line_error(proc)
    assert "adds nothing to `jaxcache" in line and "audit, init, run, seal, verify" in line
    assert proc.stdout == "" and not out.exists()


def test_quiet_drops_bench_progress(tmp_path):
    args = ["bench", "-t", "1", "-k", "1", "--no-prime", "--", sys.executable, "-c", "pass"]
    loud, quiet = run(*args), run("-q", *args)
    assert loud.returncode == quiet.returncode == 1  # nothing cached: a finding
    assert "trial 1 of 1" in loud.stderr and quiet.stderr == ""
    assert quiet.stdout.startswith("verdict: nothing-cached") and quiet.stdout.count("\n") == 1
    assert loud.stdout.splitlines()[0] == quiet.stdout.strip()  # the answer first, as elsewhere


def test_output_file_and_dash(tmp_path):
    cache = mkdir(tmp_path / "c", 0o700)
    out = tmp_path / "audit.json"
    args = ["audit", str(cache), "--no-processes", "--format", "json"]
    proc = run(*args, "-o", str(out))
    assert (proc.returncode, proc.stdout) == (0, "")
    first = valid("audit", out.read_text())
    again = run(*args, "--output", str(out))  # our own document of that kind: replaced
    assert again.returncode == 0 and valid("audit", out.read_text())["path"] == first["path"]
    dash = run(*args, "-o", "-")
    assert dash.returncode == 0 and valid("audit", dash.stdout)["verdict"] == "PRIVATE"
    text = tmp_path / "audit.txt"
    assert run("audit", str(cache), "--no-processes", "-o", str(text)).stdout == ""
    assert text.read_text().startswith("verdict: PRIVATE")


def test_output_never_replaces_what_is_not_ours(tmp_path):
    cache = mkdir(tmp_path / "c", 0o700)
    args = ["audit", str(cache), "--no-processes", "--format", "json", "-o"]
    other = tmp_path / "notes.txt"
    other.write_text("mine\n")
    assert "refusing to overwrite" in one_line_error(run(*args, str(other)))
    assert other.read_text() == "mine\n"
    link = tmp_path / "link.json"
    link.symlink_to(other)
    assert "symbolic link" in one_line_error(run(*args, str(link)))
    assert other.read_text() == "mine\n" and link.is_symlink()
    ls = tmp_path / "ls.json"  # a jaxcache document, but of another kind
    ls.write_text(run("ls", str(cache), "--format", "json").stdout)
    one_line_error(run(*args, str(ls)))
    assert json.loads(ls.read_text())["schema"] == "jaxcache.ls/1"


def test_bad_input_with_output_leaves_nothing(tmp_path):
    (tmp_path / "file").write_text("x")
    before = sorted(os.listdir(tmp_path))
    line = one_line_error(run("audit", str(tmp_path / "file" / "c"), "-o",
                              str(tmp_path / "new.txt")))
    assert "not a directory" in line and sorted(os.listdir(tmp_path)) == before
    one_line_error(run("seal", str(tmp_path), "-o", str(tmp_path / "s.txt")))  # no key
    assert sorted(os.listdir(tmp_path)) == before


@pytest.mark.parametrize("command", ["audit", "ls", "verify"])
def test_path_defaults_to_jax_compilation_cache_dir(tmp_path, command, pub):
    cache = mkdir(tmp_path / "c", 0o700)
    extra = {"audit": ["--no-processes"], "verify": ["--trusted-key", pub]}.get(command, [])
    proc = run(command, *extra, "--format", "json",
               env={"JAX_COMPILATION_CACHE_DIR": str(cache)})
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert str(cache) in (doc.get("path"), doc.get("directory"), doc.get("requested"))



@pytest.mark.parametrize("unset", [None, ""])  # empty counts as unset, as JAX takes it
def test_without_path_every_command_uses_the_directory_init_made(tmp_path, pub, unset):
    """One rule for the default directory (issue 28, point 6): init, audit, ls and verify
    given no PATH, with no $JAX_COMPILATION_CACHE_DIR, all use the one `init` makes."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path)}
    if unset is not None:
        env["JAX_COMPILATION_CACHE_DIR"] = unset
    made = tmp_path / "xdg" / "jaxcache" / "jax"
    assert run("init", env=env).returncode == 0 and made.is_dir()
    for command, extra in (("audit", ["--no-processes"]), ("ls", []),
                           ("verify", ["--trusted-key", pub])):
        proc = run(command, *extra, "--format", "json", env=env)
        assert proc.returncode == 0, (command, proc.stderr)
        doc = json.loads(proc.stdout)
        assert str(made) in (doc.get("path"), doc.get("directory"), doc.get("requested")), \
            command


def test_seal_signing_key_and_the_deprecated_key(tmp_path):
    keys = mkdir(tmp_path / "keys", 0o700)
    made = run("keygen", str(keys / "ci.key"), "--format", "json")
    assert made.returncode == 0, made.stderr
    key = valid("keygen", made.stdout)
    assert key["public_key"] == (keys / "ci.key.pub").read_text().strip()
    cache = mkdir(tmp_path / "c", 0o700)
    new = run("seal", str(cache), "--signing-key", str(keys / "ci.key"), "--format", "json")
    assert new.returncode == 0 and new.stderr == ""
    assert valid("seal-scan", new.stdout)["action"] == "seal"
    old = run("seal", str(cache), "--key", str(keys / "ci.key"), "--format", "json")
    assert old.returncode == 0 and valid("seal-scan", old.stdout)["all_valid"]
    assert old.stderr.count("\n") == 1 and "--key is deprecated: use --signing-key" in old.stderr
    help_text = run("seal", "--help").stdout
    assert "--signing-key KEYFILE" in help_text and " --key " not in help_text
    assert "the following arguments are required: --signing-key" in one_line_error(
        run("seal", str(cache)))


def test_every_machine_output_validates(tmp_path, pub):
    """The commands that need no JAX; tests/cli/test_output.py's world covers explain, bench,
    decide and verify on real JAX runs."""
    cache = mkdir(tmp_path / "c", 0o700)
    valid("init", run("init", str(tmp_path / "i"), "--format", "json").stdout)
    valid("audit", run("audit", str(cache), "--no-processes", "--format", "json").stdout)
    valid("ls", run("ls", str(cache), "--format", "json").stdout)
    valid("net", run("net", "--format", "json").stdout)
    valid("seal-scan", run("verify", str(cache), "--trusted-key", pub, "--format", "json").stdout)
    world = mkdir(tmp_path / "w", 0o777)
    blocked = run("decide", str(mkdir(world / "c", 0o700)), "--format", "json")
    assert blocked.returncode == 1 and valid("decide", blocked.stdout)["verdict"] == "BLOCKED"
    rec = tmp_path / "r.json"
    ran = run("run", "-q", "--cache-dir", str(cache), "--record", str(rec), "--",
              sys.executable, "-c", "pass")
    assert ran.returncode == 0, ran.stderr
    valid("explain", run("explain", str(rec), "--format", "json").stdout)
    sarif = run("audit", str(cache), "--no-processes", "--format", "sarif").stdout
    assert as_written(sarif)["runs"][0]["tool"]["driver"]["name"] == "jaxcache"


def test_bench_format_json_is_the_json_export(tmp_path):
    export = tmp_path / "b.json"
    proc = run("bench", "-t", "1", "-k", "1", "--no-prime", "--format", "json", "--json",
               str(export), "--", sys.executable, "-c", "pass")
    assert proc.returncode == 1, proc.stderr  # nothing cached
    doc = valid("bench", proc.stdout)  # stdout is only the document
    assert doc["summary"]["verdict"] == "nothing-cached"
    assert export.read_text() == proc.stdout and "wrote " in proc.stderr
    compare = run("bench", "--compare", str(export), str(export), "--format", "json")
    assert compare.returncode == 0, compare.stderr
    assert valid("bench-compare", compare.stdout)["settings"] == []  # a result against itself


def test_one_default_for_trials_and_warm_runs():
    for command in ("bench", "decide", "demo"):
        text = " ".join(run(command, "--help").stdout.split())
        assert "[default: 6; 1<=x<=1000]" in text, command
        assert "[default: 1; 1<=x<=100]" in text, command


@pytest.mark.parametrize("command", ["init", "audit", "ls", "bench", "explain", "net", "decide",
                                     "demo", "keygen", "seal", "verify"])
def test_every_command_with_output_takes_o_and_the_global_flags(command):
    text = run(command, "--help").stdout
    # Python 3.13's argparse names the value once: "-o, --output FILE"
    assert re.search(r"-o( FILE)?, --output FILE", text), (command, "-o")
    for flag in ("-q, --quiet", "-v, --verbose"):
        assert flag in text, (command, flag)


@pytest.mark.parametrize("command", ["init", "audit", "ls", "run", "bench", "explain", "net",
                                     "decide", "demo", "keygen", "seal", "verify", "records"])
def test_every_help_names_its_exit_codes(command):
    """--help says what each exit code means; a command that runs a program also says 126
    (not executable) and 127 (not found), as a shell would."""
    text = " ".join(run(command, "--help").stdout.split())
    assert re.search(r"[Ee]xit code", text), command
    if command in ("run", "bench", "explain", "decide"):
        assert "126" in text and "127" in text, command


@pytest.mark.parametrize("command", ["init", "audit", "ls", "run", "bench", "explain", "net",
                                     "decide", "records", "seal", "verify", "keygen", "demo"])
def test_every_help_ends_at_its_page_of_the_manual(command):
    """--help closes with the command's docs/ page, one that exists and that docs/index.md
    lists."""
    last = run(command, "--help").stdout.rstrip().splitlines()[-1]
    match = re.fullmatch(r"More: (docs/[a-z/-]+\.md) \(the manual's index: docs/index\.md\)",
                         last)
    assert match, last
    page = paths.CHECKOUT / match.group(1)
    assert page.is_file(), page
    index = (paths.CHECKOUT / "docs" / "index.md").read_text()
    assert f"]({page.relative_to(paths.CHECKOUT / 'docs')})" in index


def test_the_overview_and_the_option_list_one_set_of_verbose_commands():
    """`jaxcache --help` and -v's own help name the same commands (issue 44: the overview said
    five, the option seven), and each of them takes -v while another command refuses it."""
    def listed(text: str, before: str) -> list[str]:
        flat = " ".join(text.split())
        return re.search(before + r" \(([a-z, ]+) only", flat)[1].split(", ")

    overview = listed(run("--help").stdout, "-v/--verbose")
    option = listed(run("audit", "--help").stdout, "judged")
    assert overview == option and {"audit", "fingerprint", "gc"} <= set(overview)
    refused = run("ls", "-v", "/nonexistent")
    assert refused.returncode == 2 and "adds nothing to `jaxcache ls`" in refused.stderr
