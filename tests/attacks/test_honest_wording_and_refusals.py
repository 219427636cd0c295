"""Honest wording (counts, kinds, files), no stderr line over 200 characters, explain DIR
skipping what it refuses, keygen's and run --local's refusals (each once a hole a review
found)."""

from __future__ import annotations

import json
import os
import sys
import textwrap

import pytest
from support.jobs import clean_env, jaxcache

from jaxcache.trust.judgement.verdict import uninspected_text
from jaxcache.trust.kernel.cache_users import ProcessScan


def test_uninspected_processes_are_counted_named_and_advised_honestly():
    one = ProcessScan((), 1, ((1, "root"),))
    assert uninspected_text(one, root=True) == (
        "1 process could not be inspected (pid 1, user root: permission denied even as root)")
    assert uninspected_text(one, root=False) == (
        "1 process could not be inspected (pid 1, user root; run as root to see every user of "
        "the cache)")
    many = ProcessScan((), 5, tuple((p, "bob" if p % 2 else "eve") for p in range(10, 15)))
    text = uninspected_text(many, root=False)
    assert text.startswith("5 processes could not be inspected (users bob, eve;")


def test_audit_as_is_says_what_the_uninspected_note_means(tmp_path):
    proc = jaxcache("audit", "-v", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    notes = [ln for ln in proc.stdout.splitlines() if "could not be inspected" in ln]
    for line in notes:  # none when every process was readable
        assert "processes of other users" not in line
        assert ("run as root" in line) == (os.geteuid() != 0), line


def test_audit_warns_of_a_leading_tilde_jax_takes_literally(tmp_path):
    env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": "~/x"}
    proc = jaxcache("audit", "--format", "json", env=env, cwd=str(tmp_path))
    doc = json.loads(proc.stdout)
    tilde = [f for f in doc["findings"] if f["code"] == "path.tilde"]
    assert [f["effect"] for f in tilde] == ["warning"], doc["findings"]
    assert "absolute path" in tilde[0]["remedy"]
    assert not (tmp_path / "~").exists()  # an audit creates nothing
    text = jaxcache("audit", env=env, cwd=str(tmp_path)).stdout
    assert "[warning] JAX does not expand '~'" in text


def test_verify_and_seal_name_a_regular_file_as_ls_does(tmp_path):
    (tmp_path / "f").write_text("x")
    key = tmp_path / "keys" / "k.key"
    assert jaxcache("keygen", str(key)).returncode == 0
    for argv in (["ls"], ["verify"], ["seal", "--signing-key", str(key)]):
        proc = jaxcache(*argv, str(tmp_path / "f"))
        assert proc.returncode == 2, (argv, proc.stderr)
        assert proc.stderr.strip().endswith("f is not a directory (a regular file)"), proc.stderr
        assert "no such directory" not in proc.stderr


def test_an_empty_or_wrong_public_key_file_is_named(tmp_path):
    (tmp_path / "c").mkdir()
    empty = tmp_path / "empty.pub"
    empty.write_text("")
    proc = jaxcache("verify", "--trusted-key", str(empty), str(tmp_path / "c"))
    assert proc.returncode == 2
    assert f"{empty} is empty: not a jaxcache public key" in proc.stderr, proc.stderr
    wrong = tmp_path / "wrong.pub"
    wrong.write_text("hello\n")
    proc = jaxcache("verify", "--trusted-key", str(wrong), str(tmp_path / "c"))
    assert proc.returncode == 2 and f"{wrong} is not a jaxcache public key" in proc.stderr


def test_keygen_says_an_existing_directory_is_one(tmp_path):
    proc = jaxcache("keygen", str(tmp_path))
    assert proc.returncode == 2
    assert "already exists (a directory)" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_keygen_names_each_folder_it_creates(tmp_path):
    # README: `jaxcache keygen keys/ci.key` makes keys/; so keygen keeps doing it, saying so
    key = tmp_path / "a" / "b" / "k.key"
    proc = jaxcache("keygen", str(key))
    assert proc.returncode == 0, proc.stderr
    assert f"created folder {tmp_path / 'a'} (mode 0700)" in proc.stdout
    assert f"created folder {tmp_path / 'a' / 'b'} (mode 0700)" in proc.stdout
    assert (tmp_path / "a").stat().st_mode & 0o777 == 0o700
    again = jaxcache("keygen", "--format", "json", str(tmp_path / "a" / "b" / "k2.key"))
    assert json.loads(again.stdout)["created_folders"] == []
    made = jaxcache("keygen", "--format", "json", str(tmp_path / "n" / "k.key"))
    assert json.loads(made.stdout)["created_folders"] == [str(tmp_path / "n")]


def test_a_file_that_is_not_json_is_named_with_where_and_what_was_expected(tmp_path):
    bad = tmp_path / "notjson.txt"
    bad.write_text("hello\n")
    proc = jaxcache("explain", str(bad))
    assert proc.returncode == 2
    assert proc.stderr == (f"jaxcache: {bad} is not JSON (line 1, column 1): expected a "
                           "jaxcache run record\n"), proc.stderr
    proc = jaxcache("decide", "--audit", str(bad))
    assert proc.returncode == 2
    assert f"{bad} is not JSON (line 1, column 1): expected an audit document" in proc.stderr
    assert "Expecting value" not in proc.stderr


def test_run_says_a_redirected_cache_was_audited_and_refused(tmp_path):
    pytest.importorskip("jax")
    other = tmp_path / "other"
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent(f"""
        import jax, jax.numpy as jnp
        jax.config.update("jax_compilation_cache_dir", {str(other)!r})
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        print(jax.jit(lambda x: x * 2 + 1)(jnp.arange(4.0)).sum())
        """))
    record = tmp_path / "r.json"
    proc = jaxcache("run", "--cache-dir", str(tmp_path / "c"), "--record", str(record), "--",
                    sys.executable, str(job), env=clean_env())
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(record.read_text())
    assert [d["status"] for d in doc["jax_cache_dirs"] if not d["audited_dir"]] == ["refused"]
    last = proc.stderr.splitlines()[-1]
    assert last.startswith("jaxcache: exit 1: JAX was pointed at another cache directory, which "
                           "jaxcache audited and refused"), proc.stderr
    assert "did not audit" not in proc.stderr
    explain = jaxcache("explain", str(record))
    assert "did not audit" not in explain.stdout
    assert "other than the audited cache" in explain.stdout, explain.stdout


def test_a_symlinked_signature_is_not_said_to_be_read_by_jax(tmp_path):
    cache = tmp_path / "c"
    cache.mkdir(mode=0o700)
    (cache / f"jit_f-{'a' * 64}-cache.sig").symlink_to("/etc/hostname")
    key = tmp_path / "keys" / "k.key"
    assert jaxcache("keygen", str(key)).returncode == 0
    proc = jaxcache("seal", str(cache), "--signing-key", str(key))
    assert proc.returncode == 1  # refused: not trusted
    assert "JAX never reads it" in proc.stderr and "JAX follows" not in proc.stderr, proc.stderr
    doc = json.loads(jaxcache("audit", "--format", "json", str(cache)).stdout)
    (link,) = [f for f in doc["findings"] if f["code"] == "entry.symlink"]
    assert link["effect"] == "unsafe" and "sealed-cache reader refuses symlinks" in link["message"]


def _long_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if len(line) > 200]


def test_refusals_keep_every_stderr_line_within_200_characters(tmp_path):
    pad = max(2, 98 - len(str(tmp_path)))  # a 100-character folder, as long as real ones,
    deep = tmp_path / ("d" * (pad // 2)) / ("e" * (pad - pad // 2))  # however deep tmp_path is
    assert len(str(deep)) == max(100, len(str(tmp_path)) + 4)
    deep.mkdir(parents=True)
    open_dir = deep / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    cache = open_dir / "c"
    cache.mkdir(mode=0o700)
    key = tmp_path / "keys" / "k.key"
    assert jaxcache("keygen", str(key)).returncode == 0
    seal = jaxcache("seal", str(cache), "--signing-key", str(key))
    assert seal.returncode == 1
    first = seal.stderr.splitlines()[0]
    assert first == f"jaxcache: refusing to seal {cache}: verdict UNSAFE (everyone)", seal.stderr
    assert "can rename or replace" in seal.stderr  # the why, on the lines below
    run = jaxcache("run", "--cache-dir", str(open_dir), "--", "true")
    assert run.returncode == 1
    assert run.stderr.splitlines()[0].startswith(f"jaxcache: refusing cache {open_dir}: verdict")
    real = deep / ("r" * 30 + ".json")
    real.write_text("{}")
    link = deep / ("l" * 30 + ".json")
    link.symlink_to(real)
    explain = jaxcache("explain", str(link))
    assert explain.returncode == 2 and "is a symbolic link" in explain.stderr
    assert len(explain.stderr.strip().splitlines()) == 1  # bad input: one line
    for proc in (seal, run, explain):
        assert not _long_lines(proc.stderr), proc.stderr


@pytest.mark.parametrize("local", ["same", "inside", "above"])
def test_run_refuses_a_local_tier_that_is_not_apart_from_the_sealed_cache(tmp_path, local):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o700)
    key = tmp_path / "keys" / "k.key"
    assert jaxcache("keygen", str(key)).returncode == 0
    given = {"same": shared, "inside": shared / "sub", "above": tmp_path}[local]
    marker = tmp_path / "ran"
    proc = jaxcache("run", "--sealed", "--signing-key", str(key), "--cache-dir", str(shared),
                    "--local", str(given), "--", sys.executable, "-c",
                    f"open({str(marker)!r}, 'w')")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"jaxcache: the local tier {given} "), lines
    assert not marker.exists() and not (shared / "sub").exists()
    assert os.listdir(shared) == []


def test_many_uninspected_processes_of_one_user_name_the_user_once():
    scan = ProcessScan((), 4, tuple((p, "root") for p in range(1, 5)))
    assert uninspected_text(scan, root=True) == (
        "4 processes could not be inspected (user root: permission denied even as root)")
