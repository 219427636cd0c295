"""Two teams, one directory, for several rounds, set up as docs/how-to/shared-directory.md's
recipe says: a group, a setgid 2770 directory an admin made, the team's policy (trusted_groups
and every member's trusted_ledgers) where the admin keeps it, each member's ledger readable by
the group. Both members run their own real JAX job under `jaxcache run --max-size --max-age`
with a size limit below what the directory holds, round after round: each sees the other's
entries vouched for, neither ever recompiles what it used the round before (nothing used daily
is deleted, and the limit never evicts a job's own working set), and gc never touches the
other member's entries."""

from __future__ import annotations

import grp
import json
import os
import subprocess
import sysconfig
from pathlib import Path

import pytest
from support import paths
from support.jobs import JOB_TIMEOUT_S
from support.ledgers import EVERY_COMPILE, TWO_JITS_JOB, TWO_JITS_OUTPUT
from support.team import uid
from support.users import as_user_argv, isolation, mkdir, needs_root

pytestmark = needs_root
pytest.importorskip("jax")

OTHER_JOB = """
import numpy as np, jax
def g(x): return x * x - 1
print("B", jax.jit(g)(np.arange(4, dtype=np.float32)).tolist())
"""
OTHER_OUTPUT = "B [-1.0, 0.0, 3.0, 8.0]\n"
ROUNDS = 3


def _as(user: str, home: Path, system_policy: Path, *argv: str) -> subprocess.CompletedProcess:
    """`python3 ARGV` as `user`, HOME and state in `home`, the team's policy where the admin
    keeps it (the system policy, named by JAXCACHE_SYSTEM_POLICY here)."""
    site = sysconfig.get_paths()["purelib"]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "XDG_STATE_HOME": str(home),
           "JAX_PLATFORMS": "cpu", "LANG": "C.UTF-8", "NO_COLOR": "1",
           "PYTHONPATH": f"{site}:{paths.CHECKOUT / 'src'}", **EVERY_COMPILE, **isolation(),
           "JAXCACHE_SYSTEM_POLICY": str(system_policy)}
    return subprocess.run([*as_user_argv(user), "/usr/bin/python3", *argv], env=env,
                          capture_output=True, text=True, cwd="/", timeout=JOB_TIMEOUT_S)


def _outcomes(record: Path) -> dict[str, str]:
    doc = json.loads(record.read_text())
    return {m["cache_key"]: m["outcome"] for m in doc["modules"] if m["cache_key"]}


def test_two_members_share_a_directory_for_several_rounds(accounts, base):
    if not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("no system python3 a service user can run")
    gid = grp.getgrnam(accounts.group).gr_gid
    # the admin, once: the directory (setgid: entries keep the team's group) and the policy
    srv = base / "srv"
    srv.mkdir()
    os.chown(srv, 0, gid)
    srv.chmod(0o2770)
    members = {accounts.a: mkdir(base / "a", 0o755, accounts.a),
               accounts.b: mkdir(base / "b", 0o755, accounts.b)}
    ledgers = {user: home / "jaxcache" / "origin.ledger" for user, home in members.items()}
    policy = base / "team-policy.toml"
    policy.write_text(f'[[cache]]\npath = "{srv}"\ntrusted_groups = ["{accounts.group}"]\n'
                      f"trusted_ledgers = {json.dumps([str(p) for p in ledgers.values()])}\n")
    policy.chmod(0o644)
    jobs = {accounts.a: (base / "a.py", TWO_JITS_JOB, TWO_JITS_OUTPUT),
            accounts.b: (base / "b.py", OTHER_JOB, OTHER_OUTPUT)}
    for path, text, _ in jobs.values():
        path.write_text(text)
        path.chmod(0o644)
    if _as(accounts.a, members[accounts.a], policy, "-c", "import jax, jaxcache").returncode:
        pytest.skip("service users cannot import jax from this checkout")

    used: dict[str, set[str]] = {}
    for n in range(ROUNDS):
        for user, home in members.items():
            job, _, output = jobs[user]
            record = home / f"round-{n}.json"
            ran = _as(user, home, policy, "-m", "jaxcache", "run", "--cache-dir", str(srv),
                      "--record", str(record), "--max-size", "1", "--max-age", "30d", "--",
                      "/usr/bin/python3", str(job))
            assert ran.returncode == 0, ran.stderr[-3000:]
            assert ran.stdout == output
            outcomes = _outcomes(record)
            if n:  # what this member's job used the round before is all still there
                assert set(outcomes.values()) == {"hit"}, (user, n, outcomes)
            used[user] = {k for k, o in outcomes.items() if o in ("hit", "written")}
            said = " ".join(ran.stderr.split())
            assert "the limit cannot hold what this job used" in said, said
            if n == 0:  # the recipe's last step: the member makes the ledger readable
                ledger = ledgers[user]
                os.chown(ledger, uid(user), gid)
                ledger.chmod(0o640)
                ledger.parent.chmod(0o711)
        for user, home in members.items():  # each sees the other's entries vouched for
            other = next(u for u in members if u != user)
            listed = _as(user, home, policy, "-m", "jaxcache", "ls", str(srv), "--format",
                         "json")
            assert listed.returncode in (0, 1), listed.stderr
            doc = json.loads(listed.stdout)
            theirs = {e["name"][:-len("-cache")]: e for e in doc["entries"]
                      if e["name"][:-len("-cache")] in used[other] - used[user]}
            assert theirs and {e["origin"] for e in theirs.values()} == {"vouched"}, \
                (user, [(k, e["origin"]) for k, e in theirs.items()])
        for user, ledger in ledgers.items():  # compacted by gc, still readable by the team
            st = ledger.stat()
            assert (st.st_mode & 0o777, st.st_gid) == (0o640, gid), (user, oct(st.st_mode))
    names = {p.name[:-len("-cache")] for p in srv.iterdir() if p.name.endswith("-cache")}
    assert used[accounts.a] | used[accounts.b] <= names
