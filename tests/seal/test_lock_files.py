"""Lock files of a sealed tier (issue 39, class 6; seal/locks.py): each account locks a file of
its own, judged by type and owner and never followed, so a planted link, directory or FIFO, or
another account's file, stops only the writer whose name it took, with a line saying what to
remove and whose it is; `verify --strict` fails on such a lock and on JAX's -atime file left
without its entry. Real files, real users, a real JAX job."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys

import pytest
from support import paths
from support.jobs import clean_env, jaxcache
from support.users import IS_ROOT, as_user_argv, mkdir, needs_root, user_runtime

pytest.importorskip("cryptography")

KEY = "jit_f-" + "ab" * 32
OTHER = "jit_g-" + "cd" * 32


@pytest.fixture
def sealed(tmp_path):
    """A sealed directory with one entry a trusted key signed, and that key's public text."""
    from jaxcache.seal.keys import generate
    from jaxcache.seal.store import SealedCache

    key = generate()
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    cache = SealedCache(str(shared), trusted=[key.public], signer=key)
    cache.put(KEY, b"compiled bytes")
    cache.close()
    return shared, key.public.text


def verify(shared, pub, *extra):
    return jaxcache("verify", "--trusted-key", pub, *extra, str(shared))


def test_verify_strict_fails_on_an_atime_file_without_its_entry(sealed):
    shared, pub = sealed
    (shared / f"{KEY}-atime").write_bytes(b"\0" * 8)  # JAX's, beside its entry: fine
    assert verify(shared, pub, "--strict").returncode == 0
    (shared / f"{OTHER}-atime").write_bytes(b"\0" * 8)  # no entry: nothing signed it
    plain, strict = verify(shared, pub), verify(shared, pub, "--strict", "--format", "json")
    assert plain.returncode == 0 and f"LEFTOVER       {OTHER}-atime" in plain.stdout
    assert strict.returncode == 1, strict.stdout
    assert json.loads(strict.stdout)["leftovers"] == [f"{OTHER}-atime"]


def _plant(shared, name, kind, target):
    where = shared / name
    if kind == "link":
        where.symlink_to(target)
    elif kind == "dir":
        where.mkdir()
    else:
        os.mkfifo(where)
    return where


@pytest.mark.parametrize(("name", "kind"), [
    (".jaxcache-lock", "link"), (".jaxcache-lock", "dir"), (".lockfile", "fifo"),
    (f".jaxcache-lock-{os.geteuid()}", "link"), (".lockfile", "link")])
def test_verify_strict_fails_on_a_lock_that_is_no_regular_file(sealed, tmp_path, name, kind):
    shared, pub = sealed
    target = tmp_path / "victim"
    target.write_text("keep me\n")
    before = target.stat()
    _plant(shared, name, kind, target)
    plain = verify(shared, pub)
    assert plain.returncode == 0, plain.stdout  # what a reader loads is fine
    assert f"BAD LOCK       {name} is a" in plain.stdout, plain.stdout
    strict = verify(shared, pub, "--strict", "--format", "json")
    assert strict.returncode == 1, strict.stdout
    [bad] = json.loads(strict.stdout)["bad_locks"]
    what = {"link": "a symbolic link", "dir": "a directory", "fifo": "a FIFO"}[kind]
    assert bad["name"] == name and bad["why"].startswith(f"is {what} owned by ")
    after = target.stat()  # never followed, never opened
    assert target.read_text() == "keep me\n" and after.st_mtime_ns == before.st_mtime_ns
    assert after.st_atime_ns == before.st_atime_ns


@needs_root
def test_a_lock_owned_by_another_account_than_its_own_fails_the_gate(sealed, accounts):
    shared, pub = sealed
    a, c = (pwd.getpwnam(u).pw_uid for u in (accounts.a, accounts.c))
    mine = shared / f".jaxcache-lock-{a}"  # accounts.a's lock, made by accounts.a: fine
    mine.write_bytes(b"")
    os.chown(mine, a, -1)
    jax_lock = shared / ".lockfile"  # JAX's, the directory owner's (root): fine
    jax_lock.write_bytes(b"")
    assert verify(shared, pub, "--strict").returncode == 0
    os.chown(mine, c, -1)  # accounts.c made accounts.a's lock: planted
    strict = verify(shared, pub, "--strict")
    assert strict.returncode == 1
    assert (f"BAD LOCK .jaxcache-lock-{a} is a file owned by {accounts.c} (uid {c}), not "
            f"by {accounts.a} (uid {a})") in " ".join(strict.stdout.split())
    mine.unlink()
    os.chown(jax_lock, c, -1)  # neither the verifier's, root's nor the directory owner's
    strict = verify(shared, pub, "--strict", "--format", "json")
    assert strict.returncode == 1
    assert [b["name"] for b in json.loads(strict.stdout)["bad_locks"]] == [".lockfile"]


@pytest.mark.skipif(not IS_ROOT, reason="chown of the planted link needs root")
def test_a_planted_lock_stops_a_sized_publisher_with_a_line_naming_it(tmp_path, accounts):
    """A real JAX job publishing under jax_compilation_cache_max_size: a link planted at its
    lock's name (and at the name earlier versions shared) is never followed; each write
    fails with a line naming the link and its owner; once removed, writes resume."""
    pytest.importorskip("jax")
    key = tmp_path / "keys" / "ci.key"
    assert jaxcache("keygen", str(key)).returncode == 0
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    for name in (f".jaxcache-lock-{os.geteuid()}", ".jaxcache-lock"):
        (shared / name).symlink_to(victim)
        os.chown(shared / name, pwd.getpwnam(accounts.c).pw_uid, -1, follow_symlinks=False)
    env = clean_env(JAX_COMPILATION_CACHE_MAX_SIZE=str(1 << 30),
                    JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")

    def publish(record):
        proc = jaxcache("run", "-q", "--sealed", "--signing-key", str(key), "--trusted-key",
                        f"{key}.pub", "--cache-dir", str(shared), "--record", str(record), "--",
                        sys.executable, str(paths.PROGRAMS / "two_jits.py"), env=env)
        assert proc.returncode == 0, proc.stderr
        return json.loads(record.read_text())["seal"]

    blocked = publish(tmp_path / "blocked.json")
    assert blocked["writes"] == [] and blocked["write_errors"], blocked
    for line in blocked["write_errors"]:
        assert (f".jaxcache-lock-{os.geteuid()} is a symbolic link owned by {accounts.c} "
                f"(uid {pwd.getpwnam(accounts.c).pw_uid}), not a lock file: planted there; "
                "remove it") in line, line
    assert victim.read_text() == "keep me\n"
    assert not [n for n in os.listdir(shared) if n.endswith("-cache")]
    (shared / f".jaxcache-lock-{os.geteuid()}").unlink()
    resumed = publish(tmp_path / "resumed.json")
    assert resumed["writes"] and resumed["write_errors"] == [], resumed
    assert (shared / f".jaxcache-lock-{os.geteuid()}").is_file()
    assert not (shared / f".jaxcache-lock-{os.geteuid()}").is_symlink()


PUBLISH = """
import json, sys
from jaxcache.seal.keys import generate
from jaxcache.seal.store import SealedCache
key = generate()
cache = SealedCache(sys.argv[1], trusted=[key.public], signer=key, max_size=lambda: 1 << 20)
try:
    cache.put(sys.argv[2], b"compiled by " + sys.argv[2].encode())
except OSError as exc:
    print(json.dumps({"error": str(exc)}))
else:
    print(json.dumps({"writes": len(cache.writes), "public": key.public.text}))
"""


@needs_root
def test_one_accounts_lock_never_blocks_another_account(base, accounts):
    """Two accounts publish, size-limited, into one shared tier: the first one's lock does
    not keep the second from writing (one shared lock made 0600 by the first did), and the
    gate passes over both accounts' locks."""
    shared = mkdir(base / "shared", 0o1777)
    runtime = user_runtime()
    pubs = []
    for user, key in ((accounts.a, KEY), (accounts.b, OTHER)):
        proc = subprocess.run([*as_user_argv(user), runtime.python, "-c", PUBLISH, str(shared),
                               key], capture_output=True, text=True, env=runtime.env(),
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        assert doc.get("writes") == 1, (user, doc)
        pubs.append(doc["public"])
    uid = {u: pwd.getpwnam(u).pw_uid for u in (accounts.a, accounts.b)}
    for user in (accounts.a, accounts.b):
        lock = shared / f".jaxcache-lock-{uid[user]}"
        assert lock.stat().st_uid == uid[user] and lock.stat().st_mode & 0o777 == 0o600
    proc = jaxcache("verify", "--strict", "--trusted-key", pubs[0], "--trusted-key", pubs[1],
                    str(shared), "--format", "json")
    doc = json.loads(proc.stdout)
    assert doc["bad_locks"] == [] and doc["others"] == [] and len(doc["entries"]) == 2, doc


def test_lock_names_are_known_to_the_inventory_and_name_their_account():
    from jaxcache.seal import locks
    from jaxcache.trust.entries import classify

    assert classify(locks.name(1007))[0] == "lockfile"
    assert locks.named_owner(".jaxcache-lock-1007") == 1007
    for other in (".jaxcache-lock-", ".jaxcache-lock-x1", ".jaxcache-lock-١٢"):  # Arabic digits
        assert classify(other)[0] == "unexpected" and locks.named_owner(other) is None
    assert locks.named_owner(".jaxcache-lock") is None  # the name earlier versions shared
    assert classify(".jaxcache-lock")[0] == "lockfile"
