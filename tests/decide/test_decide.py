"""`jaxcache decide`, and the two-teams scenario end to end with real service users."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from support import paths
from support.jobs import jaxcache, no_state
from support.users import as_user_argv, isolation, mkdir, needs_root

pytest.importorskip("jax")

ROOT = paths.CHECKOUT
TRAIN = str(ROOT / "examples" / "train.py")
MANY = str(ROOT / "examples" / "many_small.py")


# Where service users see this checkout: in place, or, when a directory above it (a 0700
# mktemp dir, say) keeps them out, its parts bind-mounted into a 0755 directory of the test's
# own inside a private mount namespace. Nothing of the checkout is chmod-ed.
PARTS = ("src", "examples", ".venv")


def _seen_as(path: str, root: Path) -> str:
    return path.replace(str(ROOT), str(root), 1) if path.startswith(str(ROOT)) else path


def user_env(root: Path) -> dict[str, str]:
    """A service user cannot reach root's interpreter; the system python with our
    site-packages and source on PYTHONPATH runs the same code."""
    site = _seen_as(sysconfig.get_paths()["purelib"], root)
    return {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "JAX_PLATFORMS": "cpu", "LANG": "C.UTF-8",
            "PYTHONPATH": f"{site}:{root / 'src'}",
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",  # written however fast
            **isolation()}


def as_user(user: str, *argv: str, root: Path = ROOT) -> subprocess.CompletedProcess:
    cmd = [*as_user_argv(user), "/usr/bin/python3", *argv]
    if root != ROOT:
        mounts = " && ".join(f'mount --bind "$1/{part}" "$2/{part}"' for part in PARTS
                             if (ROOT / part).is_dir())
        script = f"{mounts} && shift 2 && exec \"$@\""
        cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh",
               str(ROOT), str(root), *cmd]
    return subprocess.run(cmd, env=user_env(root), capture_output=True, text=True, cwd="/")


def reachable_root(user: str, base: Path) -> Path | None:
    """The checkout as `user` can import it: in place, or bind-mounted under `base`."""
    if as_user(user, "-c", "import jax, jaxcache").returncode == 0:
        return ROOT
    root = base / "checkout"
    for part in PARTS:
        (root / part).mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    if as_user(user, "-c", "import jax, jaxcache", root=root).returncode == 0:
        return root
    return None


@pytest.fixture(scope="module")
def train_bench(tmp_path_factory):
    """A bench whose cold runs write every module however fast this machine compiles, and
    whose bar is any saving the interval proves (how large a saving is noticeable is
    test_noticeable.py's, and test_an_unsaved_threshold_makes_it_not_worth_it's). The 4 trials
    an interval needs, and up to 6 (what it always ran) while the verdict is undecided: a quiet
    machine stops at the first decided verdict, a loaded one gets the trials it needs."""
    out = tmp_path_factory.mktemp("decide") / "bench.json"
    proc = jaxcache("bench", "-t", "4", "--until-decided", "--max-trials", "6", "-k", "1",
                    "--no-prime", "--min-compile-time", "0", "--min-saving", "0",
                    "--min-fraction", "0", "--json", str(out), "--", sys.executable, TRAIN)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(out.read_text())["summary"]["verdict"] == "saves", proc.stdout
    return out


def decide(*args, **kw):
    proc = jaxcache("decide", "--format", "json", *map(str, args), **kw)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


@needs_root
def test_two_teams_sharing_one_directory(base, accounts, tmp_path, train_bench):
    if not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("no system python3 a service user can run")
    root = reachable_root(accounts.b, base)
    if root is None:
        pytest.skip("service users cannot import jax from this checkout, even bind-mounted")
    team_a, team_b = accounts.a, accounts.b  # both in the shared group
    shared = mkdir(base / "shared-cache", 0o2770, team_a, accounts.group)
    records = {u: mkdir(base / f"records-{u}", 0o700, u) for u in (team_a, team_b)}
    for user in (team_b, team_a):  # B writes first; A's process then loads what B wrote
        run = as_user(user, "-m", "jaxcache", "run", "--allow-untrusted", "--cache-dir",
                      str(shared), "--record", str(records[user] / "r.json"), "--",
                      "/usr/bin/python3", _seen_as(TRAIN, root), root=root)
        assert run.returncode == 0, run.stderr
    owners = {p.stat().st_uid for p in shared.iterdir() if p.name.endswith("-cache")}
    import pwd

    assert pwd.getpwnam(team_b).pw_uid in owners
    warm = json.loads((records[team_a] / "r.json").read_text())
    assert any(m["outcome"] == "hit" for m in warm["modules"])  # A ran B's compiled code

    # team A's decision: its processes would trust B's writes -> BLOCKED
    rc, doc = decide(shared, "--user", team_a, "--bench", train_bench)
    assert (rc, doc["verdict"]) == (1, "BLOCKED")
    writers = doc["tests"][0]
    assert writers["passed"] is False and team_b in " ".join(writers["evidence"])
    assert any("separate, private cache directories" in a for a in doc["advice"])
    assert any(team_b in a and "owns entries" in a for a in doc["advice"])
    assert not any("chmod" in a for a in doc["advice"])

    # declared trusted by policy, with a noticeable saving -> SHARE
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[[cache]]\npath = "{shared}"\ntrusted_users = ["{team_b}"]\n')
    policy.chmod(0o600)
    rc, doc = decide(shared, "--user", team_a, "--policy", policy, "--bench", train_bench)
    assert (rc, doc["verdict"]) == (0, "SHARE"), json.dumps(doc["tests"], indent=1)
    assert [t["passed"] for t in doc["tests"]] == [True, True, True]
    # judged on one bench of one account: said, with how to judge the other writers' jobs (a
    # new user's fifth trial read "the jobs are compatible" as the team's)
    assert "the one job benched hits what it wrote" in doc["summary"], doc["summary"]
    unseen = f"`jaxcache decide {shared} --records DIR...`"
    assert any(unseen in e for e in doc["tests"][1]["evidence"]), doc["tests"][1]
    assert any(unseen in a for a in doc["advice"]), doc["advice"]
    # with both teams' records (copied by whoever decides: records are trusted inputs, yours
    # or root's) the jobs were seen: no such line
    seen = []
    for user in (team_a, team_b):
        seen.append(mkdir(tmp_path / f"seen-{user}", 0o700))
        (seen[-1] / "r.json").write_bytes((records[user] / "r.json").read_bytes())
    rc, doc = decide(shared, "--user", team_a, "--policy", policy, "--bench", train_bench,
                     "--records", *seen)
    assert (rc, doc["verdict"]) == (0, "SHARE"), json.dumps(doc["tests"], indent=1)
    assert "the jobs are compatible" in doc["summary"]
    assert not any("--records DIR" in a for a in doc["advice"]), doc["advice"]


def test_private_cache_with_a_noticeable_saving(base, train_bench):
    cache = mkdir(base / "cache", 0o700)
    rc, doc = decide(cache, "--bench", train_bench)
    assert (rc, doc["verdict"]) == (0, "PRIVATE")
    # the bench set --min-compile-time 0: run the job that way, unless the settings here
    # already do (a project file: the fourth trial was told to pass the flag it had set)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PERSISTENT")}
    assert any("run the job the same way (`jaxcache run --min-compile-time 0" in a
               for a in doc["advice"]), doc["advice"]
    project = mkdir(base / "project", 0o700)
    (project / "pyproject.toml").write_text("[tool.jaxcache]\nmin_compile_time = 0\n")
    rc, doc = decide(cache, "--bench", train_bench, env=env, cwd=str(project))
    assert (rc, doc["verdict"]) == (0, "PRIVATE")
    said = [a for a in doc["advice"] if "measured with --min-compile-time 0" in a]
    assert said and "which the settings here already give" in said[0], doc["advice"]
    assert not any("run the job the same way" in a for a in doc["advice"]), doc["advice"]


def test_many_small_functions_are_not_worth_it(base, tmp_path):
    out = tmp_path / "many.json"
    jaxcache("bench", "-t", "1", "-k", "1", "--no-prime", "--min-compile-time", "1000",
             "--json", str(out), "--", sys.executable, MANY, "--functions", "12")
    cache = mkdir(base / "cache", 0o700)
    rc, doc = decide(cache, "--bench", out)
    assert (rc, doc["verdict"]) == (1, "NOT-WORTH-IT")
    noticeable = doc["tests"][2]
    assert noticeable["passed"] is False and "nothing-cached" in " ".join(noticeable["evidence"])


def test_an_unsaved_threshold_makes_it_not_worth_it(base, train_bench):
    cache = mkdir(base / "cache", 0o700)
    rc, doc = decide(cache, "--bench", train_bench, "--min-saving", "60")
    assert (rc, doc["verdict"]) == (1, "NOT-WORTH-IT")


def test_incompatible_jobs_get_separate_directories(base, accounts, tmp_path, train_bench):
    other = json.loads(train_bench.read_text())
    other["comparable"]["xla_flags"] = "--xla_cpu_enable_fast_math=true"
    other["command"] = ["team-b-job"]
    other_path = tmp_path / "other.json"
    other_path.write_text(json.dumps(other))
    cache = mkdir(base / "cache", 0o770, accounts.a, accounts.group)
    policy = tmp_path / "p.toml"
    policy.write_text(f'trusted_groups = ["{accounts.group}"]\n')
    policy.chmod(0o600)
    rc, doc = decide(cache, "--user", accounts.a, "--policy", policy, "--bench", train_bench,
                     "--bench", other_path)
    assert (rc, doc["verdict"]) == (0, "PRIVATE")
    assert "xla_flags" in " ".join(doc["tests"][1]["evidence"])


def test_bad_input():
    proc = jaxcache("decide")
    assert proc.returncode == 2 and "PATH" in proc.stderr
    proc = jaxcache("decide", "/tmp", "--audit", "/nonexistent.json")
    assert proc.returncode == 2
    proc = jaxcache("decide", "--audit", "/nonexistent.json")
    assert proc.returncode == 2 and "no such audit" in proc.stderr


def test_warm_runs_that_missed_are_no_saving(train_bench):
    from jaxcache.decide import AuditFacts, BenchFacts
    from jaxcache.decide import decide as decide_fn

    bench = json.loads(train_bench.read_text())
    bench["summary"]["verdict"] = "warm-missed"  # as a bench reports when keys differ
    bench["summary"]["message"] = "warm runs did not hit the entries the cold run wrote"
    audit = {"verdict": "PRIVATE", "judged_for": {"user": "root"}, "writers": [],
             "untrusted_writers": [], "findings": [], "resolved": "/x"}
    result = decide_fn(AuditFacts.from_json(audit), [BenchFacts.from_json(bench)])
    assert result.verdict == "NOT-WORTH-IT" and result.tests[2].passed is False


@needs_root
def test_sealed_shared_directory_can_be_shared(base, accounts, tmp_path, train_bench):
    """Others can write it, but readers load only what a declared key holder signed: SHARE.
    The same directory with a key held by someone undeclared: BLOCKED."""
    pytest.importorskip("cryptography")
    shared = mkdir(base / "sealed", 0o777)
    key = tmp_path / "keys" / "ci.key"
    assert jaxcache("keygen", str(key)).returncode == 0
    pub = (tmp_path / "keys" / "ci.key.pub").read_text().strip()
    policy = tmp_path / "policy.toml"
    for holder, expected in (("root", (0, "SHARE")), (accounts.c, (1, "BLOCKED"))):
        policy.write_text(f'[[cache]]\npath = "{shared}"\n'
                          f'trusted_keys = [{{ holder = "{holder}", key = "{pub}" }}]\n')
        policy.chmod(0o600)
        rc, doc = decide(shared, "--sealed", "--policy", policy, "--bench", train_bench)
        assert (rc, doc["verdict"]) == expected, json.dumps(doc["tests"], indent=1)
    text = jaxcache("audit", "--sealed", "--policy", str(policy), str(shared))
    assert text.returncode == 1 and "(seal.holder-undeclared)" in text.stdout  # with its code
    assert "is held by" in text.stdout and "not a declared writer" in text.stdout


def test_private_directory_without_a_bench_is_inconclusive(base, tmp_path):
    """The writers pass but nothing measured the saving (no bench given, none kept):
    INCONCLUSIVE, exit 1 (a gate must not pass), with how to measure it; not a usage error."""
    cache = mkdir(base / "cache", 0o700)
    env = no_state(tmp_path)
    proc = jaxcache("decide", str(cache), env=env)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("decision: INCONCLUSIVE - the writers are understood")
    assert "1. writers understood: pass" in proc.stdout
    assert "3. noticeable saving: not evaluated" in proc.stdout and "--bench" in proc.stdout
    doc = json.loads(jaxcache("decide", str(cache), "--format", "json", env=env).stdout)
    assert doc["verdict"] == "INCONCLUSIVE"
