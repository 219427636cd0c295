"""Maintenance keeps a team's shared ledger shared: teamb made its origin ledger readable to
teama's group (as docs/reference/audit.md's trusted ledgers say), and gc compacting it (gc, and
`run --max-size` after every job) writes the new file with the old one's mode and group, so
teama's audit still finds teamb's entries vouched for. Real users, a real watched JAX job."""

from __future__ import annotations

import grp
import json
import os
import stat
from pathlib import Path

import pytest
from support.team import as_user, uid, watched_share
from support.users import mkdir, needs_root

from jaxcache.gc import compaction
from jaxcache.trust.provenance import ledger_place

pytestmark = needs_root


@pytest.fixture
def teamb_share(accounts, base):
    """teamb (accounts.b) fills its share with a watched `jaxcache run`; its ledger is made
    readable to the group teama (accounts.a) is in, 0640."""
    pytest.importorskip("jax")
    if not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("no system python3 a service user can run")
    if as_user(accounts.b, base, "-c", "import jax, jaxcache").returncode != 0:
        pytest.skip("service users cannot import jax from this checkout")
    home, share, _ = watched_share(accounts.b, base)
    ledger = home / "jaxcache" / ledger_place.LEDGER_NAME
    os.chown(ledger, uid(accounts.b), grp.getgrnam(accounts.group).gr_gid)
    ledger.chmod(0o640)
    (home / "jaxcache").chmod(0o755)
    return home, share, ledger


def _vouched(accounts, base: Path, share: Path, ledger: Path) -> dict:
    """teama's audit of the share, its policy trusting teamb and teamb's ledger."""
    mine = mkdir(base / f"teama-{os.urandom(3).hex()}", 0o700, accounts.a)
    policy = mine / "policy.toml"
    policy.write_text(f'[[cache]]\npath = "{share}"\ntrusted_users = ["{accounts.b}"]\n'
                      f'trusted_ledgers = ["{ledger}"]\n')
    os.chown(policy, uid(accounts.a), -1)
    policy.chmod(0o600)
    proc = as_user(accounts.a, mine, "-m", "jaxcache", "audit", "--format", "json",
                   "--no-processes", "--policy", str(policy), str(share))
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def test_gc_keeps_a_ledger_another_team_reads_readable_to_it(accounts, base, teamb_share):
    home, share, ledger = teamb_share
    before = _vouched(accounts, base, share, ledger)
    assert before["origins"]["vouched"] == 2, before["origins"]
    evicted = next(p for p in share.iterdir() if p.name.endswith("-cache"))
    evicted.unlink()  # what JAX's own LRU or another gc does: its ledger line has gone stale
    inode = ledger.stat().st_ino
    gc = as_user(accounts.b, home, "-m", "jaxcache", "gc", str(share), "--max-age", "3650d")
    assert gc.returncode == 0, gc.stderr
    assert "dropped 1 of" in " ".join(gc.stdout.split()), gc.stdout
    st = ledger.stat()
    assert st.st_ino != inode  # compacted: a new file renamed over the old one
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (
        0o640, uid(accounts.b), grp.getgrnam(accounts.group).gr_gid)
    after = _vouched(accounts, base, share, ledger)
    assert after["origins"]["vouched"] == 1 and not after["origins"].get("unknown"), \
        after["origins"]
    assert [t["problem"] for t in after["origins"]["trusted_ledgers"]] == [None]


def test_a_group_the_compacting_user_cannot_give_changes_nothing(accounts, base, teamb_share):
    """teamb's ledger in a group teamb is not in (an admin's chgrp): compaction cannot keep
    it, so it says why and leaves the ledger as it is."""
    home, share, ledger = teamb_share
    foreign = grp.getgrgid(0).gr_gid  # root's group: teamb is no member
    os.chown(ledger, uid(accounts.b), foreign)
    next(p for p in share.iterdir() if p.name.endswith("-cache")).unlink()
    before = ledger.stat()
    gc = as_user(accounts.b, home, "-m", "jaxcache", "gc", str(share), "--max-age", "3650d")
    said = " ".join((gc.stdout + gc.stderr).split())
    assert "cannot be kept on the compacted file" in said, said
    after = ledger.stat()
    assert (after.st_ino, after.st_gid, after.st_size) == (before.st_ino, foreign,
                                                           before.st_size)
    assert not [p for p in ledger.parent.iterdir() if ".compact." in p.name]


def test_compaction_keeps_the_mode_of_a_ledger_of_your_own(tmp_path):
    """The same without other users: a 0640 ledger stays 0640, a 0600 one 0600."""
    import hashlib
    import time

    from jaxcache.lifecycle import witness
    from jaxcache.trust.provenance import ledger_file

    for mode in (0o640, 0o600):
        cache, state = tmp_path / f"cache{mode:o}", tmp_path / f"state{mode:o}"
        cache.mkdir()
        state.mkdir(mode=0o700)
        ledger = state / ledger_place.LEDGER_NAME
        names = []
        for i in range(3):
            entry = cache / f"jit_f{i}-{hashlib.sha256(bytes([i])).hexdigest()}-cache"
            entry.write_bytes(b"compiled %d" % i)
            st = entry.stat()
            assert witness.append(str(ledger), ledger_file.Written(
                entry.name, hashlib.sha256(entry.read_bytes()).hexdigest(), st.st_size,
                (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns), time.time(),
                str(cache), "", ""))
            names.append(entry)
        ledger.chmod(mode)
        names[0].unlink()
        done = compaction.compact(str(ledger))
        assert done.problem is None and done.gone == 1, done
        assert stat.S_IMODE(ledger.stat().st_mode) == mode
