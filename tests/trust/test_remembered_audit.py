"""An audit that does not grow with the cache (trust/judgement/shortcut.py), attacked.

Each shortcut has its argument (docs/explanation/security-model.md). For each, the swaps its
argument excludes are tried for real, as another user, and fail (the remembered judgement stands,
and is true); and each way the argument does not hold is made to happen (a directory opened and
closed again, a restore that sets the mtime back, a handle opened while the cache was shared, a
mount over the directory or inside it, a hard link made earlier, a memo someone else could write, a
memo of another directory or boot): the shortcut is not taken, the full audit runs, and it
refuses.

The caches are real directories under /tmp (ext4 here), their entries written by root (the
auditing user) and recorded in a real origin ledger by the witness jobs use. A directory is
remembered only once its ctime is SETTLE_NS older than the judgement: here 0.3 s instead of 2
(this kernel stamps times to the tick), so the tests wait 0.35 s where they need it; and only
from MIN_DIR_BYTES of directory up (a gate on cost: a memo does not pay for a few entries),
here from any size, but where another process judges (grown() fills the directory past it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from attacks.handles import Holder
from support.namespaces import run_steps
from support.users import as_user_argv, mkdir, needs_root, user_runtime

from jaxcache import fingerprint
from jaxcache.lifecycle import witness
from jaxcache.trust.findings import Judged, Why
from jaxcache.trust.inputs import audit_memo
from jaxcache.trust.inputs import ledger as ledgermod
from jaxcache.trust.judgement import shortcut
from jaxcache.trust.judgement.audit import AuditReport, audit
from jaxcache.trust.kernel.principals import Accounts
from jaxcache.trust.rules.policy_rules import EMPTY

SETTLE_S = 0.3
MIN_DIR_BYTES = shortcut.MIN_DIR_BYTES  # as `run` has it


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    """A state folder of the test's own (memos and the ledger), a shorter settle time, and
    a memo for directories of any size."""
    folder = mkdir(tmp_path / "state", 0o700)
    monkeypatch.setenv("XDG_STATE_HOME", str(folder))
    monkeypatch.setattr(shortcut, "SETTLE_NS", int(SETTLE_S * 1e9))
    monkeypatch.setattr(shortcut, "MIN_DIR_BYTES", 0)
    return folder


def settle() -> None:
    time.sleep(SETTLE_S + 0.05)


def name(i: int) -> str:
    return f"jit_f{i}-{i:064x}-cache"


def cache(base: Path, entries: int = 3, *, yours: bool = True, mode: int = 0o700,
          folder: str = "cache") -> Path:
    """A private cache whose entries (0644, root's) a watched job wrote (`yours`: each has its
    line in the origin ledger, by the witness) or of unknown origin; settled."""
    d = mkdir(base / folder, mode)
    record = witness.recorder()
    for i in range(entries):
        data = f"compiled code {i}".encode()
        (d / name(i)).write_bytes(data)
        (d / name(i)).chmod(0o644)
        if yours:
            record(str(d), name(i).removesuffix("-cache"), data)
    settle()
    return d


def grown(d: Path) -> Path:
    """`d` with entries of yours added until its size passes MIN_DIR_BYTES (a judgement in
    another process, with the gate as `run` has it, remembers it), settled."""
    record = witness.recorder()
    i = 1000
    while d.stat().st_size < MIN_DIR_BYTES and i < 5000:
        data = f"filler {i}".encode()
        (d / name(i)).write_bytes(data)
        (d / name(i)).chmod(0o644)
        record(str(d), name(i).removesuffix("-cache"), data)
        i += 1
    assert d.stat().st_size >= MIN_DIR_BYTES
    settle()
    return d


def judge(path: Path, *, require_origin: bool = False) -> AuditReport:
    """The audit `jaxcache run` makes (trust/inputs/audit_memo.py's remembering())."""
    accounts = Accounts()
    return audit_memo.remembering(str(path), policy=EMPTY, accounts=accounts,
                                  require_origin=require_origin, env={},
                                  ledger=lambda: ledgermod.load(accounts=accounts, env={}),
                                  fingerprint=fingerprint.current)


def full(path: Path, *, require_origin: bool = False) -> AuditReport:
    """The full audit, nothing remembered, as `jaxcache audit` makes it."""
    accounts = Accounts()
    return audit(str(path), policy=EMPTY, accounts=accounts, scan_processes=False, env={},
                 require_origin=require_origin, ledger=ledgermod.load(accounts=accounts, env={}),
                 fingerprint=fingerprint.current)


def said(report: AuditReport) -> list[tuple[str, str, str]]:
    return [(f.code, str(f.effect), f.message) for f in report.findings]


def remembered(path: Path, **kw: bool) -> AuditReport:
    """Judged in full once (remembered), then found unchanged."""
    first = judge(path, **kw)
    assert first.judged is Judged.FULL and first.memo is not None, first.judged_why
    again = judge(path, **kw)
    assert again.judged is Judged.UNCHANGED, again.judged_why
    return again


def memo_file(path: Path) -> Path:
    st = path.stat()
    return Path(audit_memo.memo_path(st.st_dev, st.st_ino))


def as_other(user: str, script: str, cwd: Path | None = None) -> list[str]:
    """What a short Python script run as `user` printed, line by line."""
    proc = subprocess.run([*as_user_argv(user), user_runtime().python, "-c", script],
                          capture_output=True, text=True, cwd=cwd, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def tried(*attempts: str) -> str:
    """A script that makes each attempt (a statement) and prints OK or the errno's name."""
    lines = ["import errno, os"]
    for a in attempts:
        lines += ["try:", f"    {a}", "    print('OK')", "except OSError as e:",
                  "    print(errno.errorcode[e.errno])"]
    return "\n".join(lines)


# ---- what the shortcut gives ------------------------------------------------------------------
def test_an_unchanged_directory_is_judged_as_the_full_audit_judges_it_without_its_entries(base):
    d = cache(base, 5)
    again = remembered(d)
    whole = full(d)
    assert again.verdict == whole.verdict and again.verdict.value == "PRIVATE"
    assert said(again) == said(whole)
    assert again.inventory is not None and whole.inventory is not None
    assert again.inventory.entries == () and again.inventory.elided is not None  # none looked at
    assert again.inventory.kinds() == whole.inventory.kinds() == {"cache": 5}
    assert again.inventory.total_bytes == whole.inventory.total_bytes
    assert again.origins is not None and whole.origins is not None
    assert again.origins.counts() == whole.origins.counts()
    assert again.origins.build_counts() == whole.origins.build_counts()
    kept = memo_file(d)
    assert kept.stat().st_mode & 0o777 == 0o600 and kept.parent.stat().st_mode & 0o777 == 0o700


def test_entries_of_unknown_origin_are_named_as_the_full_audit_names_them(base):
    d = cache(base, 4, yours=False)
    (d / "README").write_text("a name JAX does not write\n")
    (d / "README").chmod(0o600)
    settle()
    again = remembered(d)
    assert said(again) == said(full(d))
    assert {f.code for f in again.findings} >= {"origin.unknown", "entry.unexpected-name"}


def test_a_changed_directory_judges_its_new_entries_and_keeps_the_judgement_of_the_rest(base):
    d = cache(base, 3)
    remembered(d)
    data = b"compiled code new"
    (d / name(7)).write_bytes(data)
    witness.recorder()(str(d), name(7).removesuffix("-cache"), data)
    (d / name(0)).unlink()
    changed = judge(d)
    assert (changed.judged, changed.judged_why) == (Judged.CHANGED, Why.DIRECTORY_CHANGED)
    assert said(changed) == said(full(d))
    assert changed.origins is not None and changed.origins.counts()["yours"] == 3
    assert changed.memo is not None
    settle()
    assert judge(d).judged is Judged.CHANGED  # remembered too close to the change: once more
    assert judge(d).judged is Judged.UNCHANGED


def test_a_run_records_the_cache_before_and_after_without_listing_an_unchanged_one(base,
                                                                                   tmp_path):
    """`jaxcache run` twice on a cache its jobs wrote (jobs that are not Python: audited
    before they start): the second counts it from the memo; a job that adds a file is still
    told apart."""
    d = grown(cache(base, 3))
    n = len(list(d.iterdir()))
    time.sleep(2.1)  # settled as `run` has it (SETTLE_NS)
    docs = []
    for job in ("true", "true", f"touch {d / 'x'}"):
        record = tmp_path / f"{len(docs)}.json"
        proc = subprocess.run([sys.executable, "-m", "jaxcache", "run", "-q", "--cache-dir",
                               str(d), "--record", str(record), "--", "/bin/sh", "-c", job],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        docs.append(json.loads(record.read_text())["cache_dir"])
    first, again, second = docs  # judged in full; then found unchanged; then a job adds x
    assert first["before"] == first["after"] == {"entries": n, "files": n,
                                                 "bytes": first["before"]["bytes"]}
    assert first["new_files"] == [] and first["origin"]["yours"] == n
    assert again == first
    assert second["before"] == first["before"] and second["origin"]["yours"] == n
    assert second["after"]["files"] == n + 1
    assert second["new_files"] == [{"name": "x", "bytes": 0}]
    assert judge(d).judged is Judged.CHANGED  # x is new: judged, and said
    assert "entry.unexpected-name" in {f.code for f in judge(d).findings}


def test_a_small_directory_is_judged_in_full_without_a_memo(base, monkeypatch):
    """A few entries cost less to judge than a memo (itself a trusted input) to read."""
    monkeypatch.setattr(shortcut, "MIN_DIR_BYTES", MIN_DIR_BYTES)
    d = cache(base, 3)
    for _ in range(2):
        report = judge(d)
        assert (report.judged, report.judged_why, report.memo) == (Judged.FULL, Why.SMALL, None)
    assert not memo_file(d).exists()
    assert judge(grown(d)).memo is not None


# ---- UNCHANGED: the swaps its argument excludes ---------------------------------------------
@needs_root
def test_another_user_can_neither_rewrite_replace_nor_link_an_entry_of_a_closed_directory(
        base, accounts):
    d = cache(base, 2)
    remembered(d)
    entry, before = d / name(0), (d / name(0)).read_bytes()
    got = as_other(accounts.c, tried(
        f"os.close(os.open({str(entry)!r}, os.O_WRONLY))",
        f"os.rename({str(entry)!r}, {str(entry) + 'x'!r})",
        f"os.unlink({str(entry)!r})",
        f"os.link({str(entry)!r}, {str(base / 'theirs')!r})",
        f"os.chmod({str(entry)!r}, 0o666)"))
    assert got == ["EACCES"] * 5
    # even an entry you loosened is out of reach: no one else can look a name up in there
    entry.chmod(0o666)
    got = as_other(accounts.c, tried(f"os.close(os.open({str(entry)!r}, os.O_WRONLY))"))
    assert got == ["EACCES"]
    again = judge(d)
    assert again.judged is Judged.UNCHANGED and again.verdict.value == "PRIVATE"
    assert entry.read_bytes() == before


@needs_root
def test_a_read_handle_from_before_keeps_a_directory_from_being_remembered(base, accounts):
    """A descriptor that cannot write today could be reopened for writing through
    /proc/PID/fd once the entry's bits were loosened: while another user holds one, nothing
    is remembered; once it is closed, the directory is."""
    d = cache(base, 2, mode=0o755)
    holder = Holder(accounts.c, "read", d / name(0))
    try:
        d.chmod(0o700)
        settle()
        first = judge(d)
        assert first.verdict.value == "PRIVATE" and first.memo is None
        assert first.handles is not None and [h.pid for h in first.handles.readers] == \
            [holder.pid]
        assert judge(d).judged_why is Why.NO_MEMO
    finally:
        holder.close()
    assert judge(d).memo is not None
    assert judge(d).judged is Judged.UNCHANGED


# ---- UNCHANGED: each way its argument does not hold -> the full audit refuses ----------------
@needs_root
def test_an_entry_swapped_while_the_directory_was_opened_is_refused(base, accounts):
    d = cache(base, 2)
    remembered(d)
    d.chmod(0o777)  # opened (a moment of sharing)...
    theirs = as_other(accounts.c, tried(
        f"open({str(d / '.t')!r}, 'wb').write(b'not your code')",
        f"os.rename({str(d / '.t')!r}, {str(d / name(0))!r})"))
    assert theirs == ["OK", "OK"]
    d.chmod(0o700)  # ...and closed again: the directory's ctime says so
    report = judge(d)
    assert (report.judged, report.judged_why) == (Judged.FULL, Why.REFUSED)
    assert report.verdict.value == "UNSAFE" and accounts.c in report.writer_names()
    assert not memo_file(d).exists()


@needs_root
def test_a_restore_that_sets_the_directory_mtime_back_is_refused(base, accounts):
    """tar -x or rsync -a as root: another user's file under an entry's name, the directory's
    mtime restored with utimensat; its ctime cannot be."""
    d = cache(base, 2)
    remembered(d)
    st = d.stat()
    restored = d / ".restore"
    restored.write_bytes(b"someone else's code")
    shutil.chown(restored, accounts.c)
    os.replace(restored, d / name(1))
    os.utime(d, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert d.stat().st_mtime_ns == st.st_mtime_ns and d.stat().st_ctime_ns != st.st_ctime_ns
    report = judge(d)
    assert (report.judged, report.judged_why) == (Judged.FULL, Why.REFUSED)
    assert report.verdict.value == "UNSAFE" and accounts.c in report.writer_names()


def test_a_restore_of_your_own_files_with_other_bytes_is_refused_where_origin_is_required(
        base):
    d = cache(base, 2)
    first = judge(d, require_origin=True)
    assert first.memo is not None
    # where origin is required an entry is never taken as unchanged by its directory alone
    assert judge(d, require_origin=True).judged_why is Why.ORIGIN_REQUIRED
    st = d.stat()
    (d / ".restore").write_bytes(b"bytes from the backup")
    os.replace(d / ".restore", d / name(0))
    os.utime(d, ns=(st.st_atime_ns, st.st_mtime_ns))
    report = judge(d, require_origin=True)
    assert report.verdict.value == "UNSAFE" and report.judged_why is Why.REFUSED
    assert "origin.changed" in {f.code for f in report.findings}


def test_bytes_you_rewrite_in_place_are_found_where_origin_is_required(base):
    """cp over an existing entry keeps its inode and name, and rsync --inplace -t its mtime:
    the directory does not change, the entry's ctime does."""
    d = cache(base, 2)
    judge(d, require_origin=True)
    settle()
    entry = d / name(0)
    st = entry.stat()
    with open(entry, "r+b") as f:  # same size, other bytes, in place
        f.write(b"X" * st.st_size)
    os.utime(entry, ns=(st.st_atime_ns, st.st_mtime_ns))
    report = judge(d, require_origin=True)
    assert report.verdict.value == "UNSAFE" and "origin.changed" in {
        f.code for f in report.findings}
    # where origin is not required the shortcut stands for an hour (a warning, not a refusal,
    # is what the full audit adds): once it expires the entry is judged again, and said
    d2 = cache(base, 1, folder="other")
    remembered(d2)
    with open(d2 / name(0), "r+b") as f:
        f.write(b"Y")
    assert judge(d2).judged is Judged.UNCHANGED


def test_an_expired_judgement_judges_every_changed_entry_again(base, monkeypatch):
    d = cache(base, 2)
    remembered(d)
    with open(d / name(0), "r+b") as f:
        f.write(b"Y")
    monkeypatch.setattr(shortcut, "MAX_AGE_NS", 0)
    report = judge(d)
    assert (report.judged, report.judged_why) == (Judged.CHANGED, Why.EXPIRED)
    assert "origin.changed" in {f.code for f in report.findings}
    assert said(report) == said(full(d))


@needs_root
def test_a_handle_opened_before_the_directory_became_private_is_refused(base, accounts):
    d = cache(base, 2, mode=0o777)
    entry = d / name(0)
    entry.chmod(0o666)
    holder = Holder(accounts.c, "write", entry, source=Path("/etc/hostname"))
    try:
        d.chmod(0o700)
        entry.chmod(0o644)
        settle()
        first = judge(d)
        assert first.verdict.value == "UNSAFE" and first.memo is None
        assert "handle.write" in {f.code for f in first.findings}
        holder.write()  # through the handle it kept
        assert judge(d).verdict.value == "UNSAFE"
    finally:
        holder.close()


@needs_root
def test_a_handle_on_an_entry_of_an_open_directory_you_loosened_is_refused(base, accounts):
    """A directory others may search is never taken as unchanged by its stat alone: an entry
    whose bits you loosened lets them in without a name changing."""
    d = cache(base, 2, mode=0o755)
    judge(d)
    assert judge(d).judged_why is Why.OPEN_DIRECTORY
    entry = d / name(1)
    entry.chmod(0o666)
    assert as_other(accounts.c, tried(
        f"open({str(entry)!r}, 'r+b').write(b'theirs')")) == ["OK"]
    entry.chmod(0o644)
    report = judge(d)
    assert report.verdict.value != "PRIVATE" or "origin.changed" in {
        f.code for f in report.findings}
    assert report.judged is not Judged.UNCHANGED
    report = judge(d, require_origin=True)
    assert report.verdict.value == "UNSAFE" and report.judged is Judged.FULL


@needs_root
def test_a_hard_link_made_earlier_is_never_remembered_and_is_refused(base, accounts):
    """While the cache was shared, another user hard-linked a file of theirs in under an
    entry's name: it is theirs (and has two links), the full audit refuses it each time."""
    d = cache(base, 1, mode=0o777)
    theirs = mkdir(base / "theirs", 0o755, owner=accounts.c)
    assert as_other(accounts.c, tried(
        f"open({str(theirs / 'f')!r}, 'wb').write(b'their code')",
        f"os.link({str(theirs / 'f')!r}, {str(d / name(5))!r})")) == ["OK", "OK"]
    d.chmod(0o700)
    settle()
    for _ in range(2):
        report = judge(d)
        assert report.judged is Judged.FULL and report.memo is None
        assert report.verdict.value == "UNSAFE" and accounts.c in report.writer_names()
    # a second link of your own adds a name, not a writer: warned, and never remembered
    (theirs / "f").unlink()
    (d / name(5)).unlink()
    os.link(d / name(0), base / "mine")
    settle()
    report = judge(d)
    assert report.verdict.value == "PRIVATE" and report.memo is None
    assert "entry.hard-link" in {f.code for f in report.findings}


_IN_NAMESPACE = """
import json, os, sys
from jaxcache import fingerprint
from jaxcache.trust.inputs import audit_memo, ledger
from jaxcache.trust.kernel.principals import Accounts
from jaxcache.trust.rules.policy_rules import EMPTY
a = Accounts()
r = audit_memo.remembering(sys.argv[1], policy=EMPTY, accounts=a, env={},
                           ledger=lambda: ledger.load(accounts=a, env={}),
                           fingerprint=fingerprint.current)
print(json.dumps([r.verdict.value, r.judged.value, r.judged_why.name,
                  sorted(r.writer_names())]))
"""


@needs_root
def test_a_mount_over_the_directory_or_inside_it_is_judged_in_full(base, accounts, tmp_path):
    d = grown(cache(base, 2))
    remembered(d)
    other = mkdir(base / "other", 0o700, owner=accounts.c)
    (other / name(0)).write_bytes(b"their code")
    shutil.chown(other / name(0), accounts.c)
    lone = base / "lone"
    lone.write_bytes(b"their code")
    shutil.chown(lone, accounts.c)
    run = {"run": [sys.executable, "-c", _IN_NAMESPACE, str(d)],
           "env": {"XDG_STATE_HOME": os.environ["XDG_STATE_HOME"]}}
    steps = [run, run,  # a new namespace numbers its mounts anew: remembered there first
             {"mount": ["mount", "--bind", str(d), str(d)]}, run, {"mount": ["umount", str(d)]},
             run, run,
             {"mount": ["mount", "--bind", str(lone), str(d / name(1))]}, run,
             {"mount": ["umount", str(d / name(1))]},
             {"mount": ["mount", "--bind", str(other), str(d)]}, run]
    time.sleep(2.1)  # the audits there settle as `run` does (SETTLE_NS unpatched)
    said_there = [json.loads(r["stdout"]) for r in run_steps(steps, tmp_path) if "rc" in r]
    first, again, itself, back, settled, inside, over = said_there
    assert first[:3] == ["PRIVATE", "full", "OTHER_MOUNT"], first
    assert again[:3] == ["PRIVATE", "unchanged", "NONE"], again
    # the same directory bound onto itself: the same inodes, another mount: judged in full
    assert itself[:3] == ["PRIVATE", "full", "OTHER_MOUNT"], itself
    assert back[:3] == ["PRIVATE", "full", "OTHER_MOUNT"] and settled[1] == "unchanged"
    # another user's file bound over an entry: the directory's stat does not move
    assert inside[:3] == ["UNSAFE", "full", "MOUNT_INSIDE"] and accounts.c in inside[3], inside
    # another directory bound over the cache: another device and inode, nothing remembered
    # (and too small for a memo to be looked for)
    assert over[:2] == ["UNSAFE", "full"] and over[2] in ("NO_MEMO", "SMALL"), over
    assert accounts.c in over[3], over
    assert judge(d).verdict.value == "PRIVATE"  # outside, as it was


# ---- the memo is an input ---------------------------------------------------------------------
@needs_root
def test_a_memo_someone_else_could_write_is_not_believed(base, accounts, state):
    d = cache(base, 2)
    remembered(d)
    memo = memo_file(d)
    for spoil, undo in ((lambda: memo.chmod(0o666), lambda: memo.chmod(0o600)),
                        (lambda: shutil.chown(memo, accounts.c), lambda: shutil.chown(memo, 0)),
                        (lambda: memo.parent.chmod(0o777), lambda: memo.parent.chmod(0o700)),
                        (lambda: state.chmod(0o777), lambda: state.chmod(0o700))):
        memo.unlink(missing_ok=True)
        remembered(d)
        spoil()
        try:
            report = judge(d)
            assert (report.judged, report.judged_why) == (Judged.FULL, Why.NO_MEMO)
        finally:
            undo()


def _rewritten(memo: Path, field: int, value: bytes) -> None:
    head, rest = memo.read_bytes().split(b"\n", 1)
    fields = head.split(b"\t")
    fields[field] = value
    memo.write_bytes(b"\t".join(fields) + b"\n" + rest)


@pytest.mark.parametrize("spoil", [
    "truncated", "one byte more", "not a number", "a sign", "rows off by one", "boot",
    "another directory", "an entry name with a slash", "no newline", "empty"])
def test_an_odd_memo_is_no_memo(base, spoil):
    d = cache(base, 2, yours=False)
    remembered(d)
    memo = memo_file(d)
    data = memo.read_bytes()
    if spoil == "truncated":
        memo.write_bytes(data[:-5])
    elif spoil == "one byte more":
        memo.write_bytes(data + b"\n")
    elif spoil == "not a number":
        _rewritten(memo, 7, b"12x")
    elif spoil == "a sign":
        _rewritten(memo, 25, b"+2")
    elif spoil == "rows off by one":
        _rewritten(memo, 26, b"1")
    elif spoil == "boot":
        _rewritten(memo, 4, b"0" * 32)
    elif spoil == "another directory":
        _rewritten(memo, 2, str(base / "elsewhere").encode())
    elif spoil == "an entry name with a slash":
        memo.write_bytes(data.replace(name(0).encode(), b"../" + name(0)[3:].encode()))
    elif spoil == "no newline":
        memo.write_bytes(data.replace(b"\n", b" "))
    else:
        memo.write_bytes(b"")
    report = judge(d)
    assert report.judged is Judged.FULL, report.judged_why
    assert report.judged_why in (Why.NO_MEMO, Why.OTHER_BOOT)
    assert said(report) == said(full(d))


def test_a_memo_copied_from_another_directory_is_not_believed(base):
    a, b = cache(base, 2, folder="a"), cache(base, 2, folder="b")
    remembered(a)
    judge(b)
    shutil.copyfile(memo_file(a), memo_file(b))
    report = judge(b)
    assert (report.judged, report.judged_why) == (Judged.FULL, Why.NO_MEMO)


def test_new_ledger_lines_judge_entries_of_unknown_origin_again(base):
    d = cache(base, 2, yours=False)
    remembered(d)
    witness.recorder()(str(d), name(0).removesuffix("-cache"), b"compiled code 0")
    report = judge(d)
    assert (report.judged, report.judged_why) == (Judged.FULL, Why.LEDGER)
    assert report.origins is not None and report.origins.counts()["yours"] == 1


def test_another_origin_rule_is_another_judgement(base):
    d = cache(base, 2, yours=False)
    remembered(d)
    report = judge(d, require_origin=True)
    assert (report.judged, report.judged_why) == (Judged.FULL, Why.OTHER_CONTEXT)
    assert report.verdict.value == "UNSAFE"  # unknown origin, now refused
    assert not memo_file(d).exists()  # a judgement that did not pass leaves nothing


def test_a_directory_changed_just_before_it_was_judged_is_not_taken_as_unchanged(
        base, monkeypatch):
    monkeypatch.setattr(shortcut, "SETTLE_NS", 60 * 10**9)
    d = cache(base, 1)
    judge(d)
    assert judge(d).judged_why is Why.UNSETTLED


@needs_root
def test_processes_that_could_not_be_inspected_keep_the_entries_looked_at(base, accounts):
    """Judged as another user, whose audit cannot read a third user's processes: what those
    hold is unknown, so the remembered judgement never stands for an unchanged directory; the
    entries are lstat'ed each time."""
    runtime = user_runtime()
    home = mkdir(base / "b", 0o700, owner=accounts.b)
    sleeper = subprocess.Popen([*as_user_argv(accounts.c), "/bin/sleep", "60"])
    try:
        script = (
            "import os, time\n"
            f"d = {str(home / 'cache')!r}\n"
            f"os.makedirs({str(home / 'state' / 'jaxcache')!r}, 0o700)\n"
            "os.mkdir(d, 0o700)\n"
            "i = 0\n"
            f"while os.stat(d).st_size < {MIN_DIR_BYTES} and i < 5000:\n"
            "    open(os.path.join(d, f'jit_f{i}-' + 'a' * 64 + '-cache'), 'wb').write(b'x')\n"
            "    i += 1\n"
            "time.sleep(2.1)\n"
            f"{_IN_NAMESPACE.split('a = Accounts()')[0]}\n"
            "a = Accounts()\n"
            "for _ in range(2):\n"
            "    r = audit_memo.remembering(d, policy=EMPTY, accounts=a, env={},\n"
            "        ledger=lambda: ledger.load(accounts=a, env={}), fingerprint=None)\n"
            "    print(r.judged.value, r.judged_why.name, r.verdict.value)\n")
        proc = subprocess.run(
            [*as_user_argv(accounts.b), runtime.python, "-c", script], capture_output=True,
            text=True, timeout=120, cwd=home,
            env=runtime.env(XDG_STATE_HOME=str(home / "state"), HOME=str(home)))
        assert proc.returncode == 0, proc.stderr
        first, second = proc.stdout.splitlines()
        assert first.split() == ["full", "NO_MEMO", "PRIVATE"], proc.stdout
        assert second.split() == ["changed", "UNINSPECTED", "PRIVATE"], proc.stdout
    finally:
        sleeper.kill()
        sleeper.wait()
