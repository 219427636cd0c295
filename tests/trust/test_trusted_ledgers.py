"""A team share is not a restored CI cache (issue 44, point 2).

In a directory the policy trusts teamb to write, teamb's watched `jaxcache run` writes the
entries (teamb's own ledger records them). Your audit and `run` say what is true of them:
written by teamb, a trusted writer, not in your origin ledger; and with the policy naming
teamb's ledger (trusted_ledgers) they count as known, also where origin is required. A ledger
that fails the trusted-input check vouches for nothing, and says so. Real users, a real JAX job
as teamb."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
from support.jobs import jaxcache
from support.team import env as _team_env
from support.team import policy as _team_policy
from support.users import needs_root

pytestmark = needs_root
pytest.importorskip("jax")


def _policy(team: dict, accounts, name: str, extra: str = "") -> str:
    return _team_policy(team, accounts.b, name, extra)


def _env(team: dict, **extra: str) -> dict:
    return _team_env(team, **extra)


def _audit(team: dict, policy: str, *args: str, **env: str) -> dict:
    proc = jaxcache("audit", "--format", "json", "--no-processes", "--policy", policy, *args,
                    str(team["shared"]), env=_env(team, **env))
    assert proc.returncode in (0, 1), proc.stderr
    doc = json.loads(proc.stdout)
    from jaxcache.documents import schemas

    pytest.importorskip("jsonschema").validate(doc, schemas.load("audit"))
    return doc


def _found(doc: dict) -> dict[str, dict]:
    return {f["code"]: f for f in doc["findings"]}


def test_a_trusted_writers_entries_are_said_to_be_theirs(team, accounts):
    policy = _policy(team, accounts, "writer")
    doc = _audit(team, policy)
    assert doc["verdict"] == "SHARED-BY-POLICY", doc["findings"]
    found = _found(doc)
    assert "origin.unknown" not in found, found["origin.unknown"]
    said = found["origin.trusted-writer"]
    assert said["effect"] == "note"
    assert f"2 entries written by {accounts.b}, a trusted writer; not in your origin ledger" \
        in said["message"]
    assert "trusted_ledgers" in said["remedy"]
    text = jaxcache("audit", "--no-processes", "--policy", policy, str(team["shared"]),
                    env=_env(team))
    flat = " ".join(text.stdout.split())
    assert "restored from a CI cache" not in flat and "a trusted writer" in flat, text.stdout
    # where origin is required, nothing vouches that a watched job wrote them: refused, saying
    # what is true of them and how to make them known
    doc = _audit(team, policy, "--require-origin")
    assert doc["verdict"] == "UNSAFE"
    said = _found(doc)["origin.trusted-writer"]
    assert said["effect"] == "unsafe" and "refused as --require-origin asks" in said["message"]
    run = jaxcache("run", "--policy", policy, "--cache-dir", str(team["shared"]), "--",
                   sys.executable, str(team["job"]), env=_env(team))
    assert run.returncode == 0, run.stderr
    assert "restored from a CI cache" not in " ".join(run.stderr.split()), run.stderr


def test_a_trusted_writers_ledger_makes_their_entries_known(team, accounts):
    policy = _policy(team, accounts, "ledger", f'trusted_ledgers = ["{team["ledger"]}"]\n')
    for env in ({}, {"GITHUB_ACTIONS": "true"}):  # the ledger's lines are of this boot
        doc = _audit(team, policy, "--require-origin", **env)
        assert doc["verdict"] == "SHARED-BY-POLICY", doc["findings"]
        origins = {e["origin"] for e in doc["entries"]["entries"] if e["origin"]}
        assert origins == {"vouched"} and doc["origins"]["vouched"] == 2
        found = _found(doc)
        assert not {"origin.unknown", "origin.trusted-writer", "origin.trusted-ledger"} & set(
            found)
        assert f"by {accounts.b}'s origin ledger" in found["origin.vouched"]["message"]
        assert doc["origins"]["trusted_ledgers"] == [
            {"path": str(team["ledger"]), "owner": accounts.b, "problem": None}]
    run = jaxcache("run", "--require-origin", "--policy", policy, "--cache-dir",
                   str(team["shared"]), "--", sys.executable, str(team["job"]),
                   env=_env(team))
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("A [1.0, 3.0, 5.0, 7.0]"), run.stdout


@pytest.mark.parametrize("how", ["owned by another", "writable by others"])
def test_a_ledger_that_fails_the_check_vouches_for_nothing(team, accounts, how):
    bad = team["top"] / f"bad-{how.split()[0]}.ledger"
    shutil.copyfile(team["ledger"], bad)
    if how == "owned by another":
        shutil.chown(bad, accounts.c)  # not a writer the policy trusts
        bad.chmod(0o644)
    else:
        shutil.chown(bad, accounts.b)
        bad.chmod(0o666)
    policy = _policy(team, accounts, f"bad-{how.split()[0]}", f'trusted_ledgers = ["{bad}"]\n')
    doc = _audit(team, policy, "--require-origin")
    assert doc["verdict"] == "UNSAFE"
    found = _found(doc)
    said = found["origin.trusted-ledger"]
    assert str(bad) in said["message"] and "vouches for nothing" in said["message"]
    assert (accounts.c if how == "owned by another" else "writable by group or others") in \
        said["message"]
    assert found["origin.trusted-writer"]["effect"] == "unsafe"
    assert doc["origins"]["vouched"] == 0


@pytest.mark.parametrize("value", ['"/a/ledger"', '["relative/origin.ledger"]', '[1]'])
def test_bad_trusted_ledgers_is_one_line(team, accounts, value):
    policy = _policy(team, accounts, "bad-key", f"trusted_ledgers = {value}\n")
    proc = jaxcache("audit", "--policy", policy, str(team["shared"]), env=_env(team))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "trusted_ledgers" in proc.stderr
    assert "absolute path" in proc.stderr  # said what it must be, not only that it is unknown


def test_your_own_ledger_in_the_teams_list_is_read_as_yours_not_as_anothers(team, accounts):
    """A team's shared policy lists every member's ledger, yours among them: yours is read as
    yours already (here you have none yet), never again as a trusted writer's that 'vouches
    for nothing (file not found)'; teamb's still vouches."""
    own = team["state"] / "jaxcache" / "origin.ledger"
    assert not own.exists()
    policy = _policy(team, accounts, "both",
                     f'trusted_ledgers = ["{own}", "{team["ledger"]}"]\n')
    doc = _audit(team, policy)
    assert "origin.trusted-ledger" not in _found(doc), _found(doc)["origin.trusted-ledger"]
    assert [t["path"] for t in doc["origins"]["trusted_ledgers"]] == [str(team["ledger"])]
    assert doc["origins"]["vouched"] == 2
