"""The team share (tests/support/team.py), made once per session: teamb's real JAX job costs
seconds, and the tests that judge it do not change it (a test that does works on a copy)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from support.team import as_user, uid, watched_share
from support.users import mkdir


@pytest.fixture(scope="session")
def team(accounts):
    """teamb (accounts.b) owns the share and fills it with a watched `jaxcache run`; its
    ledger is $XDG_STATE_HOME/jaxcache/origin.ledger in a home only teamb writes."""
    pytest.importorskip("jax")
    if not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("no system python3 a service user can run")
    top = Path(tempfile.mkdtemp(prefix="jaxcache-team-"))
    top.chmod(0o755)
    try:
        if as_user(accounts.b, top, "-c", "import jax, jaxcache").returncode != 0:
            pytest.skip("service users cannot import jax from this checkout")
        home, shared, job = watched_share(accounts.b, top)
        ledger = home / "jaxcache" / "origin.ledger"
        assert ledger.stat().st_uid == uid(accounts.b), ledger
        entries = [p for p in shared.iterdir() if p.name.endswith("-cache")]
        assert len(entries) == 2 and {p.stat().st_uid for p in entries} == {uid(accounts.b)}
        state = mkdir(top / "mine", 0o700)  # yours: an empty state directory, no ledger
        yield {"top": top, "shared": shared, "ledger": ledger, "job": job, "state": state,
               "owner": accounts.b}
    finally:
        shutil.rmtree(top, ignore_errors=True)
