"""A policy declaration applies to its path as written (issue 39, class 3).

Each [[cache]] path used to be resolved with realpath() at every use, so whoever could create
a name on it moved the declaration onto any directory: here a second real user plants that
name, as a symbolic link in a sticky world-writable folder, pointing at another cache, for
each kind of declaration. The audit of that other cache must read as if there were no policy,
and the same declaration written with the cache's own path must still apply (else the check
could not fail).
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import namespaces
from support.jobs import audit_json, codes, jaxcache
from support.users import Accounts, as_user_argv, mkdir, needs_root

from jaxcache.trust.inputs import policy as policymod
from jaxcache.trust.kernel import principals

pytestmark = needs_root

ENTRY = "jit_f-" + "ab" * 32 + "-cache"  # an entry no job jaxcache watched wrote


@dataclass(frozen=True)
class Case:
    """A cache a declaration of this kind changes the audit of, and how."""

    make: Callable[[Path, Accounts], Path]  # the cache directory, made under `base`
    settings: Callable[[Path, Accounts], str]  # the [[cache]] table's lines but its path
    args: tuple[str, ...]  # what the audit needs for the declaration to matter
    applied: str  # the verdict when the declaration applies


def _owned_by_a(base: Path, acc: Accounts) -> Path:
    return mkdir(base / "theirs", 0o755, acc.a)


def _group_writable(base: Path, acc: Accounts) -> Path:
    return mkdir(base / "team", 0o770, "root", acc.group)


def _restored(base: Path, acc: Accounts) -> Path:
    cache = mkdir(base / "restored", 0o700)
    (cache / ENTRY).write_bytes(b"compiled code of unknown origin")
    (cache / ENTRY).chmod(0o600)
    return cache


def _key(base: Path, acc: Accounts) -> str:
    proc = jaxcache("keygen", str(base / "keys" / "ci.key"))
    assert proc.returncode == 0, proc.stderr
    pub = (base / "keys" / "ci.key.pub").read_text().strip()
    return f'trusted_keys = [{{ holder = "root", key = "{pub}" }}]\n'


CASES = {
    "trusted_users": Case(_owned_by_a, lambda b, acc: f'trusted_users = ["{acc.a}"]\n', (),
                          "SHARED-BY-POLICY"),
    "trusted_groups": Case(_group_writable,
                           lambda b, acc: f'trusted_groups = ["{acc.group}"]\n', (),
                           "SHARED-BY-POLICY"),
    "restored_from": Case(_restored, lambda b, acc: 'restored_from = "actions/cache"\n',
                          ("--require-origin",), "PRIVATE"),
    "trusted_keys": Case(lambda b, acc: mkdir(b / "sealed", 0o700), _key, ("--sealed",),
                         "SEALED"),
}


def _plant(acc: Accounts, link: Path, target: Path) -> None:
    """The second user creates the declared name, pointing at `target`."""
    subprocess.run([*as_user_argv(acc.c), "ln", "-s", str(target), str(link)], check=True)
    assert os.lstat(link).st_uid == pwd.getpwnam(acc.c).pw_uid


def _policy(where: Path, path: Path, lines: str) -> Path:
    where.write_text(f'[[cache]]\npath = "{path}"\n{lines}')
    where.chmod(0o600)
    return where


def _judged(doc: dict) -> tuple:
    """What a declaration could change: the verdict, the findings, who writes and how."""
    return (doc["verdict"], sorted((f["code"], f["effect"], f["message"])
                                   for f in doc["findings"]),
            sorted(doc["untrusted_writers"]))


@pytest.fixture
def sticky(base):
    """A folder like /tmp: anyone may create a name in it, and keeps it."""
    return mkdir(base / "tmp", 0o1777)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_planted_link_never_carries_a_declaration(kind, base, sticky, accounts, tmp_path):
    case = CASES[kind]
    cache = case.make(base, accounts)
    declared = sticky / "cache"  # the user's declaration, for a cache not made yet
    settings = case.settings(base, accounts)
    policy = _policy(tmp_path / "policy.toml", declared, settings)
    _plant(accounts, declared, cache)
    audit = ("--no-processes", *case.args)
    _, without = audit_json(cache, *audit)
    _, planted = audit_json(cache, *audit, "--policy", str(policy))
    assert without["verdict"] != case.applied  # the declaration would matter here
    assert _judged(planted) == _judged(without)
    # given the declared name, the audit follows the planter's link, names the planter, and
    # says the declaration does not apply there (it never follows a link)
    _, via = audit_json(declared, *audit, "--policy", str(policy))
    assert via["verdict"] == "UNSAFE" and accounts.c in via["untrusted_writers"]
    assert "policy.through-link" in codes(via)
    # the same declaration, written with the cache's own path, applies
    mine = _policy(tmp_path / "mine.toml", cache, settings)
    _, applied = audit_json(cache, *audit, "--policy", str(mine))
    assert applied["verdict"] == case.applied, applied["findings"]


def test_every_kind_is_matched_by_the_one_rule(base, sticky, accounts, tmp_path):
    """accepted_filesystems and accepted_storage change an audit only on a network filesystem
    or an unverifiable store; the rule the audit looks up is shown here, for every kind."""
    cache = mkdir(base / "c", 0o700)
    declared = sticky / "cache"
    lines = (f'trusted_users = ["{accounts.a}"]\ntrusted_groups = ["{accounts.group}"]\n'
             f'trusted_signers = ["{accounts.b}"]\naccepted_filesystems = ["nfs4"]\n'
             f'accepted_storage = ["{base}"]\nrestored_from = "actions/cache"\n'
             'revoked_keys = ["0123456789abcdef"]\n')
    acc = principals.Accounts()
    planted = policymod.load(str(_policy(tmp_path / "p.toml", declared, lines)), acc)
    mine = policymod.load(str(_policy(tmp_path / "mine.toml", cache, lines)), acc)
    _plant(accounts, declared, cache)
    for path in (str(cache), f"{sticky}/../c", f"{base}//c/"):
        assert planted.rule_for(path) == policymod.EMPTY.rule_for(path)
        rule = mine.rule_for(path)
        assert rule.accepted_filesystems == {"nfs4"} and rule.accepted_storage == {str(base)}
        assert rule.trusted_uids and rule.trusted_gids and rule.trusted_signers
        assert rule.restored_from == ("actions/cache",) and rule.revoked_keys
    # nor does the declared name, now the planter's link, lead the declaration anywhere
    assert planted.rule_for(str(declared)) == policymod.EMPTY.rule_for(str(declared))


def test_a_link_of_your_own_leads_to_the_declared_directory(base, sticky, accounts,
                                                             tmp_path):
    """A declared path is judged like a cache path: a link on it that only you and root could
    have made and can replace (here root's, in a folder only root can change, as a cluster's
    /home -> /gpfs/home) leads to its directory, so declaring the link's path or the
    directory's applies alike. The same link where another user could replace it (their own,
    in a sticky folder) names no directory, and the audit says so."""
    cache = mkdir(base / "team", 0o770, "root", accounts.group)
    link = mkdir(base / "home", 0o755) / "cache"
    link.symlink_to(cache)
    lines = f'trusted_groups = ["{accounts.group}"]\n'
    _, without = audit_json(link, "--no-processes")
    _, direct = audit_json(link, "--no-processes", "--policy",
                           str(_policy(tmp_path / "direct.toml", cache, lines)))
    assert without["verdict"] == "UNSAFE" and direct["verdict"] == "SHARED-BY-POLICY"
    as_link = str(_policy(tmp_path / "link.toml", link, lines))
    _, written = audit_json(link, "--no-processes", "--policy", as_link)
    assert written["verdict"] == "SHARED-BY-POLICY", written["findings"]
    assert "policy.through-link" not in codes(written)
    _, target = audit_json(cache, "--no-processes", "--policy", as_link)
    assert target["verdict"] == "SHARED-BY-POLICY"  # the directory the trusted link leads to

    theirs = sticky / "cache"
    _plant(accounts, theirs, cache)
    planted = str(_policy(tmp_path / "planted.toml", theirs, lines))
    _, via = audit_json(theirs, "--no-processes", "--policy", planted)
    assert via["verdict"] == "UNSAFE"
    (note,) = [f for f in via["findings"] if f["code"] == "policy.through-link"]
    assert note["effect"] == "note" and str(theirs) in note["message"]
    assert f'path = "{cache}"' in note["remedy"]
    _, target = audit_json(cache, "--no-processes", "--policy", planted)
    assert _judged(target) == _judged(without_policy(cache))
    shown = " ".join(jaxcache("audit", "--no-processes", "--policy", planted, str(theirs))
                     .stdout.split())  # the text report says it too, without -v
    assert f"[[cache]] {theirs} does not apply" in shown


def without_policy(cache: Path) -> dict:
    return audit_json(cache, "--no-processes")[1]


def test_a_planted_link_never_vouches_for_storage(base, sticky, accounts, tmp_path):
    """accepted_storage: a bind mount whose source is covered by another mount cannot be
    judged (UNVERIFIABLE) unless the policy vouches for it, for that cache path only."""
    hidden, point = mkdir(base / "t", 0o755), mkdir(base / "bound", 0o755)
    cache = point / "cache"
    declared = sticky / "cache"
    vouch = f'accepted_storage = ["{point}"]\n'
    planted = _policy(tmp_path / "planted.toml", declared, vouch)
    mine = _policy(tmp_path / "mine.toml", cache, vouch)
    _plant(accounts, declared, cache)
    tmpfs = ["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", str(hidden)]

    def audit(*extra: str) -> dict:
        return {"run": [sys.executable, "-m", "jaxcache", "audit", "--format", "json",
                        "--no-processes", *extra, str(cache)]}

    res = namespaces.run_steps([{"mount": tmpfs},
                      {"run": ["mkdir", "-m", "0755", f"{hidden}/src"]},
                      {"run": ["mkdir", "-m", "0700", f"{hidden}/src/cache"]},
                      {"mount": ["mount", "--bind", f"{hidden}/src", str(point)]},
                      {"mount": tmpfs},
                      audit(), audit("--policy", str(planted)), audit("--policy", str(mine))],
                     tmp_path)
    without, through, applied = (json.loads(r["stdout"]) for r in res[5:])
    assert without["verdict"] == "UNVERIFIABLE"
    assert "storage.unknown" in {f["code"] for f in without["findings"]}
    assert _judged(through) == _judged(without)
    assert applied["verdict"] == "PRIVATE", applied["findings"]
