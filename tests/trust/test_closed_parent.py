"""A cache others can write inside a directory only its owner can search (issue 44's third
trial: "UNSAFE, everyone can change" read as false for a 0777 folder in a 0700 one).

What is true is said: they cannot reach it by name today. It still counts, as sshd's StrictModes
counts a 0777 ~/.ssh in a 0700 home, because permissions are checked when a path is opened: the
last test is that attack, a process of another user that entered the folder before its parent
was closed plants an entry after. The remedy names the change that closes it, which is safe
here (no other user's job can be using the folder by name)."""

from __future__ import annotations

import re
import subprocess

from support.jobs import audit_json, jaxcache
from support.users import as_user_argv, mkdir, needs_root

pytestmark = needs_root

KEY = "cd" * 32


def _layout(base, accounts, cache_mode: int = 0o777, group: str | None = None):
    home = mkdir(base / "home", 0o700, owner=accounts.a)
    cache = mkdir(home / "cache", cache_mode, owner=accounts.a, group=group)
    return home, cache


def test_a_writable_folder_in_a_closed_one_says_what_is_true_and_still_counts(base, accounts):
    home, cache = _layout(base, accounts)
    proc = jaxcache("audit", "--no-processes", str(cache))
    assert proc.returncode == 1, proc.stderr  # UNSAFE all the same
    assert proc.stdout.startswith("verdict: UNSAFE"), proc.stdout
    flat = " ".join(proc.stdout.split())
    assert (f"(not by name today: only {accounts.a} and root can search {home} (mode 0700); "
            "counted all "
            "the same, as sshd's StrictModes does") in flat, flat
    # everyone's remedy is the chmod that closes it; the folder's owner (an untrusted user
    # here, judged as root) keeps every way in, so theirs is the plain one
    [everyone_said] = [f for f in re.split(r"\[[A-Z-]+\] ", flat)
                       if f.startswith("everyone can change")]
    assert f"take away the write access named above on {cache} (chmod go-w" in everyone_said
    assert "do not point JAX at this directory" not in everyone_said, everyone_said
    _, doc = audit_json(cache, "--no-processes")
    everyone = [w for w in doc["writers"] if w["kind"] == "everyone"]
    assert everyone and all("not by name today" in w["chain"][1] for w in everyone), everyone


def test_an_open_folder_keeps_the_plain_words(base, accounts):
    """The same folder where others can search the parent: no note, the plain remedy."""
    home, cache = _layout(base, accounts)
    home.chmod(0o755)
    flat = " ".join(jaxcache("audit", "--no-processes", str(cache)).stdout.split())
    assert "not by name today" not in flat
    assert "do not point JAX at this directory" in flat


def test_group_members_are_shut_out_too_and_the_owner_is_not_told_so(base, accounts):
    """Group write on the cache inside a 0700 folder of one member: the closed folder grants
    its group nothing, so the other member is kept out by name (said); its owner is not."""
    home, cache = _layout(base, accounts, 0o770, group=accounts.group)
    _, doc = audit_json(cache, "--no-processes")
    b = [w for w in doc["writers"] if w["principal"] == accounts.b]
    a = [w for w in doc["writers"] if w["principal"] == accounts.a]
    assert b and all("not by name today" in w["chain"][1] for w in b), b
    assert a and not any("not by name today" in w["chain"][1] for w in a), a


def test_a_process_inside_before_the_parent_closed_still_plants(base, accounts):
    """Why it counts: c's process entered the folder while its parent was open; the parent is
    closed to 0700; the process still creates an entry in it by a relative name."""
    home, cache = _layout(base, accounts)
    home.chmod(0o755)
    name = f"jit_planted-{KEY}-cache"
    script = ("import os, sys\nprint('in', flush=True)\nsys.stdin.readline()\n"
              f"fd = os.open({name!r}, os.O_WRONLY | os.O_CREAT, 0o644)\n"
              "os.write(fd, b'not your code')\nos.close(fd)\nprint('planted', flush=True)\n")
    proc = subprocess.Popen([*as_user_argv(accounts.c), "/usr/bin/python3", "-c", script],
                            cwd=cache, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline().strip() == "in"
        home.chmod(0o700)  # now no one but its owner reaches the cache by name
        check = subprocess.run([*as_user_argv(accounts.c), "/usr/bin/python3", "-c",
                                f"import os; os.listdir({str(cache)!r})"],
                               capture_output=True, text=True)
        assert check.returncode != 0 and "Permission denied" in check.stderr
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "planted"
    finally:
        proc.kill()
        proc.wait()
    assert (cache / name).read_bytes() == b"not your code"
    assert (cache / name).stat().st_uid != (cache.stat().st_uid)
    audit = jaxcache("audit", "--no-processes", str(cache))
    assert audit.returncode == 1 and audit.stdout.startswith("verdict: UNSAFE"), audit.stdout


def test_the_owner_of_the_closed_folder_is_not_told_to_chmod_it_away(base, accounts):
    """An untrusted user who owns the 0700 folder keeps every way in (they can replace what is
    inside it, whatever its bits): their finding has the plain remedy, no shut-out note."""
    home = mkdir(base / "home", 0o700, owner=accounts.c)
    cache = mkdir(home / "cache", 0o700, owner=accounts.c)
    proc = jaxcache("audit", "--no-processes", str(cache))
    assert proc.returncode == 1 and proc.stdout.startswith("verdict: UNSAFE"), proc.stdout
    flat = " ".join(proc.stdout.split())
    assert f"[UNSAFE] {accounts.c} can change what JAX loads" in flat, flat
    assert "not by name today" not in flat and "take away the write access" not in flat, flat
    assert "do not point JAX at this directory" in flat, flat
