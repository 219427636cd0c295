"""`jaxcache init`: create private, accept private, refuse and change nothing otherwise."""

from __future__ import annotations

import json
import os
import stat
import subprocess

from support.jobs import jaxcache
from support.users import mkdir, needs_root, needs_setfacl


def init_json(*args, **kw):
    proc = jaxcache("init", "--format", "json", *args, **kw)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_creates_missing_components_0700_whatever_the_umask(base):
    target = base / "a" / "b" / "cache"
    proc = subprocess.run(["sh", "-c", 'umask 0277 && exec "$@"', "sh", *jaxcache_argv(
        "init", str(target))], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    for p in (base / "a", base / "a" / "b", target):
        st = os.lstat(p)
        assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
    # the ways that audit it again before JAX loads from it, not a bare JAX setting
    assert f"jaxcache run --cache-dir {target} -- python train.py" in proc.stdout
    assert f'jaxcache.enable("{target}")' in proc.stdout
    assert "jax.config.update" not in proc.stdout


def test_default_location_is_the_user_cache_dir(base):
    env = {**os.environ, "XDG_CACHE_HOME": str(base / "xdg")}
    rc, doc = init_json(env=env)
    assert rc == 0 and doc["path"] == f"{base}/xdg/jaxcache/jax"
    assert doc["created"] == [f"{base}/xdg", f"{base}/xdg/jaxcache", f"{base}/xdg/jaxcache/jax"]
    rc, doc = init_json("--name", "team", env=env)
    assert doc["path"].endswith("/jaxcache/team") and doc["created"] == [doc["path"]]


def test_existing_private_dir_is_accepted_unchanged(base):
    cache = mkdir(base / "cache", 0o700)
    before = os.stat(cache)
    rc, doc = init_json(str(cache))
    assert (rc, doc["ok"], doc["created"]) == (0, True, [])
    assert os.stat(cache).st_mtime_ns == before.st_mtime_ns


def test_existing_non_private_dir_is_refused_and_left_alone(base):
    cache = mkdir(base / "cache", 0o775)
    rc, doc = init_json(str(cache))
    assert rc == 1 and not doc["ok"] and "mode 0775" in doc["refused"]
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o775


@needs_root
def test_existing_dir_of_another_user_is_refused(base, accounts):
    cache = mkdir(base / "cache", 0o700, accounts.b)
    rc, doc = init_json(str(cache))
    assert rc == 1 and "not by you" in doc["refused"]


def test_refuses_under_a_world_writable_parent_and_creates_nothing(base):
    world = mkdir(base / "world", 0o777)
    before = os.stat(world).st_mtime_ns
    rc, doc = init_json(str(world / "x" / "cache"))
    assert rc == 1 and doc["audit"]["verdict"] == "UNSAFE"
    assert "could be changed by everyone" in doc["refused"]
    # judged before any mkdir: not made and taken back (another user could have swapped the
    # name in between, and init would have removed theirs)
    assert os.listdir(world) == [] and os.stat(world).st_mtime_ns == before


def test_a_sticky_parent_is_fine_to_create_in_and_audit_says_init_would(base):
    """In a sticky 1777 directory (/tmp) others can make the name first, but not rename ours
    away: init creates it PRIVATE, and audit of the missing path says init would; under a
    plain 0777 parent audit says init would refuse, and init does."""
    sticky, world = mkdir(base / "sticky", 0o1777), mkdir(base / "world", 0o777)
    for parent, would in ((sticky, "would create it"), (world, "would refuse to create it")):
        proc = jaxcache("audit", str(parent / "cache"), "--no-processes")
        said = " ".join(proc.stdout.split())
        assert proc.stdout.startswith("NOT FOUND:") and f"`jaxcache init` {would}" in said \
            or f"jaxcache init {parent / 'cache'}` (or jaxcache run, jaxcache.enable()) " \
            f"{would}" in said, proc.stdout
        assert "verdict as it stands: UNSAFE" in proc.stdout
    rc, doc = init_json(str(sticky / "cache"))
    assert rc == 0 and doc["audit"]["verdict"] == "PRIVATE"
    rc, doc = init_json(str(world / "cache"))
    assert rc == 1 and os.listdir(world) == []


@needs_setfacl
def test_inherited_default_acl_is_refused_and_undone(base):
    parent = mkdir(base / "parent", 0o700)
    subprocess.run(["setfacl", "-d", "-m", "u:nobody:rwx", str(parent)], check=True)
    rc, doc = init_json(str(parent / "cache"))
    assert rc == 1 and "ACL" in doc["refused"]
    assert os.listdir(parent) == []


def test_text_refusal_says_so_first_and_sends_the_user_elsewhere(base):
    world = mkdir(base / "world", 0o777)
    target = world / "cache"
    proc = jaxcache("init", str(target))
    assert proc.returncode == 1 and proc.stderr == ""
    first, advice = proc.stdout.split("\n\n", 1)[0].split("\n", 1)
    assert first == (f"REFUSED: {target}: the audit says UNSAFE (the new directory could be "
                     "changed by everyone); nothing was changed")
    # not "run init" to someone who just did: a location under a private parent instead
    assert "`jaxcache init` without PATH makes" in " ".join(advice.split())
    assert "(jaxcache init)" not in proc.stdout
    # advice that is more than "run init" stays: who else may rely on this access
    assert "check who uses it before changing any permission" in " ".join(proc.stdout.split())
    assert "verdict as it stands: UNSAFE" in proc.stdout
    assert not proc.stdout.startswith("jaxcache audit") and os.listdir(world) == []
    quiet = jaxcache("init", "-q", str(target))
    assert (quiet.returncode, quiet.stdout) == (1, first + "\n")


def test_existing_non_private_dir_refused_in_words(base):
    cache = mkdir(base / "cache", 0o775)
    proc = jaxcache("init", str(cache))
    assert proc.returncode == 1
    assert proc.stdout.startswith(f"REFUSED: {cache}: {cache} has mode 0775: others can "
                                  "write it")


def test_a_directory_its_audit_calls_private_is_accepted_as_it_is(base):
    """Readable by others (0755) is PRIVATE to the audit: init accepts it, says that others
    can read the compiled programs, and changes nothing (issue 28, point 6)."""
    cache = mkdir(base / "cache", 0o755)
    audit = jaxcache("audit", str(cache))
    assert audit.stdout.startswith("verdict: PRIVATE")
    proc = jaxcache("init", str(cache))
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.startswith(f"already private: {cache} (mode 0755, verdict PRIVATE)")
    assert "note: others can read it (mode 0755)" in proc.stdout
    assert stat.S_IMODE(cache.stat().st_mode) == 0o755
    doc = json.loads(jaxcache("init", "--format", "json", str(cache)).stdout)
    assert doc["ok"] is True and doc["note"].startswith("others can read it")


def test_refuses_literal_tilde(base):
    proc = jaxcache("init", "~/cache", cwd=str(base))
    assert proc.returncode == 2 and "does not expand" in proc.stderr
    assert os.listdir(base) == []


def jaxcache_argv(*args):
    import sys

    return [sys.executable, "-m", "jaxcache", *args]


def test_without_path_init_makes_the_directory_run_would_use(base):
    """$JAX_COMPILATION_CACHE_DIR set: init without PATH makes that one (what `jaxcache run`
    and JAX would use), and its hint needs no --cache-dir; --name still picks the cache dir."""
    target = base / "ci-cache"
    env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": str(target),
           "XDG_CACHE_HOME": str(base / "xdg")}
    proc = jaxcache("init", env=env)
    assert proc.returncode == 0 and stat.S_IMODE(os.stat(target).st_mode) == 0o700
    assert "  jaxcache run -- python train.py" in proc.stdout
    other = jaxcache("init", str(base / "other"), env=env)
    assert f"jaxcache run --cache-dir {base / 'other'} -- python train.py" in other.stdout
    rc, doc = init_json("--name", "team", env=env)
    assert rc == 0 and doc["path"] == f"{base}/xdg/jaxcache/team"


def test_concurrent_inits_of_one_missing_path_all_succeed(base):
    """Ranks of one job each init the same missing directory at once: the pre-creation audit
    of one can see another's mkdir ("changed while it was being audited"); it must look again
    and accept the directory, not refuse the rank (a Slurm step lost a rank this way)."""
    for round_ in range(3):
        target = base / f"r{round_}" / "cache"
        procs = [subprocess.Popen(jaxcache_argv("init", "--format", "json", str(target)),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(6)]
        outs = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0] * 6, [e for _, e in outs]
        made = [json.loads(o)["created"] for o, _ in outs]
        assert sum(1 for m in made if str(target) in m) == 1  # exactly one made it


@needs_root
def test_audit_of_a_missing_path_never_promises_what_its_user_cannot_create(base, accounts):
    """/srv-like: a root-owned 0755 folder, a team member auditing a cache path in it that
    does not exist yet. Nobody but root could change it (no blocker), yet the member cannot
    create it: the audit says so and who must, instead of `jaxcache init` would create it."""
    from support.team import as_user

    srv = mkdir(base / "srv", 0o755)
    home = mkdir(base / "home-a", 0o700, accounts.a)
    target = srv / "jaxcache"
    said = as_user(accounts.a, home, "-m", "jaxcache", "audit", "--no-processes",
                   str(target))
    text = " ".join(said.stdout.split())
    assert said.stdout.startswith("NOT FOUND:"), said.stdout + said.stderr
    assert f"you cannot create it: {srv} is not writable by you" in text, text
    assert "would create it" not in text
    made = as_user(accounts.a, home, "-m", "jaxcache", "init", str(target))
    assert made.returncode != 0 and not target.exists()  # what the audit said
    root = " ".join(jaxcache("audit", "--no-processes", str(target)).stdout.split())
    assert f"jaxcache init {target}` (or jaxcache run, jaxcache.enable()) would create it" \
        in root  # root can
