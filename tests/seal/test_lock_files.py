"""Lock files (issue 39, class 6; seal/publishing/locks.py): each account locks its size-limited
writes to a tier with a file in its own state folder, named by the tier directory's device and
inode, so nobody else can plant it and no two accounts wait for each other, while two processes of
one account exclude each other. The lock names found in a tier (JAX's `.lockfile`, earlier versions'
`.jaxcache-lock` and `.jaxcache-lock-<uid>`) stop no writer and are never followed;
`verify --strict` fails on one that is no regular file of its owner's, and on JAX's -atime
file left without its entry. Real files, real users, real processes, a real JAX job."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys

import pytest
from support import namespaces, paths
from support.jobs import clean_env, jaxcache
from support.users import IS_ROOT, as_user_argv, mkdir, needs_root, user_runtime

pytest.importorskip("cryptography")

KEY = "jit_f-" + "ab" * 32
OTHER = "jit_g-" + "cd" * 32


@pytest.fixture
def sealed(tmp_path):
    """A sealed directory with one entry a trusted key signed, and that key's public text."""
    from jaxcache.seal.stores.sealed_cache import SealedCache
    from jaxcache.trust.inputs.signing_keys import generate

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
    what = {"link": "a symbolic link", "dir": "a directory", "fifo": "a FIFO (named pipe)"}[kind]
    assert bad["name"] == name and bad["why"].startswith(f"is {what} owned by ")
    after = target.stat()  # never followed, never opened
    assert target.read_text() == "keep me\n" and after.st_mtime_ns == before.st_mtime_ns
    assert after.st_atime_ns == before.st_atime_ns


@needs_root
def test_a_lock_owned_by_another_account_than_its_own_fails_the_gate(sealed, accounts):
    shared, pub = sealed
    a, c = (pwd.getpwnam(u).pw_uid for u in (accounts.a, accounts.c))
    mine = shared / f".jaxcache-lock-{a}"  # accounts.a's, the previous layout's: harmless
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
def test_locks_planted_in_the_tier_stop_no_sized_publisher_and_are_never_followed(tmp_path,
                                                                                   accounts):
    """A real JAX job publishing under jax_compilation_cache_max_size: links another account
    planted at every lock name of the tier (this account's of the previous layout, the name
    earlier versions shared, JAX's) stop nothing and are never followed: its lock is in its
    state folder; `verify --strict` still fails on them."""
    pytest.importorskip("jax")
    key = tmp_path / "keys" / "ci.key"
    assert jaxcache("keygen", str(key)).returncode == 0
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    planted = (f".jaxcache-lock-{os.geteuid()}", ".jaxcache-lock", ".lockfile")
    for name in planted:
        (shared / name).symlink_to(victim)
        os.chown(shared / name, pwd.getpwnam(accounts.c).pw_uid, -1, follow_symlinks=False)
    state = tmp_path / "state"
    env = clean_env(JAX_COMPILATION_CACHE_MAX_SIZE=str(1 << 30),
                    JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", XDG_STATE_HOME=str(state))
    record = tmp_path / "record.json"
    proc = jaxcache("run", "-q", "--sealed", "--signing-key", str(key), "--trusted-key",
                    f"{key}.pub", "--cache-dir", str(shared), "--record", str(record), "--",
                    sys.executable, str(paths.PROGRAMS / "two_jits.py"), env=env)
    assert proc.returncode == 0, proc.stderr
    seal = json.loads(record.read_text())["seal"]
    assert seal["writes"] and seal["write_errors"] == [], seal
    assert victim.read_text() == "keep me\n"
    assert all((shared / n).is_symlink() for n in planted)
    [lock] = (state / "jaxcache" / "locks").iterdir()
    assert lock.is_file() and not lock.is_symlink() and lock.stat().st_mode & 0o777 == 0o600
    assert lock.read_text() == f"jaxcache lock of size-limited writes to {shared}\n"
    assert (state / "jaxcache" / "locks").stat().st_mode & 0o777 == 0o700
    strict = verify(shared, f"{key}.pub", "--strict", "--format", "json")
    assert strict.returncode == 1, strict.stdout
    assert sorted(b["name"] for b in json.loads(strict.stdout)["bad_locks"]) == sorted(planted)


PUT = """
import sys
from jaxcache.trust.inputs.signing_keys import generate
from jaxcache.seal.stores.sealed_cache import SealedCache
key = generate()
cache = SealedCache(sys.argv[1], trusted=[key.public], signer=key, max_size=lambda: 1 << 20)
try:
    cache.put(sys.argv[2], b"compiled")
except OSError as exc:
    print(exc)
else:
    print("written")
"""


def test_a_state_folder_others_can_write_fails_the_sized_write_closed(tmp_path):
    """Where the lock's folder would be one anyone can write (who could swap the lock), the
    size-limited write fails with one line saying so, and nothing is written."""
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    state = tmp_path / "open"
    state.mkdir()
    state.chmod(0o777)
    proc = subprocess.run([sys.executable, "-c", PUT, str(shared), KEY], capture_output=True,
                          text=True, env={**os.environ, "XDG_STATE_HOME": str(state)})
    assert proc.returncode == 0, proc.stderr
    assert f"refusing to keep a lock in {state}: anyone can write there" in proc.stdout
    assert "XDG_STATE_HOME" in proc.stdout
    assert os.listdir(shared) == [] and os.listdir(state) == []
    ok = tmp_path / "mine"
    proc = subprocess.run([sys.executable, "-c", PUT, str(shared), KEY], capture_output=True,
                          text=True, env={**os.environ, "XDG_STATE_HOME": str(ok)})
    assert proc.stdout == "written\n", proc.stdout + proc.stderr  # the control


def test_a_link_at_the_lock_in_the_state_folder_is_refused_not_followed(tmp_path):
    from jaxcache.seal.publishing import locks

    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    state = tmp_path / "state"
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    fd = os.open(shared, os.O_RDONLY | os.O_DIRECTORY)
    try:
        lock = str(state / "jaxcache" / "locks" / locks.lock_name(os.fstat(fd)))
    finally:
        os.close(fd)
    os.makedirs(os.path.dirname(lock), mode=0o700)
    os.symlink(victim, lock)
    proc = subprocess.run([sys.executable, "-c", PUT, str(shared), KEY], capture_output=True,
                          text=True, env={**os.environ, "XDG_STATE_HOME": str(state)})
    assert f"{lock} is a symbolic link owned by " in proc.stdout, proc.stdout + proc.stderr
    assert "remove it" in proc.stdout and os.listdir(shared) == []
    assert victim.read_text() == "keep me\n"


HOLD = """
import os, sys
from jaxcache.seal.publishing import lru
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
with lru.locked(fd):
    print("held", flush=True)
    sys.stdin.readline()
"""

PROBE = """
import fcntl, os, sys
from jaxcache.seal.publishing import locks
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
lock = locks.hold(fd)
try:
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    print("blocked")
else:
    print("free")
"""


def _probe(tier, argv=(sys.executable,), env=None):
    proc = subprocess.run([*argv, "-c", PROBE, str(tier)], capture_output=True, text=True,
                          env=env, timeout=120, cwd="/")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def _holding(tier):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tier)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def _release(holder):
    assert holder.stdin is not None
    holder.stdin.write("\n")
    holder.stdin.close()
    assert holder.wait(timeout=120) == 0


def test_two_processes_of_one_account_exclude_each_other_on_one_tier(tmp_path):
    """A real process holds the tier's lock: another process of the same account finds it
    taken (also by another path to the same directory), a lock of another tier free; once
    released, it is free. No waiting on time: the holder keeps it until told."""
    tier, other = tmp_path / "tier", tmp_path / "other"
    tier.mkdir()
    other.mkdir()
    (tmp_path / "via").symlink_to(tier)
    holder = _holding(tier)
    try:
        assert _probe(tier) == "blocked"
        assert _probe(tmp_path / "via") == "blocked"
        assert _probe(other) == "free"
    finally:
        _release(holder)
    assert _probe(tier) == "free"
    assert not [n for n in os.listdir(tier) if n.startswith(".")]  # nothing of ours in the tier


@needs_root
def test_another_account_never_waits_for_your_lock(base, accounts):
    """While this account holds its lock of a sticky shared tier, another account's lock of
    the same tier is free: each account's is its own (a file in its own state folder)."""
    shared = mkdir(base / "shared", 0o1777)
    state = mkdir(base / "state-b", 0o700, owner=accounts.b)
    runtime = user_runtime()
    holder = _holding(shared)
    try:
        assert _probe(shared, (*as_user_argv(accounts.b), runtime.python),
                      runtime.env(XDG_STATE_HOME=str(state))) == "free"
        assert _probe(shared) == "blocked"  # the check can fail
    finally:
        _release(holder)


PUBLISH = """
import json, sys
from jaxcache.trust.inputs.signing_keys import generate
from jaxcache.seal.stores.sealed_cache import SealedCache
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
    states = {u: mkdir(base / f"state-{u}", 0o700, owner=u) for u in (accounts.a, accounts.b)}
    pubs = []
    for user, key in ((accounts.a, KEY), (accounts.b, OTHER)):
        proc = subprocess.run([*as_user_argv(user), runtime.python, "-c", PUBLISH, str(shared),
                               key], capture_output=True, text=True,
                              env=runtime.env(XDG_STATE_HOME=str(states[user])), timeout=120)
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        assert doc.get("writes") == 1, (user, doc)
        pubs.append(doc["public"])
    uid = {u: pwd.getpwnam(u).pw_uid for u in (accounts.a, accounts.b)}
    for user in (accounts.a, accounts.b):  # each in its own state folder, none in the tier
        [lock] = (states[user] / "jaxcache" / "locks").iterdir()
        assert lock.stat().st_uid == uid[user] and lock.stat().st_mode & 0o777 == 0o600
    assert not [n for n in os.listdir(shared) if n.startswith(".")]
    proc = jaxcache("verify", "--strict", "--trusted-key", pubs[0], "--trusted-key", pubs[1],
                    str(shared), "--format", "json")
    doc = json.loads(proc.stdout)
    assert doc["bad_locks"] == [] and doc["others"] == [] and len(doc["entries"]) == 2, doc


def test_lock_names_are_known_to_the_inventory_and_name_their_account():
    from jaxcache.seal.publishing import locks
    from jaxcache.trust.kernel.entries import classify

    assert classify(locks.name(1007))[0] == "lockfile"
    assert locks.named_owner(".jaxcache-lock-1007") == 1007
    for other in (".jaxcache-lock-", ".jaxcache-lock-x1", ".jaxcache-lock-١٢"):  # Arabic digits
        assert classify(other)[0] == "unexpected" and locks.named_owner(other) is None
    assert locks.named_owner(".jaxcache-lock") is None  # the name earlier versions shared
    assert classify(".jaxcache-lock")[0] == "lockfile"


TIES = """
import json, os, sys
from jaxcache.seal.publishing import lru
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
a, b = (f"jit_{m}-{'0' * 64}-cache" for m in "ab")
for name in (a, b):
    with open(os.path.join(sys.argv[1], name), "wb") as f:
        f.write(b"x" * 100)
    lru.mark(fd, name, 255)
lru.touch(fd, a, 255)  # a hit in the same tick as b's write
print(json.dumps([n.split("-")[0] for n in lru.evict(fd, 200, 100, 255)]))
"""


@needs_root
def test_a_hit_in_the_same_tick_as_another_write_still_counts_as_later(tmp_path):
    """ramfs stamps files by the kernel's coarse tick (4-10 ms): without the process's own
    clock within the tick, a's hit and b's write tie and a, first by name, is evicted."""
    tier = tmp_path / "tier"
    tier.mkdir()
    steps = [{"mount": ["mount", "-t", "ramfs", "none", str(tier)]},
             {"run": [sys.executable, "-c", "import os, sys; os.chmod(sys.argv[1], 0o700)",
                      str(tier)]}]
    steps += [{"run": [sys.executable, "-c", TIES, str(tier)],
               "env": {"XDG_STATE_HOME": str(tmp_path / "state")}}] * 5
    for res in namespaces.run_steps(steps, tmp_path)[2:]:
        assert res["rc"] == 0, res["stderr"]
        assert json.loads(res["stdout"]) == ["jit_b"], res
