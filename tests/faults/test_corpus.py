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
    from jaxcache.seal.signing import key_pair_files
    from jaxcache.seal.stores.sealed_cache import SealedCache
    from jaxcache.trust.inputs import signing_keys as keys

    signer = keys.generate()
    keyfile = tmp_path / "keys" / "ci.key"
    key_pair_files.save(signer, str(keyfile))
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


# An appender whose every open of the ledger is followed, before it takes the lock, by a
# compaction that renames a new file over the name (what gc does): the first REPLACED opens.
STARVED = r"""
import os, sys, time
from jaxcache.lifecycle import witness
from jaxcache.trust.provenance import birth, ledger_file
ledger, replaced = sys.argv[1], int(sys.argv[2])
real_open, opens = os.open, [0]
def compaction_meanwhile(dfd):
    old = os.open("origin.ledger", os.O_RDONLY, dir_fd=dfd)
    body = os.read(old, 1 << 20).partition(b"\n")[2]
    os.close(old)
    new = real_open(".replacing", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dfd)
    st = os.fstat(new)
    os.write(new, ledger_file.header(st.st_dev, st.st_ino, birth.of_fd(new)) + body)
    os.close(new)
    os.rename(".replacing", "origin.ledger", src_dir_fd=dfd, dst_dir_fd=dfd)
def opening(path, flags, mode=0o777, *, dir_fd=None):
    fd = real_open(path, flags, mode, dir_fd=dir_fd)
    if path == "origin.ledger" and flags & os.O_APPEND and opens[0] < replaced:
        opens[0] += 1
        compaction_meanwhile(dir_fd)
    return fd
os.open = opening
w = ledger_file.Written("jit_f-" + "0" * 64 + "-cache", "0" * 64, 1, (1, 2, 3, 4),
                        time.time(), "/cache")
print(witness.append(ledger, w), opens[0])
"""


def test_an_appender_outlasts_compactions_that_replace_the_ledger_under_it(tmp_path):
    """Found by a `make test` run beside `make soak` (tests/gc/test_compaction.py's racing
    test failed under load: "line 190 not appended"), then pinned down here: an appender that
    opened the ledger just before a compaction renamed a new file over it found the file it
    held with no link left, judged it not appendable and gave up: the line was lost (an entry
    of unknown origin). Now it opens the new file; and it tries until its lock deadline, not a
    count of 20, so even compactions replacing the ledger 25 times in a row (deterministic
    here, by a hook on os.open) lose nothing."""
    from jaxcache.trust.inputs import ledger

    path = tmp_path / "state" / "origin.ledger"
    first = killpoints.run(faults.WITNESS, 0, tmp_path, str(path), "1")  # the ledger exists
    assert first.returncode == 0 and first.acknowledged
    t = killpoints.run(STARVED, 0, tmp_path, str(path), "25")
    assert t.returncode == 0, t.stderr
    assert t.stdout.split() == ["True", "25"]
    loaded = ledger.load(str(path))
    assert loaded.problem is None and len(loaded.by_name) == 2


def test_a_witness_whose_disk_fails_at_its_first_step_answers_false(tmp_path):
    """Found by the disk-error campaign (witness, EIO from step 1): opening the state folder
    failed with an OSError that append let out, although it promises False when it cannot
    write (the entry then stays of unknown origin). In a job the guard swallowed it; any
    other caller got a traceback. Now that is False too, and nothing is acknowledged."""
    ledger = tmp_path / "state" / "origin.ledger"
    t = killpoints.run(faults.WITNESS, 1, tmp_path, str(ledger), "2", fault="EIO")
    assert t.faulted and t.returncode == 0, t.stderr
    assert t.acknowledged == [] and "Traceback" not in t.stderr
    again = killpoints.run(faults.WITNESS, 0, tmp_path, str(ledger), "2")
    assert again.returncode == 0 and len(again.acknowledged) == 2, again.stderr


def test_an_entry_linked_after_its_signature_was_evicted_is_not_left_unsigned(tmp_path,
                                                                              monkeypatch):
    """Found by `make soak` (8 processes at once beside busy loops: after the crowd a lone
    publisher left 5 of 6 entries loadable). The schedule, replayed in one process: publisher A
    links its signature; a rival finds it, judges it a signature of these very bytes and
    completes the entry; the LRU evicts that entry and then its signature; only then does A
    link its entry. A's entry had no signature beside it: every reader rejected it and every
    later publisher saw the name taken, so that module recompiled on every run, for good. A
    publisher now checks, once its entry is linked, that the signature beside it still vouches
    for these bytes, and takes its own entry back when it does not."""
    from jaxcache.seal.publishing import publish as pub
    from jaxcache.seal.publishing import tier_names as names
    from jaxcache.seal.signing import orphan_signatures as orphans
    from jaxcache.seal.signing import signature_file as sigfile
    from jaxcache.seal.stores.sealed_cache import SealedCache
    from jaxcache.trust.inputs import signing_keys as keys

    signer = keys.generate()
    key, data = "jit_f-" + "cd" * 32, b"entry bytes " * 1000
    name = names.entry(key)
    signame = names.sidecar(name, names.SIGNATURE, names.DEFAULT_NAME_MAX)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    fd = os.open(cache, os.O_RDONLY | os.O_DIRECTORY)
    sig = sigfile.sign(key, data, signer)
    real_link, entry_links = pub._link, []

    def link(dir_fd, tmp, target):
        if target == name and not entry_links:  # A is about to link its entry
            entry_links.append(target)
            assert pub.publish(dir_fd, name, data, sig) is False  # the rival: name signed...
            os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)  # ...it completes it
            os.unlink(name, dir_fd=dir_fd)  # the LRU: the entry, then its signature
            os.unlink(signame, dir_fd=dir_fd)
        return real_link(dir_fd, tmp, target)

    monkeypatch.setattr(pub, "_link", link)
    def orphan(existing, age):
        return orphans.judge(key, data, existing, [signer.public], age)

    try:
        published = pub.publish(fd, name, data, sig, orphan=orphan)
    finally:
        os.close(fd)
    assert entry_links  # the schedule ran
    left = sorted(p.name for p in cache.iterdir() if not p.name.startswith("."))
    assert not published and name not in left, left  # no entry without its signature
    reader = SealedCache(str(cache), trusted=[signer.public])
    assert reader.get(key) is None and not reader.rejections  # a plain miss
    reader.close()
    monkeypatch.undo()
    cache_again = SealedCache(str(cache), trusted=[signer.public], signer=signer)
    cache_again.put(key, data)  # the next publisher completes it
    cache_again.close()
    reader = SealedCache(str(cache), trusted=[signer.public])
    assert reader.get(key) == data
    reader.close()
