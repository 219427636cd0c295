"""Compacting the origin ledger (gc/compaction.py): real files, real ledgers, real processes.

Lines of entries that are gone or rewritten are dropped and the rest still vouch; the new file
is bound to itself (the header rule holds); a ledger past the witness's limit works again once
compacted; a witness appending while the ledger is compacted loses no line, whether it waited
on the old file (deterministic: the test holds the lock while the child has the old file open)
or races a compaction loop.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from support.jobs import JOB_TIMEOUT_S, clean_env, jaxcache

from jaxcache.gc import compaction
from jaxcache.lifecycle import witness
from jaxcache.trust.inputs import ledger as ledger_mod
from jaxcache.trust.provenance import birth, ledger_file, ledger_place


def _entry(cache: Path, i: int, body: bytes = b"") -> ledger_file.Written:
    """A file named as JAX names entries, and the line a witness writes for it."""
    name = f"jit_f{i}-{hashlib.sha256(str(i).encode()).hexdigest()}-cache"
    data = body or f"compiled {i}".encode() * 20
    path = cache / name
    path.write_bytes(data)
    st = path.stat()
    return ledger_file.Written(name, hashlib.sha256(data).hexdigest(), st.st_size,
                               (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns),
                               time.time(), str(cache), "", "")


def _setup(tmp_path: Path, n: int) -> tuple[Path, Path, list[ledger_file.Written]]:
    cache, state = tmp_path / "cache", tmp_path / "state" / "jaxcache"  # $XDG_STATE_HOME/..
    cache.mkdir()
    state.mkdir(mode=0o700, parents=True)
    ledger = state / ledger_place.LEDGER_NAME
    lines = [_entry(cache, i) for i in range(n)]
    for w in lines:
        assert witness.append(str(ledger), w)
    return cache, ledger, lines


def test_gone_and_changed_lines_go_and_the_rest_still_vouch(tmp_path):
    cache, ledger, lines = _setup(tmp_path, 6)
    (cache / lines[0].name).unlink()  # evicted
    (cache / lines[1].name).write_bytes(b"rewritten by someone")  # changed
    assert witness.append(str(ledger), lines[2])  # the same line twice
    with ledger.open("ab") as f:
        f.write(b"3\ttorn line without its end")
        f.write(b"\n")
    before = ledger.stat()

    dry = compaction.compact(str(ledger), dry_run=True)
    assert dry.problem is None and (dry.gone, dry.changed, dry.repeated, dry.torn) == (1, 1, 1, 1)
    assert ledger.stat().st_ino == before.st_ino and ledger.stat().st_size == before.st_size

    done = compaction.compact(str(ledger))
    assert done.problem is None, done.problem
    assert (done.lines, done.kept, done.gone, done.changed, done.repeated, done.torn) == \
        (8, 4, 1, 1, 1, 1)
    assert done.bytes_after == ledger.stat().st_size == dry.bytes_after < before.st_size
    st = ledger.stat()
    assert st.st_ino != before.st_ino and st.st_mode & 0o777 == 0o600
    # the header names the new file itself, so the reader takes it as bound
    loaded = ledger_mod.load(str(ledger))
    assert loaded.problem is None and loaded.skipped == 0
    assert loaded.identity == (st.st_dev, st.st_ino, birth.of_path(str(ledger)))
    assert sorted(loaded.by_name) == sorted(w.name for w in lines[2:])
    assert [w.identity for w in loaded.by_name[lines[3].name]] == [lines[3].identity]
    # nothing left beside it
    assert sorted(p.name for p in ledger.parent.iterdir()) == [ledger_place.LEDGER_NAME]


def test_a_copied_or_foreign_ledger_is_left_as_it_is(tmp_path):
    cache, ledger, _ = _setup(tmp_path, 2)
    copy = ledger.parent / "copied.ledger"
    copy.write_bytes(ledger.read_bytes())  # a new inode: its header names another file
    copy.chmod(0o600)
    data = copy.read_bytes()
    done = compaction.compact(str(copy))
    assert done.problem and "copied" in done.problem
    assert copy.read_bytes() == data
    ledger.chmod(0o620)  # another can write it: not a ledger to rewrite
    data = ledger.read_bytes()
    assert compaction.compact(str(ledger)).problem
    assert ledger.read_bytes() == data


def test_a_crashed_compactions_temporary_file_is_removed_when_old(tmp_path):
    _, ledger, _ = _setup(tmp_path, 1)
    old = ledger.parent / f".{ledger_place.LEDGER_NAME}.compact.1.2"
    young = ledger.parent / f".{ledger_place.LEDGER_NAME}.compact.3.4"
    for p in (old, young):
        p.write_bytes(b"half")
    past = time.time() - compaction.ABANDONED_S - 60
    os.utime(old, (past, past))
    assert compaction.compact(str(ledger)).problem is None
    assert not old.exists() and young.exists()  # a young one may be another's in progress


def test_past_the_old_limit_the_ledger_works_again_once_compacted(tmp_path):
    cache, ledger, lines = _setup(tmp_path, 3)
    # fill it with lines of entries long gone, up to the witness's limit
    gone = ledger_file.line(lines[0]).replace(lines[0].name.encode(), b"jit_gone-" + b"0" * 64
                                              + b"-cache")
    room = ledger_place.MAX_BYTES - ledger.stat().st_size
    with ledger.open("ab") as f:
        f.write(gone * (room // len(gone)))
    assert ledger.stat().st_size > ledger_place.MAX_BYTES - len(gone)
    late = _entry(cache, 99)
    assert not witness.append(str(ledger), late)  # full: the entry would read as unknown
    assert late.name not in ledger_mod.load(str(ledger)).by_name
    assert ledger_place.crowded(str(ledger))

    done = compaction.compact(str(ledger))
    assert done.problem is None and done.kept == 3 and done.repeated > 200_000
    assert not ledger_place.crowded(str(ledger))
    assert witness.append(str(ledger), late)
    loaded = ledger_mod.load(str(ledger))
    assert loaded.problem is None
    assert sorted(loaded.by_name) == sorted([w.name for w in lines] + [late.name])


_APPENDER = """
import sys, time
from jaxcache.lifecycle import witness
from jaxcache.trust.provenance import ledger_file
ledger, cache, first, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
import hashlib, os
for i in range(first, first + count):
    name = f"jit_f{i}-{hashlib.sha256(str(i).encode()).hexdigest()}-cache"
    st = os.stat(os.path.join(cache, name))
    w = ledger_file.Written(name, "0" * 64, st.st_size,
                            (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns),
                            time.time(), cache, "", "")
    if not witness.append(ledger, w):
        sys.exit(f"line {i} not appended")
print("done")
"""


def _appender(ledger: Path, cache: Path, first: int, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", _APPENDER, str(ledger), str(cache),
                             str(first), str(count)], env=clean_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _holds_open(pid: int, path: Path, ino: int) -> bool:
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path) and \
                    os.stat(f"/proc/{pid}/fd/{fd}").st_ino == ino:
                return True
        except OSError:
            continue
    return False


def test_an_appender_that_waited_on_the_replaced_file_writes_to_the_new_one(tmp_path):
    """The witness's side of the protocol, step by step: it opened the ledger, the compactor
    holds the lock, renames a new file over it and lets go: the line goes to the new file."""
    cache, ledger, _ = _setup(tmp_path, 1)
    _entry(cache, 1)
    fd = os.open(ledger, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        old = os.fstat(fd).st_ino
        child = _appender(ledger, cache, 1, 1)
        deadline = time.monotonic() + JOB_TIMEOUT_S
        while not _holds_open(child.pid, ledger, old):
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "the appender never opened the ledger"
            time.sleep(0.005)
        # what compaction does under its lock: a new, bound file renamed over the old one
        new = ledger.parent / "new"
        new.write_bytes(b"")
        new.chmod(0o600)
        st = new.stat()
        body = ledger.read_bytes().partition(b"\n")[2]
        new.write_bytes(ledger_file.header(st.st_dev, st.st_ino, birth.of_path(str(new)))
                        + body)
        os.rename(new, ledger)
    finally:
        os.close(fd)  # the lock goes with it
    out, err = child.communicate(timeout=JOB_TIMEOUT_S)
    assert child.returncode == 0 and out == "done\n", err
    loaded = ledger_mod.load(str(ledger))
    assert loaded.problem is None and len(loaded.by_name) == 2


def test_appenders_racing_compactions_lose_no_line(tmp_path):
    n, writers = 150, 2
    cache, ledger, lines = _setup(tmp_path, 1)
    for i in range(1, 1 + n * writers):
        _entry(cache, i)
    children = [_appender(ledger, cache, 1 + k * n, n) for k in range(writers)]
    rounds = 0
    replaced = 0
    while any(c.poll() is None for c in children) or rounds < 3:
        # one line of an entry already gone each round, so every compaction rewrites the file
        gone = lines[0]._replace(name=f"jit_gone{rounds}-{'0' * 64}-cache")
        assert witness.append(str(ledger), gone)
        ino = ledger.stat().st_ino
        done = compaction.compact(str(ledger))
        assert done.problem is None, done.problem
        assert done.gone == 1 and done.changed == done.torn == 0  # the others are there
        replaced += ledger.stat().st_ino != ino
        rounds += 1
        time.sleep(0.002)  # a compaction a moment, where a real one comes after a job
    for c in children:
        out, err = c.communicate(timeout=JOB_TIMEOUT_S)
        assert c.returncode == 0 and out == "done\n", err
    loaded = ledger_mod.load(str(ledger))
    assert loaded.problem is None and loaded.skipped == 0
    assert len(loaded.by_name) == 1 + n * writers
    assert replaced == rounds  # the file was replaced under the appenders every round


def test_gc_compacts_the_ledger_and_says_so(tmp_path):
    cache, ledger, lines = _setup(tmp_path, 4)
    env = clean_env(XDG_STATE_HOME=str(ledger.parent.parent))
    proc = jaxcache("gc", str(cache), "--max-age", "1h", "--format", "json", env=env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["ledger"]["path"] == str(ledger) and doc["ledger"]["problem"] is None
    assert (doc["ledger"]["lines"], doc["ledger"]["kept"]) == (4, 4)
    (cache / lines[0].name).unlink()
    proc = jaxcache("gc", str(cache), "--max-age", "1h", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "origin ledger: dropped 1 of 4 lines (1 for entries gone" in proc.stdout
    assert sorted(ledger_mod.load(str(ledger)).by_name) == sorted(w.name for w in lines[1:])


def test_build_descriptions_no_kept_line_names_are_dropped_and_said(tmp_path):
    """`fingerprint` lines (what a build id stands for) that no kept line names, or repeated,
    go too, and the line says so: '0 of 2 lines' beside a smaller ledger read as a mistake."""
    from jaxcache.fingerprint.model import SHORT

    cache, ledger, lines = _setup(tmp_path, 2)
    unused = b"fingerprint\t" + b"ab" * (SHORT // 2) + b'\t{"machine":"x86_64"}\n'
    with ledger.open("ab") as f:
        f.write(unused + unused)  # described twice, named by no line
    env = clean_env(XDG_STATE_HOME=str(ledger.parent.parent))
    dry = jaxcache("gc", str(cache), "--max-age", "1h", "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    said = " ".join(dry.stdout.split())
    assert "would drop 0 of 2 lines" in said and "and 2 build descriptions" in said, said
    before = ledger.stat().st_size
    done = jaxcache("gc", str(cache), "--max-age", "1h", "--format", "json", env=env)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)["ledger"]
    assert (doc["lines"], doc["kept"], doc["build_descriptions_dropped"]) == (2, 2, 2)
    assert ledger.stat().st_size == before - 2 * len(unused)
    assert sorted(ledger_mod.load(str(ledger)).by_name) == sorted(w.name for w in lines)
