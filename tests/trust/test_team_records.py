"""Two teams compare builds without copying files: with a policy trusting teamb to write the
share, your `jaxcache decide SHARE --records B/` reads teamb's run records where teamb keeps
them (owned by teamb), as it reads yours; without that trust they are refused, as any file
another user controls. Real users, teamb's real watched job (tests/trust/conftest.py)."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from support.team import as_user, uid
from support.users import mkdir, needs_root

pytestmark = needs_root
pytest.importorskip("jax")


def _teamb_records(team: dict, accounts) -> str:
    """teamb's run records, in a folder of teamb's that others may read (0755, 0644)."""
    runs = team["ledger"].parent / "runs"
    shared = team["top"] / "b-records"
    if not shared.exists():
        mkdir(shared, 0o755, accounts.b)
        for record in runs.iterdir():
            copied = shared / record.name
            shutil.copyfile(record, copied)
            os.chown(copied, uid(accounts.b), -1)
            copied.chmod(0o644)
    return str(shared)


def _decide(team: dict, accounts, trusted: bool) -> tuple[int, str, str]:
    mine = team["top"] / f"teama-{'trusting' if trusted else 'not'}"
    if not mine.exists():
        mkdir(mine, 0o700, accounts.a)
    policy = mine / "policy.toml"
    who = f'trusted_users = ["{accounts.b}"]\n' if trusted else ""
    policy.write_text(f'[[cache]]\npath = "{team["shared"]}"\n{who}')
    os.chown(policy, uid(accounts.a), -1)
    policy.chmod(0o600)
    proc = as_user(accounts.a, mine, "-m", "jaxcache", "decide", str(team["shared"]),
                   "--policy", str(policy), "--records",
                   _teamb_records(team, accounts), "--format", "json")
    return proc.returncode, proc.stdout, proc.stderr


def test_decide_reads_the_records_of_a_team_the_policy_trusts(team, accounts):
    code, out, err = _decide(team, accounts, trusted=True)
    assert code in (0, 1) and "not by you or root" not in err, err
    doc = json.loads(out)
    compatible = next(t for t in doc["tests"] if t["name"] == "compatible")
    assert compatible["outcome"] != "not-evaluated", compatible


def test_without_that_trust_another_users_records_are_refused(team, accounts):
    code, out, err = _decide(team, accounts, trusted=False)
    assert code == 2 and "not by you or root" in err and out == "", (code, err)
