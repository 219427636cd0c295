"""The project file (issue 44): `[tool.jaxcache]` in pyproject.toml or `.jaxcache.toml`, found by
walking up from the working directory, read by every command, shown by `jaxcache config` with
where each setting came from. Trust settings, unknown keys and wrong types in it are refused
(one line, exit 2, nothing written); a symlinked file or one another user owns is refused.

Real files in fresh directories, real `jaxcache` subprocesses."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import jsonschema
import pytest
from support import paths
from support.jobs import clean_env, jaxcache

from jaxcache.documents import schemas
from jaxcache.errors import JaxcacheError, PolicyError
from jaxcache.project import policy_keys, project_toml
from jaxcache.project.locate import Found


def project(tmp_path, text: str, name: str = "pyproject.toml"):
    """A project directory holding `name` with `text`, and a folder deep inside it (the
    working directory the walk starts from)."""
    root = tmp_path / "proj"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / name).write_text(text)
    return root, root / "src" / "pkg"


def config(cwd, *args: str, **env: str):
    return jaxcache("config", *args, cwd=str(cwd), env=clean_env(NO_COLOR="1", **env))


def as_json(proc) -> dict:
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    jsonschema.validate(doc, schemas.load("config"))
    return {s["name"]: s for s in doc["settings"]} | {"_doc": doc}


PYPROJECT = """\
[project]
name = "demo"

[tool.jaxcache]
cache_dir = "build/jax-cache"
min_compile_time = 0.25

[tool.jaxcache.bench]
trials = 8
"""


def test_config_shows_each_setting_its_value_and_where_it_came_from(tmp_path):
    root, deep = project(tmp_path, PYPROJECT)
    got = as_json(config(deep, "--format", "json",
                         JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0"))
    where = f"{root / 'pyproject.toml'} [tool.jaxcache]"
    assert got["_doc"]["project_file"] == {"path": str(root / "pyproject.toml"),
                                           "table": "tool.jaxcache", "settings_read": True}
    assert got["cache_dir"]["value"] == str(root / "build" / "jax-cache")  # the file's folder
    assert got["cache_dir"]["source"] == {"kind": "file", "where": where}
    assert (got["min_compile_time"]["value"], got["min_compile_time"]["source"]["kind"]) == (
        0.25, "file")
    assert got["min_entry_size"]["value"] == 0
    assert got["min_entry_size"]["source"] == {
        "kind": "env", "where": "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"}
    assert (got["bench.trials"]["value"], got["bench.trials"]["source"]["kind"]) == (8, "file")
    # the table it is in, not the file's top table (the fourth trial)
    assert got["bench.trials"]["source"]["where"] == f"{root / 'pyproject.toml'} " \
        "[tool.jaxcache.bench]"
    assert (got["bench.warm"]["value"], got["bench.warm"]["source"]["kind"]) == (1, "default")
    # the environment beats the file, a flag beats both
    env_dir = tmp_path / "from-env"
    got = as_json(config(deep, "--format", "json", JAX_COMPILATION_CACHE_DIR=str(env_dir)))
    assert got["cache_dir"]["value"] == str(env_dir)
    assert got["cache_dir"]["source"] == {"kind": "env", "where": "JAX_COMPILATION_CACHE_DIR"}
    got = as_json(config(deep, "--format", "json", "--cache-dir", "/srv/c",
                         "--min-compile-time", "2", JAX_COMPILATION_CACHE_DIR=str(env_dir)))
    assert got["cache_dir"]["source"] == {"kind": "flag", "where": "--cache-dir"}
    assert got["min_compile_time"]["value"] == 2.0
    # the text says the same, the file first
    text = config(deep)
    assert text.returncode == 0, text.stderr
    first, *rows = text.stdout.splitlines()
    assert first == f"project file: {where}"
    assert any(r.split()[:2] == ["cache_dir", str(root / "build" / "jax-cache")]
               and r.endswith(where) for r in rows), text.stdout
    assert any(r.split() == ["bench.warm", "1", "default"] for r in rows), text.stdout


def test_no_project_file_means_the_defaults(tmp_path):
    got = as_json(config(tmp_path, "--format", "json"))
    assert got["_doc"]["project_file"] is None
    assert {s["source"]["kind"] for s in got["_doc"]["settings"]} == {"default"}
    text = config(tmp_path)
    assert text.stdout.startswith("project file: none (no .jaxcache.toml or pyproject.toml in "
                                  f"{tmp_path} or above)\n"), text.stdout


def test_jaxcache_toml_wins_and_a_pyproject_without_the_table_stops_the_walk(tmp_path):
    root, deep = project(tmp_path, 'cache_dir = "/from/dot-file"\n[records]\nkeep = 5\n',
                         name=".jaxcache.toml")
    (root / "pyproject.toml").write_text('[tool.jaxcache]\ncache_dir = "/from/pyproject"\n')
    got = as_json(config(deep, "--format", "json"))
    assert got["cache_dir"]["value"] == "/from/dot-file"
    assert got["cache_dir"]["source"]["where"] == str(root / ".jaxcache.toml")
    assert got["records.keep"]["source"]["where"] == f"{root / '.jaxcache.toml'} [records]"
    assert got["_doc"]["project_file"] == {"path": str(root / ".jaxcache.toml"), "table": None,
                                           "settings_read": True}
    # a nested project of its own, no [tool.jaxcache]: the outer file is not its project's
    inner = deep / "inner"
    inner.mkdir()
    (inner / "pyproject.toml").write_text('[project]\nname = "inner"\n')
    got = as_json(config(inner, "--format", "json"))
    assert got["cache_dir"]["source"]["kind"] == "default"
    assert got["_doc"]["project_file"] == {"path": str(inner / "pyproject.toml"),
                                           "table": None, "settings_read": False}
    assert config(inner).stdout.startswith(
        f"project file: none ({inner / 'pyproject.toml'} has no [tool.jaxcache] table")


@pytest.mark.parametrize("text,key,says", [
    ('trusted_users = ["alice"]\n', "trusted_users",
     "is a trust setting: it belongs in the protected policy"),
    ('[[cache]]\npath = "/srv/c"\ntrusted_groups = ["ml"]\n', "cache",
     "is a trust setting: it belongs in the protected policy"),
    ('[x]\ntrusted_users = ["alice"]\n', "x.trusted_users",  # in any table: named as such
     "is a trust setting: it belongs in the protected policy"),
    ('cache_dri = "/c"\n[bench.y]\ntrusted_keys = []\n', "bench.y.trusted_keys",  # first
     "is a trust setting: it belongs in the protected policy"),
    ("allow_untrusted = true\n", "allow_untrusted", "only a flag on the command line"),
    ('cache_dri = "/srv/c"\n', "cache_dri", "unknown key (did you mean cache_dir?)"),
    ("[bench]\ntrails = 3\n", "bench.trails", "unknown key (did you mean bench.trials?)"),
    ('min_compile_time = "fast"\n', "min_compile_time", "must be a number of seconds >= 0"),
    ("[bench]\ntrials = 0\n", "bench.trials", "must be a whole number from 1 to 1000"),
    ('cache_dir = "~/c"\n', "cache_dir", "starts with '~'"),
    ('[gc]\nmax_size = "lots"\n', "gc.max_size", "not a size: 'lots'"),
    ("[gc]\nmax_age = true\n", "gc.max_age", "must be a string such as"),
])
def test_bad_settings_are_refused_on_one_line_and_nothing_is_written(tmp_path, text, key, says):
    root, deep = project(tmp_path, text, name=".jaxcache.toml")
    where = root / ".jaxcache.toml"
    proc = config(deep)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(f"jaxcache: project file {where}: {key} ")
    assert says in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    # every command reads it: a job is not started, no record or cache made
    record, cache = tmp_path / "rec.json", tmp_path / "cache"
    run = jaxcache("run", "--record", str(record), "--cache-dir", str(cache), "--", "true",
                   cwd=str(deep), env=clean_env())
    assert run.returncode == 2 and run.stderr == proc.stderr
    assert not record.exists() and not cache.exists()
    for command in (("audit",), ("records",), ("fingerprint",)):
        other = jaxcache(*command, cwd=str(deep), env=clean_env())
        assert (other.returncode, other.stderr) == (2, proc.stderr), command


def test_the_trust_key_refusal_names_where_it_belongs(tmp_path):
    root, deep = project(tmp_path, PYPROJECT.replace(
        "min_compile_time = 0.25\n", 'min_compile_time = 0.25\ntrusted_keys = ["ed25519:AA"]\n'))
    proc = config(deep)
    assert proc.returncode == 2
    assert proc.stderr == (
        f"jaxcache: project file {root / 'pyproject.toml'} [tool.jaxcache]: trusted_keys is a "
        "trust setting: it belongs in the protected policy (docs/reference/policy-file.md), "
        "never in a project file whoever can write the checkout controls\n")


TRUST_REFUSAL = "is a trust setting: it belongs in the protected policy"


def _policy_takes(doc: dict) -> str:
    """What the policy's parser says of `doc`: every key here is given a wrong value."""
    from jaxcache.trust.inputs import policy_toml
    from jaxcache.trust.kernel.principals import Accounts

    with pytest.raises(PolicyError) as refused:
        policy_toml.policy_of("/p/policy.toml", doc, Accounts())
    return str(refused.value)


@pytest.mark.parametrize("key", sorted(policy_keys.TOP_LEVEL))
def test_every_key_the_policy_takes_is_refused_as_a_trust_setting(tmp_path, key):
    """The project file's trust settings are the policy's own keys, the set its parser refuses
    every other key by: a key the policy gains is refused here too, with no list to keep."""
    assert "unknown key" not in _policy_takes({key: 0})  # the policy's parser takes it
    root, deep = project(tmp_path, f"{key} = 1\n", name=".jaxcache.toml")
    proc = config(deep)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (f"jaxcache: project file {root / '.jaxcache.toml'}: {key} "
                           f"{TRUST_REFUSAL} (docs/reference/policy-file.md), never in a project "
                           "file whoever can write the checkout controls\n")
    # in any table, as a table of its own, and in a [cache] table as the policy's [[cache]]
    for text, named in ((f"[bench]\n{key} = 1\n", f"bench.{key}"),
                        (f"[{key}]\nissuer = \"x\"\n", f"{key}.issuer"),
                        (f"[cache]\n{key} = 1\n", f"cache.{key}")):
        with pytest.raises(JaxcacheError, match=f": {named} {TRUST_REFUSAL}"):
            project_toml.parse(Found("/p/.jaxcache.toml", None, text.encode()))


@pytest.mark.parametrize("key", sorted(policy_keys.CACHE_TABLE - {"path"}))
def test_every_key_of_the_policys_cache_tables_is_refused_in_a_cache_table(key):
    assert "unknown key" not in _policy_takes({"cache": [{"path": "/c", key: 0}]})
    for text in (f"[cache]\npath = \"/c\"\n{key} = 1\n",
                 f"[[cache]]\npath = \"/c\"\n{key} = 1\n"):
        with pytest.raises(JaxcacheError, match=f": cache(.path)? {TRUST_REFUSAL}"):
            project_toml.parse(Found("/p/.jaxcache.toml", None, text.encode()))


def test_a_key_the_policy_does_not_take_is_an_unknown_key_in_both_files():
    assert "unknown key(s) trusted_userz at top level" in _policy_takes({"trusted_userz": 0})
    assert "unknown key(s) paths at [[cache]] /c" in _policy_takes(
        {"cache": [{"path": "/c", "paths": 0}]})
    with pytest.raises(JaxcacheError, match=": trusted_userz is an unknown key"):
        project_toml.parse(Found("/p/.jaxcache.toml", None, b"trusted_userz = 1\n"))


def test_the_docs_name_every_key_of_the_policy_the_project_file_refuses():
    text = (paths.CHECKOUT / "docs" / "reference" / "project-file.md").read_text()
    refused = text[text.index("**Trust settings are refused**"):text.index("- **Only your own")]
    assert [k for k in sorted(policy_keys.TOP_LEVEL - {"cache"}) if f"`{k}`" not in refused] == []


def test_a_symlinked_project_file_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text('cache_dir = "/srv/planted"\n')
    root = tmp_path / "proj"
    root.mkdir()
    (root / ".jaxcache.toml").symlink_to(elsewhere)
    proc = config(root)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (f"jaxcache: project file {root / '.jaxcache.toml'} is a symbolic "
                           "link: jaxcache reads the file itself, never through a link (copy "
                           "it there)\n")


def test_a_project_file_another_user_owns_is_refused(tmp_path, accounts):
    root, deep = project(tmp_path, 'cache_dir = "/srv/theirs"\n', name=".jaxcache.toml")
    shutil.chown(root / ".jaxcache.toml", accounts.c)
    proc = config(deep)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (f"jaxcache: project file {root / '.jaxcache.toml'} is owned by "
                           f"{accounts.c}, not by you or root: its settings would be theirs "
                           "to choose\n")
    os.chown(root / ".jaxcache.toml", 0, 0)
    (root / ".jaxcache.toml").chmod(0o666)
    proc = config(deep)
    assert proc.returncode == 2
    assert "anyone can change it" in proc.stderr and proc.stderr.count("\n") == 1


def test_help_teaches_with_an_example_file(tmp_path):
    proc = jaxcache("config", "--help", cwd=str(tmp_path), env=clean_env(COLUMNS="100"))
    assert proc.returncode == 0
    for words in ("[tool.jaxcache]", ".jaxcache.toml", "min_compile_time =", "[bench]",
                  "trusted_users", "docs/reference/project-file.md"):
        assert words in proc.stdout, words


def test_bench_defaults_come_from_the_project_file(tmp_path):
    _, deep = project(tmp_path, "[tool.jaxcache.bench]\ntrials = 9\nwarm = 3\n")
    proc = jaxcache("bench", "--help", cwd=str(deep), env=clean_env(COLUMNS="200"))
    assert proc.returncode == 0
    assert "[default: 9; " in proc.stdout and "[default: 3; " in proc.stdout, proc.stdout


def test_another_users_pyproject_without_the_table_only_ends_the_search(tmp_path, accounts):
    """Settings are taken only from a file you or root own; one that sets nothing of ours is
    not judged (a shared checkout's pyproject.toml)."""
    root, deep = project(tmp_path, '[project]\nname = "theirs"\n')
    shutil.chown(root / "pyproject.toml", accounts.c)
    got = as_json(config(deep, "--format", "json"))
    assert got["_doc"]["project_file"]["settings_read"] is False
    (root / "pyproject.toml").write_text(PYPROJECT)
    assert config(deep).returncode == 2


def test_a_folder_you_cannot_search_holds_no_settings_for_you(accounts):
    """Run as another user from a working directory that user cannot enter (runuser keeps the
    caller's; a CI job started in root's private checkout): no project file can be looked for
    there, so none applies, and every command works (it failed every command with 'cannot be
    read: Permission denied'). A file you can find but not read is still refused."""
    base = Path(tempfile.mkdtemp(dir="/tmp"))  # pytest's own folders are root's alone
    try:
        root, deep = project(base, PYPROJECT)
        base.chmod(0o700)  # root's alone: accounts.c cannot search it
        proc = jaxcache("config", "--format", "json", user=accounts.c, cwd=str(deep),
                        env=clean_env())
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["project_file"] is None
        base.chmod(0o755)
        (root / "pyproject.toml").chmod(0o600)  # there, but not readable by accounts.c
        proc = jaxcache("config", user=accounts.c, cwd=str(deep), env=clean_env())
        assert proc.returncode == 2 and "cannot be read: Permission denied" in proc.stderr
    finally:
        shutil.rmtree(base)
