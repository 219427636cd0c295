"""The fault campaign's processes keep a state folder of their own: run as they are (writers
with the source on PYTHONPATH, killed mid-way), they rewrote the fingerprint memo
(fingerprint/memo.py) with other roots (measured: its digest changed), and the suite's shared
one must stay as conftest.py seeded it (tests that read a command's output expect no
one-time "hashing" line)."""

from __future__ import annotations

import os

import pytest
from support import faults


@pytest.fixture(scope="module", autouse=True)
def own_state(tmp_path_factory):
    before = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("faults-state"))
    yield
    if before is None:
        os.environ.pop("XDG_STATE_HOME", None)
    else:
        os.environ["XDG_STATE_HOME"] = before


@pytest.fixture(scope="session")
def world(tmp_path_factory):
    """The real entries every fault test starts from (a real JAX job, run once per worker)."""
    return faults.world(tmp_path_factory.mktemp("faults-world"))
