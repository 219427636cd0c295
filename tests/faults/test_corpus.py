"""The campaign's findings, each a recorded schedule that failed on the code before its fix
(issue 42: a bug found stays found). A schedule names the very step ("unlink:1": before the
writer's first os.unlink), so it holds whatever else the writer does first."""

from __future__ import annotations

import json
import os
import time

from support import faults, killpoints


def test_a_witness_killed_between_creating_the_ledger_and_removing_its_temporary_name(
        tmp_path):
    """Found by `make soak` (witness, kill point 9 of 29): the new ledger is made under a
    temporary name and linked into place; killed before the temporary name went, the ledger
    had two links, which no appender accepts, so every later entry read as of unknown origin,
    for good. The next append now removes that name (only that form, only for that file)."""
    ledger = tmp_path / "state" / "origin.ledger"
    t = killpoints.run(faults.WITNESS, "unlink:1", tmp_path, str(ledger), "2")
    assert t.killed and t.acknowledged == []
    assert os.stat(ledger).st_nlink == 2  # the schedule still lands where the bug was
    again = killpoints.run(faults.WITNESS, 0, tmp_path, str(ledger), "2")
    assert again.returncode == 0, again.stderr
    assert len(again.acknowledged) == 2
    assert os.stat(ledger).st_nlink == 1
    assert sorted(p.name for p in ledger.parent.iterdir()) == ["origin.ledger"]


def test_a_publisher_killed_before_removing_its_temporary_name_leaves_gc_able_to_collect(
        tmp_path):
    """Found by the campaign (publish, kill before the publisher's second os.unlink): the
    entry was linked into place from a temporary file, and the kill left that temporary name
    as the entry's second link. gc deletes no file with two links, so the entry could never be
    collected and the temporary file stayed for good. gc now removes a sealed publisher's
    temporary file of yours once an hour old (in a directory only you write); the entry then
    has one name and goes with the next gc. A reader loads it whole meanwhile."""
    from jaxcache.gc import collect
    from jaxcache.seal import keys
    from jaxcache.seal.store import SealedCache

    signer = keys.generate()
    keyfile = tmp_path / "keys" / "ci.key"
    keys.save(signer, str(keyfile))
    key, data = "jit_f-" + "ab" * 32, b"entry bytes " * 1000
    listing = tmp_path / "entries.json"
    listing.write_text(json.dumps([(key, data.hex())]))
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    t = killpoints.run(faults.PUBLISH, "unlink:2", tmp_path, str(cache), str(keyfile),
                       str(listing), env=faults.fresh_state(tmp_path / "state"))
    assert t.killed
    entry = cache / f"{key}-cache"
    (temp,) = [p for p in cache.iterdir() if p.name.startswith(".jaxcache-")]
    assert os.stat(entry).st_nlink == 2 and os.path.samefile(temp, entry)  # where it was
    reader = SealedCache(str(cache), trusted=[signer.public])
    assert reader.get(key) == data
    reader.close()
    hour_ago = time.time() - 2 * 3600
    os.utime(temp, (hour_ago, hour_ago))
    first = collect.collect(str(cache), max_size=0)
    assert temp.name in first.orphans and not temp.exists()
    assert os.stat(entry).st_nlink == 1
    second = collect.collect(str(cache), max_size=0)
    assert [u.name for u in second.evicted] == [entry.name]
    assert sorted(p.name for p in cache.iterdir() if not p.name.startswith(".")) == []


def test_a_young_temporary_file_is_left_to_its_publisher(tmp_path):
    """The other side of the rule: a temporary file less than an hour old may be a publish
    in progress (written, not yet linked): gc leaves it and says so."""
    from jaxcache.gc import collect

    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    temp = cache / ".jaxcache-123-00112233aabbccdd.tmp"
    temp.write_bytes(b"half an entry")
    result = collect.collect(str(cache), max_size=0)
    assert temp.exists() and temp.name not in result.orphans
    assert temp.name in {x.name for x in result.left}
