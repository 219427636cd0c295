"""The remembered audit (trust/judgement/shortcut.py) attacked through `jaxcache run` itself.

tests/trust/test_remembered_audit.py attacks each shortcut's argument in-process; here each
attack is made for real against the installed command (`.venv/bin/jaxcache run`, with the
settle time and size gate as shipped), by another real user where the attack is another
user's, and judged by what matters: whether the job is handed the cache, and what it reads
there. Where the full audit (`jaxcache audit`) would refuse, `run` must refuse too, memo or no
memo.

The attacks that need a memo to be written while another user's descriptor on an entry is
hidden from the handle scan use the one hiding place open_handles.py says it cannot see: a
descriptor in flight in a Unix socket message (sent with SCM_RIGHTS to a socket of the
attacker's own, not yet received).
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
from support.users import (
    PeerProcess,
    mkdir,
    needs_root,
    needs_setfacl,
    started,
    user_runtime,
)

from jaxcache.lifecycle import witness
from jaxcache.trust.inputs import audit_memo
from jaxcache.trust.judgement import shortcut

JAXCACHE = str(Path(sys.executable).with_name("jaxcache"))
SETTLE_S = shortcut.SETTLE_NS / 1e9 + 0.2  # as `run` has it: no patching across a subprocess
SIZE = 64  # every entry's size: an attacker's bytes fit in place


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    """A state folder of the test's own (memos and the ledger), for every `jaxcache` run."""
    folder = mkdir(tmp_path / "state", 0o700)
    monkeypatch.setenv("XDG_STATE_HOME", str(folder))
    return folder


def name(i: int) -> str:
    return f"jit_f{i}-{i:064x}-cache"


def code(i: int) -> bytes:
    return f"compiled code {i}".encode().ljust(SIZE, b".")


def cache(base: Path, *, mode: int = 0o700, entry_mode: int = 0o644,
          folder: str = "cache") -> Path:
    """A cache a watched job of yours filled (every entry in the origin ledger), big enough
    for `run` to remember (shortcut.MIN_DIR_BYTES of directory), not yet settled."""
    d = mkdir(base / folder, mode)
    record = witness.recorder()
    i = 0
    while d.stat().st_size < shortcut.MIN_DIR_BYTES and i < 5000:
        (d / name(i)).write_bytes(code(i))
        (d / name(i)).chmod(entry_mode)
        record(str(d), name(i).removesuffix("-cache"), code(i))
        i += 1
    assert d.stat().st_size >= shortcut.MIN_DIR_BYTES
    return d


def tighten(d: Path) -> None:
    """What an owner does on learning the cache was shared: 0700 directory, 0644 entries."""
    for p in d.iterdir():
        p.chmod(0o644)
    d.chmod(0o700)


def settle() -> None:
    time.sleep(SETTLE_S)


def run(d: Path, *job: str, extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """`jaxcache run` of `job` on the cache `d`, as the installed command runs it."""
    return subprocess.run([JAXCACHE, "run", "-q", "--cache-dir", str(d), *extra, "--", *job],
                          capture_output=True, text=True, timeout=300)


def audit(d: Path, *extra: str) -> dict:
    """The full audit, nothing remembered (`jaxcache audit --json`)."""
    proc = subprocess.run([JAXCACHE, "audit", "--format", "json", *extra, str(d)],
                          capture_output=True, text=True, timeout=300)
    return json.loads(proc.stdout)


def memo_file(d: Path) -> Path:
    st = d.stat()
    return Path(audit_memo.memo_path(st.st_dev, st.st_ino))


def shorter(d: Path) -> tuple[str, str]:
    """How far `run`'s audit would judge the entries now, through the memo (how much and
    why), the memo left as it is (judgement/audit.py's audit(), not remembering())."""
    from jaxcache import fingerprint
    from jaxcache.trust.inputs import ledger as ledgermod
    from jaxcache.trust.judgement.audit import audit as audit_in_process
    from jaxcache.trust.kernel.principals import Accounts
    from jaxcache.trust.rules.policy_rules import EMPTY

    accounts = Accounts()
    report = audit_in_process(str(d), policy=EMPTY, accounts=accounts, scan_processes=False,
                              env={}, ledger=lambda: ledgermod.load(accounts=accounts, env={}),
                              fingerprint=fingerprint.current, remembered=audit_memo.load)
    return report.judged.value, report.judged_why.name


def passed(d: Path, *extra: str) -> bool:
    """`run` judged `d` and let a job in; whether it left a memo."""
    first = run(d, "true", extra=extra)
    assert first.returncode == 0, first.stderr
    return memo_file(d).is_file()


_SMUGGLER = r"""
import os, socket, sys
SIZE = int(sys.argv[4])
entry, via, flags = sys.argv[1], sys.argv[2], int(getattr(os, sys.argv[3], sys.argv[3]))
if via != "-":  # through a name of their own, removed again: the kernel then calls it deleted
    os.link(entry, via)
    fd = os.open(via, flags)
    os.unlink(via)
else:
    fd = os.open(entry, flags)
mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
socket.send_fds(mine, [b"x"], [fd])  # in flight: in no process's table until received
os.close(fd)
print("ready", flush=True)
for line in sys.stdin:
    word, _, arg = line.strip().partition(" ")
    if word == "take":
        _, fds, _, _ = socket.recv_fds(theirs, 1, 1)
        fd = fds[0]
    elif word == "reopen":  # through /proc: no name looked up, the inode's bits checked
        fd = os.open(f"/proc/self/fd/{fd}", os.O_RDWR)
    elif word == "write":
        os.pwrite(fd, arg.encode().ljust(SIZE, b"."), 0)
    elif word == "close":
        os.close(fd)
    print("done", flush=True)
"""


class Smuggler(PeerProcess):
    """Another user's process that opened an entry (`flags`: O_RDWR, O_PATH, 3: the access
    mode that neither reads nor writes, for ioctls, which needs both rights) while the cache
    was shared, by its name or `via` a hard link of theirs removed again, and keeps the
    descriptor in flight (sent to itself, not received) until told to take it."""

    what = "smuggler"

    def __init__(self, user: str, entry: Path, via: Path | None = None,
                 flags: str = "O_RDWR") -> None:
        runtime = user_runtime()
        super().__init__(user, runtime.python, "-c", _SMUGGLER, str(entry),
                         str(via) if via is not None else "-", flags, str(SIZE))

    def do(self, *lines: str) -> None:
        """Each line a command (take, write BYTES, close), each done before the next."""
        for x in lines:
            self.say(x)


@pytest.fixture
def smugglers():
    yield from started(Smuggler)


def _run_names_the_changed_entry(d: Path, tmp_path: Path) -> None:
    """The full audit finds one entry changed since its ledger line, and so does `run`: its
    record counts it changed (not taken as remembered, nor as yours)."""
    whole = audit(d)
    assert "origin.changed" in {f["code"] for f in whole["findings"]}, whole["findings"]
    record = tmp_path / "run.json"
    job = run(d, "true", extra=("--record", str(record)))
    assert job.returncode == 0, job.stderr
    origin = json.loads(record.read_text())["cache_dir"]["origin"]
    assert origin["changed"] == 1, origin


# ---- a descriptor hidden from the handle scan when the memo was written ----------------------
@needs_root
def test_a_write_handle_in_flight_when_judged_keeps_the_directory_from_being_remembered(
        base, accounts, smugglers):
    """While the cache was shared, another user linked an entry into a folder of theirs,
    opened it there for writing and removed the link: the descriptor is on the entry's inode,
    and the kernel names it by the removed name ("... (deleted)"). They keep it in flight while
    `run` judges the tightened cache, then take it back and write, holding it. The full audit
    finds the handle by its inode and refuses. Before the fix `run` remembered the directory
    (the scan saw nothing), and the next run found it unchanged, scanned only the directory's
    own inode, found the descriptor by no path, and let the job read their bytes."""
    d = cache(base, mode=0o777, entry_mode=0o666)
    theirs = mkdir(base / "theirs", 0o755, owner=accounts.c)
    entry = d / name(0)
    smuggler = smugglers(accounts.c, entry, theirs / "alias")
    tighten(d)
    assert os.stat(entry).st_nlink == 1
    settle()
    kept = passed(d)
    smuggler.do("take", "write their code")
    assert entry.read_bytes().startswith(b"their code")
    whole = audit(d)
    assert whole["verdict"] == "UNSAFE" and accounts.c in {
        w["principal"] for w in whole["writers"] if w["trust"] == "untrusted"}, whole
    job = run(d, "cat", str(entry))
    assert job.returncode == 1 and "their code" not in job.stdout, (job.stdout, job.stderr)
    assert not kept  # an open file the scan could not see: nothing was remembered


@needs_root
def test_bytes_written_through_a_handle_in_flight_when_judged_are_not_taken_as_unchanged(
        base, accounts, smugglers, tmp_path):
    """The same descriptor, by the entry's own name; the attacker writes through it and closes
    it: nothing is held any more. The full audit does not refuse (an entry of yours whose
    bytes changed is a warning where origin is not required: origin.changed), but it says so.
    Before the fix the memo's unchanged directory took the entry as remembered, said nothing,
    and the run's record counted another user's bytes as yours."""
    d = cache(base, mode=0o777, entry_mode=0o666)
    entry = d / name(0)
    smuggler = smugglers(accounts.c, entry)
    tighten(d)
    settle()
    kept = passed(d)
    smuggler.do("take", "write their code", "close")
    _run_names_the_changed_entry(d, tmp_path)
    assert not kept
    # where origin is required it is refused, as the full audit refuses it
    assert audit(d, "--require-origin")["verdict"] == "UNSAFE"
    job = run(d, "cat", str(entry), extra=("--require-origin",))
    assert job.returncode == 1 and "their code" not in job.stdout, (job.stdout, job.stderr)


@needs_root
@pytest.mark.parametrize("flags", ["O_PATH", "3"])
def test_an_o_path_handle_in_flight_when_remembered_and_reopened_for_writing_is_refused(
        base, accounts, smugglers, flags):
    """An O_PATH descriptor (it neither reads nor writes, so no lease probe sees it) through a
    removed link of theirs, in flight while `run` remembers the closed directory. Later you
    loosen one entry's bits (the argument says no one can reach it by name in a closed
    directory); they take the descriptor back, reopen it through /proc/self/fd for writing
    (no name looked up) and hold it. The full audit finds the handle by its inode; the
    unchanged directory's scan must too (it scanned the directory's inode alone, and the path
    the kernel gives is their removed link's). The same with the access mode 3, which
    neither reads nor writes (for ioctls): the kernel counts it neither as a reader nor as a
    writer, so the lease probe does not see it either."""
    d = cache(base, mode=0o777, entry_mode=0o666)
    theirs = mkdir(base / "theirs", 0o755, owner=accounts.c)
    entry = d / name(0)
    smuggler = smugglers(accounts.c, entry, theirs / "alias", flags=flags)
    tighten(d)
    settle()
    assert passed(d)  # remembered: nothing the scan or the probe can see
    entry.chmod(0o666)
    smuggler.do("take", "reopen", "write their code")
    assert entry.read_bytes().startswith(b"their code")
    assert audit(d)["verdict"] == "UNSAFE"
    job = run(d, "cat", str(entry))
    assert job.returncode == 1 and "their code" not in job.stdout, (job.stdout, job.stderr)



@needs_root
@pytest.mark.xfail(strict=True, reason="not fixed: an O_PATH descriptor (or one of access "
                   "mode 3) in flight is seen by neither the handle scan nor the lease "
                   "probe; once you loosen one entry's bits it is reopened for writing, and "
                   "a write closed again leaves the directory unchanged: only lstat'ing the "
                   "entries (shortcut 2) shows it")
@pytest.mark.parametrize("flags", ["O_PATH", "3"])
def test_bytes_written_through_an_o_path_handle_in_flight_after_you_loosened_an_entry(
        base, accounts, smugglers, tmp_path, flags):
    """The O_PATH descriptor of the test above, reopened for writing after you loosened one
    entry's bits, written through and closed: nothing is held, the directory is unchanged.
    The full audit says the entry changed (origin.changed); the unchanged directory's
    judgement takes it as remembered and counts another user's bytes as yours. The argument
    says loosening an entry in a closed directory lets no one in; a descriptor no scan could
    see when the memo was written does."""
    d = cache(base, mode=0o777, entry_mode=0o666)
    theirs = mkdir(base / "theirs", 0o755, owner=accounts.c)
    entry = d / name(0)
    smuggler = smugglers(accounts.c, entry, theirs / "alias", flags=flags)
    tighten(d)
    settle()
    assert passed(d)
    entry.chmod(0o666)
    smuggler.do("take", "reopen", "write their code", "close")
    entry.chmod(0o644)
    assert entry.read_bytes().startswith(b"their code")
    _run_names_the_changed_entry(d, tmp_path)

# ---- what the memo judged with, changed since -------------------------------------------------
def _ledger() -> Path:
    from jaxcache.trust.provenance import ledger_place

    return Path(ledger_place.ledger_path())


@needs_root
def test_a_ledger_others_may_write_since_the_memo_is_judged_as_the_full_audit_judges_it(
        base, accounts):
    """Where origin is required, an entry is yours only by a ledger no one else could have
    written (a ledger another user may write vouches for nothing). The ledger made writable by
    others after the memo (0666 here; an ACL or a parent alike): the full audit refuses every
    entry as of unknown origin; the remembered judgement must not keep calling them yours."""
    d = cache(base)
    settle()
    assert passed(d, "--require-origin")
    ledger = _ledger()
    ledger.chmod(0o666)
    whole = audit(d, "--require-origin")
    assert whole["verdict"] == "UNSAFE", whole["findings"]
    job = run(d, "true", extra=("--require-origin",))
    assert job.returncode == 1, job.stderr


# ---- the memo's own key and place -------------------------------------------------------------
@needs_root
def test_a_directory_made_again_on_the_same_inode_is_not_the_one_remembered(base, accounts):
    """The cache removed and made again at the same path (a clean-up script, a restore), on
    the freed inode number (ext4 hands one back, a fresh tmpfs numbers alike): the old memo is
    found under the new directory's key, with its path. That reuse is made certain here by
    giving the old memo the new directory's device and inode, as reuse would. The new one
    holds another user's file under an entry's name (as a restore by root might) and the old
    directory's mtime set back on it: its ctime is new, every entry is judged again, and `run`
    refuses."""
    d = cache(base)
    settle()
    assert passed(d)
    old = d.stat()
    remembered_bytes = memo_file(d).read_bytes()
    memo_file(d).unlink()
    shutil.rmtree(d)
    mkdir(d, 0o700)
    record = witness.recorder()
    i = 0
    while d.stat().st_size < shortcut.MIN_DIR_BYTES and i < 5000:
        (d / name(i)).write_bytes(code(i))
        record(str(d), name(i).removesuffix("-cache"), code(i))
        i += 1
    shutil.chown(d / name(0), accounts.c)
    os.utime(d, ns=(old.st_atime_ns, old.st_mtime_ns))
    new = d.stat()
    head, rest = remembered_bytes.split(b"\n", 1)
    fields = head.split(b"\t")
    fields[6:8] = [str(new.st_dev).encode(), str(new.st_ino).encode()]
    memo_file(d).write_bytes(b"\t".join(fields) + b"\n" + rest)
    memo_file(d).chmod(0o600)
    settle()
    assert shorter(d) == ("changed", "DIRECTORY_CHANGED")  # the old memo, found and used
    whole = audit(d)
    assert whole["verdict"] == "UNSAFE"
    job = run(d, "true")
    assert job.returncode == 1, job.stderr


@needs_root
def test_a_memo_forged_in_a_folder_another_user_controls_is_not_believed(base, accounts,
                                                                        state):
    """Another user who controls the folder the memos are read from (here `audited` is a
    link to a folder of theirs) writes a memo that matches the directory as it is now, after
    an entry of theirs was put in (they can stat the directory: its stamp is no secret). The
    memo is not a trusted input: the full audit runs and refuses."""
    d = cache(base)
    settle()
    assert passed(d)
    real = memo_file(d)
    forged = real.read_bytes()
    (d / name(0)).unlink()
    (d / name(0)).write_bytes(b"their code".ljust(SIZE, b"."))
    shutil.chown(d / name(0), accounts.c)
    st = d.stat()
    head, rest = forged.split(b"\n", 1)
    fields = head.split(b"\t")
    fields[6:14] = [str(x).encode() for x in (st.st_dev, st.st_ino, st.st_mtime_ns,
                                              st.st_ctime_ns, st.st_nlink, st.st_mode,
                                              st.st_uid, st.st_gid)]
    fields[5] = str(time.time_ns()).encode()
    theirs = mkdir(base / "theirs", 0o700, owner=accounts.c)
    (theirs / real.name).write_bytes(b"\t".join(fields) + b"\n" + rest)
    shutil.chown(theirs / real.name, accounts.c)
    audited = real.parent
    shutil.rmtree(audited)
    audited.symlink_to(theirs)
    time.sleep(SETTLE_S)  # the forged memo's directory as settled as a real one's
    assert shorter(d) == ("full", "NO_MEMO")
    job = run(d, "cat", str(d / name(0)))
    assert job.returncode == 1 and "their code" not in job.stdout, (job.stdout, job.stderr)
    # the same bytes as a memo of yours in your own folder are believed: the forgery itself
    # was sound, only its place gave it away
    audited.unlink()
    mkdir(audited, 0o700)
    (audited / real.name).write_bytes(b"\t".join(fields) + b"\n" + rest)
    (audited / real.name).chmod(0o600)
    assert shorter(d) == ("unchanged", "NONE")
    job = run(d, "cat", str(d / name(0)))
    assert job.returncode == 0 and "their code" in job.stdout, (job.stdout, job.stderr)


@needs_root
@needs_setfacl
@pytest.mark.parametrize("where", ["memo", "audited", "state"])
def test_an_acl_that_lets_another_user_write_the_memo_or_its_folders_unbelieves_it(
        base, accounts, state, where):
    """The memo's bits say 0600 in 0700 folders, but an ACL added later lets another user
    write it or replace it: not a trusted input, so not believed (the full audit runs)."""
    d = cache(base)
    settle()
    assert passed(d)
    memo = memo_file(d)
    target = {"memo": memo, "audited": memo.parent, "state": state}[where]
    subprocess.run(["setfacl", "-m", f"u:{accounts.c}:rwx", str(target)], check=True)
    assert shorter(d) == ("full", "NO_MEMO")


def test_remembered_inodes_are_read_only_when_a_handle_could_be_on_one_and_fail_closed():
    """The unchanged directory's handle scan (open_handles.Identities with `more`): the
    remembered entries' inodes are read at the first descriptor or mapping that could be one,
    at most once; where they cannot be read, any file on the directory's device counts."""
    from jaxcache.trust.kernel.open_handles import Identities

    calls = []

    def more(found):
        def read():
            calls.append(1)
            return found
        return read

    ids = Identities("/c", frozenset({(7, 1)}), more=more(frozenset({(7, 5), (7, 6)})))
    assert ids.holds(7, 1) and not ids.holds(8, 5) and calls == []  # another device: not read
    assert ids.number(5) and ids.holds(7, 6) and not ids.holds(7, 9) and calls == [1]
    assert ids.plus(frozenset({(9, 2)}), ()).holds(9, 2)
    lost = Identities("/c", frozenset({(7, 1)}), more=more(None))
    assert lost.number(12345) and lost.holds(7, 12345) and not lost.holds(8, 12345)
    assert Identities("/c", frozenset({(7, 1)})).number(5) is False
