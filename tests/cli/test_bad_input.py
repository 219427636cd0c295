"""Bad input: one clear line and exit 2 (or a finding), never a traceback, nothing modified."""

from __future__ import annotations

import os

import pytest
from support.jobs import audit_json, codes, jaxcache
from support.users import mkdir


def snapshot(root):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            out[os.path.join(dirpath, name)] = (st.st_mode, st.st_uid, st.st_size)
    return out


def one_line_error(proc, code=2):
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(("jaxcache:", "Error:")), proc.stderr
    return lines[0]


def test_path_through_a_regular_file(base):
    (base / "file").write_text("x")
    before = snapshot(base)
    line = one_line_error(jaxcache("audit", str(base / "file" / "cache")))
    assert "is not a directory (a regular file)" in line
    assert snapshot(base) == before


def test_symlink_loop(base):
    (base / "a").symlink_to(base / "b")
    (base / "b").symlink_to(base / "a")
    line = one_line_error(jaxcache("audit", str(base / "a" / "cache")))
    assert "too many symbolic links" in line


def test_very_deep_path_is_judged_not_crashed(base):
    deep = base.joinpath(*(["d"] * 600))  # longer than PATH_MAX: the fd walk does not care
    rc, doc = audit_json(deep)
    assert doc["exists"] is False and len(doc["missing"]) == 600
    assert doc["verdict"] == "PRIVATE"


def test_deep_existing_tree_beyond_path_max(base):
    cur = os.open(base, os.O_RDONLY)
    try:
        for _ in range(500):
            os.mkdir("ddddddddd", 0o700, dir_fd=cur)
            nxt = os.open("ddddddddd", os.O_RDONLY, dir_fd=cur)
            os.close(cur)
            cur = nxt
    finally:
        os.close(cur)
    path = str(base) + "/ddddddddd" * 500
    assert len(path) > 4096  # longer than PATH_MAX: no path-based syscall could reach it
    rc, doc = audit_json(path, "--no-processes")
    assert doc["exists"] is True and rc == 0


@pytest.mark.parametrize("name", ["new\nline", "tab\there", "esc\x1b[31mred"])
def test_names_with_control_characters(base, name):
    cache = mkdir(base / name, 0o700)
    proc = jaxcache("audit", str(cache))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    assert name not in proc.stdout  # escaped, so one name stays one visible line
    assert "\\x" in proc.stdout
    rc, doc = audit_json(cache)
    assert doc["path"].endswith(name.replace("\n", "\\x0a").replace("\t", "\\x09")
                                .replace("\x1b", "\\x1b"))


def test_name_with_invalid_utf8(base):
    raw = os.fsencode(str(base)) + b"/bad\xff\xfename"
    os.mkdir(raw, 0o700)
    path = os.fsdecode(raw)
    proc = jaxcache("audit", path)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    assert "bad\\xff\\xfename" in proc.stdout
    for fmt in ("json", "sarif"):
        proc = jaxcache("audit", "--format", fmt, path)
        assert proc.returncode == 0, proc.stderr


def test_url_is_unverifiable_with_advice():
    rc, doc = audit_json("gs://bucket/jax-cache")
    assert (rc, doc["verdict"]) == (1, "UNVERIFIABLE")
    [f] = [f for f in doc["findings"] if f["code"] == "path.url"]
    assert "bucket" in f["remedy"]


def test_tilde_is_not_expanded(base):
    rc, doc = audit_json("~/cache", cwd=str(base))
    assert doc["path"] == f"{base}/~/cache"
    assert "path.tilde" in codes(doc)


def test_relative_path_is_relative_to_cwd(base):
    mkdir(base / "rel", 0o700)
    rc, doc = audit_json("rel", cwd=str(base))
    assert doc["resolved"] == f"{base}/rel" and "path.relative" in codes(doc)


@pytest.mark.parametrize("args,fragment", [
    (["audit", ""], "empty"),
    (["audit", "/x", "--format", "xml"], "invalid choice: 'xml'"),
    (["audit", "/x", "--user", "no-such-user-jx"], "no such user"),
    (["ls", "/nonexistent-jx/dir"], "no such directory"),
    (["nosuchcommand"], "invalid choice: 'nosuchcommand'"),
])
def test_usage_errors(args, fragment):
    proc = jaxcache(*args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert fragment in proc.stderr


def test_invalid_policy_files(base, tmp_path):
    cache = mkdir(base / "cache", 0o700)
    bad = {
        "syntax.toml": "trusted_users = [",
        "type.toml": "trusted_users = 'root'",
        "unknown.toml": "trusted_user = ['root']",
        "nouser.toml": "trusted_users = ['no-such-user-jx']",
        "relative.toml": "[[cache]]\npath = 'rel'\n",
    }
    for name, text in bad.items():
        policy = tmp_path / name
        policy.write_text(text)
        policy.chmod(0o600)
        line = one_line_error(jaxcache("audit", "--policy", str(policy), str(cache)))
        assert "policy" in line
    writable = tmp_path / "writable.toml"
    writable.write_text("")
    writable.chmod(0o666)
    assert "writable by group or others" in one_line_error(
        jaxcache("audit", "--policy", str(writable), str(cache)))
    assert "not found" in one_line_error(
        jaxcache("audit", "--policy", str(tmp_path / "missing.toml"), str(cache)))


def test_policy_inside_the_audited_tree_is_refused(base):
    cache = mkdir(base / "cache", 0o700)
    policy = cache / "policy.toml"
    policy.write_text("")
    policy.chmod(0o600)
    assert "inside the audited tree" in one_line_error(
        jaxcache("audit", "--policy", str(policy), str(cache)))


@pytest.mark.parametrize("user", ["\u00b2", "99999999999999999999999", "x\x1b]0;pwned\x07\x1b[31m"])
def test_a_bad_user_is_one_escaped_line(base, user):
    """`--user` that names no account: a digit Python's int() refuses, a number no uid holds,
    and terminal escapes (shown escaped, never sent to the terminal)."""
    line = one_line_error(jaxcache("audit", "--user", user, str(base)))
    assert "no such user" in line and "\x1b" not in line and "\x07" not in line, line


def test_a_url_of_a_service_jaxcache_does_not_serve_gets_no_other_services_advice():
    """An http:// cache is unverifiable, advised in general terms: Cloud Storage's permission
    names beside it misled."""
    proc = jaxcache("audit", "http://example.invalid/cache")
    assert proc.returncode == 1 and "(path.url)" in proc.stdout, proc.stdout + proc.stderr
    assert "storage.objects.create" not in proc.stdout and "an http:// URL" in proc.stdout
