"""The audit run by a non-root user sees the same writers root computes for that user."""

from __future__ import annotations

import subprocess

import pytest
from support.jobs import audit_json, codes, untrusted, writers
from support.users import mkdir, needs_root, user_runtime

pytestmark = needs_root


@pytest.fixture
def runtime():
    return user_runtime()


def as_user(path, user, runtime):
    return audit_json(path, user=user, python=runtime.python, env=runtime.env(), cwd="/")


LAYOUTS = {
    "private": lambda base, acc: mkdir(base / "c", 0o700, acc.a),
    "group-writable": lambda base, acc: mkdir(base / "c", 0o770, acc.a, acc.group),
    "0707-group-denied": lambda base, acc: mkdir(base / "c", 0o707, acc.c, acc.group),
    "world-parent": lambda base, acc: mkdir(mkdir(base / "w", 0o777) / "c", 0o700, acc.a),
    "foreign-ancestor": lambda base, acc: mkdir(mkdir(base / "h", 0o755, acc.b) / "c", 0o700,
                                                acc.a),
    "missing": lambda base, acc: mkdir(base / "w", 0o1777) / "c",
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_same_writer_set_as_root_sees_for_that_user(layout, base, accounts, runtime):
    path = LAYOUTS[layout](base, accounts)
    rc_root, by_root = audit_json(path, "--user", accounts.a, "--no-processes")
    rc_user, by_user = as_user(path, accounts.a, runtime)
    assert by_user["judged_for"]["user"] == accounts.a
    assert writers(by_user) == writers(by_root)
    assert untrusted(by_user) == untrusted(by_root)
    assert (rc_user, by_user["verdict"]) == (rc_root, by_root["verdict"])
    # the kernel cross-check ran as that user and agreed with the model
    assert "kernel.disagrees" not in codes(by_user)


def test_unreadable_ancestor_fails_closed(base, accounts, runtime):
    locked = mkdir(base / "locked", 0o700)  # root's: a may not even look inside
    mkdir(locked / "cache", 0o700, accounts.a)
    rc, doc = as_user(locked / "cache", accounts.a, runtime)
    assert (rc, doc["verdict"]) == (1, "UNVERIFIABLE")
    assert "path.unreadable" in codes(doc)
    # an unreadable ancestor owned by someone else is already a known writer: UNSAFE wins
    other = mkdir(base / "other", 0o700, accounts.b)
    mkdir(other / "cache", 0o700, accounts.a)
    rc, doc = as_user(other / "cache", accounts.a, runtime)
    assert (rc, doc["verdict"], untrusted(doc)) == (1, "UNSAFE", {accounts.b})


def test_kernel_disagreement_fails_closed(base):
    cache = mkdir(base / "cache", 0o700)
    if subprocess.run(["chattr", "+i", str(cache)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i refused here (needs CAP_LINUX_IMMUTABLE on ext4/xfs)")
    rc, doc = audit_json(cache)
    assert (rc, doc["verdict"]) == (1, "UNVERIFIABLE")
    assert "kernel.disagrees" in codes(doc)
