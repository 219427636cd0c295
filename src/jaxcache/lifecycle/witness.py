"""The witness: each entry a watched job makes JAX write, appended to the origin ledger.

Installed in the job by `jaxcache run`'s probe (JAXCACHE_WITNESS names the ledger) and by
`enable()`, through the guard's hook on the cache JAX opens (jaxcompat.witness_puts). It runs
only when JAX writes an entry (a compile that passed both thresholds), never on a load, so a
warm start pays nothing. The line says what the file holds right after the write: the bytes
are read back and compared with what JAX passed to put, and only a file that holds exactly
them is recorded (one another writer got to first is not ours). The format and the reader are
trust/provenance/ledger_file.py's, the judgement trust/provenance/origin.py's.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time

from jaxcache.documents.synced import write_synced
from jaxcache.fingerprint.boot import boot_id
from jaxcache.jaxcompat.guard import ENTRY_SUFFIX
from jaxcache.trust.provenance import birth, ledger_file, ledger_place, ledger_writes, origin

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from jaxcache.fingerprint.model import Fingerprint
    from jaxcache.trust.provenance.ledger_file import Ledger

# read too: its header is checked before a line is added
_READ_APPEND = os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def recorder(ledger: str | None = None) -> Callable[[str, str, bytes], None]:
    """The guard's witness callback, appending to `ledger` (default: the user's). Each line
    names the writer's fingerprint (fingerprint.in_job(): what `jaxcache run` handed the job,
    else this process's own), found once, at the first write, never on a load."""
    path = os.path.abspath(ledger or ledger_place.ledger_path())
    boot = boot_id()
    mine: list[tuple[str, bytes]] = []  # (the id, its fingerprint line), once found

    def record(directory: str, key: str, value: bytes) -> None:
        name = f"{key}{ENTRY_SUFFIX}"
        if not ledger_file.recordable(name):
            return
        digest = hashlib.sha256(value).hexdigest()
        st = _holds(directory, name, digest, len(value))
        if st is None:
            return
        if not mine:
            mine.append(_writer())
        fid, described = mine[0]
        append(path, ledger_file.Written(
            name, digest, st.st_size,
            (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns), time.time(), directory,
            boot, fid), described)

    return record


def _writer() -> tuple[str, bytes]:
    """This process's fingerprint id and the ledger line that says what it stands for; ("",
    b"") when it cannot be told (its entries then read "build not recorded")."""
    try:
        from jaxcache import fingerprint

        found = fingerprint.in_job()
        return found.id, ledger_file.fingerprint_line(found)
    except Exception:
        return "", b""


def _holds(directory: str, name: str, digest: str, size: int) -> os.stat_result | None:
    """The entry file's status if it holds exactly the bytes JAX put (read back once: their
    `digest` and `size`), else None."""
    try:
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        read = origin.digest_at(dfd, name, size)
    finally:
        os.close(dfd)
    return read[1] if read is not None and read[0] == digest else None


def _create(dfd: int, name: str) -> None:
    """A missing ledger is made whole with its header, the file's own device, inode and birth
    time (a temporary file, then link(): never seen without it, never over one that exists)."""
    try:
        os.stat(name, dir_fd=dfd, follow_symlinks=False)
        return
    except FileNotFoundError:
        pass
    temp = f".{name}.{os.getpid()}.{time.time_ns()}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600, dir_fd=dfd)
    try:
        st = os.fstat(fd)
        write_synced(fd, ledger_file.header(st.st_dev, st.st_ino, birth.of_fd(fd)))
    except BaseException:  # a full or failing disk: no header, no ledger, no leftover
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dfd)
        raise
    finally:
        os.close(fd)
    try:
        os.link(temp, name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
    except FileExistsError:
        pass  # another process of the job made it meanwhile: append to that one
    finally:
        with contextlib.suppress(FileNotFoundError):  # an appender's _created() took it
            os.unlink(temp, dir_fd=dfd)


def _created(dfd: int, name: str, st: os.stat_result) -> bool:
    """The ledger has a second link, the temporary name _create() gives it (a job killed
    between link() and unlink(): found by the fault campaign). With it no appender accepts
    the file and every later entry would read as of unknown origin: remove that name. Only a
    name of that very form for this very file, in the state folder, of yours; True if gone."""
    prefix = f".{name}."
    listed = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dfd)  # dfd: O_PATH
    try:
        leftovers = [n for n in os.listdir(listed) if n.startswith(prefix)]
    finally:
        os.close(listed)
    for n in leftovers:
        pid, _, ns = n[len(prefix):].partition(".")
        if not (pid.isdigit() and ns.isdigit()):
            continue
        try:
            other = os.stat(n, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(n, dir_fd=dfd)
            return True
    return False


def _set_aside(dfd: int, name: str, fd: int, st: os.stat_result) -> bool:
    """A ledger of yours that does not name itself (an older jaxcache's, bound by device and
    inode only, or one restored with the cache) vouches for nothing: rename it beside, under a
    new name (nothing is deleted), so that this job starts a bound one. True if it was moved
    or is gone already."""
    first = os.pread(fd, 256, 0).partition(b"\n")[0]
    why = ledger_file.unbound(first, st.st_dev, st.st_ino, birth.of_fd(fd))
    if why in (None, ledger_file.NO_BIRTH):
        return False  # bound, or on a filesystem where no ledger can be: nothing to gain
    aside = f"{name}.unbound-{time.time_ns()}"
    try:
        now = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            return True  # another process of the job set it aside meanwhile
        os.rename(name, aside, src_dir_fd=dfd, dst_dir_fd=dfd)
    except FileNotFoundError:
        return True
    return True


# the ledger files (device, inode) this process described its fingerprint in already
_described: set[tuple[int, int]] = set()


def append(ledger: str, written: ledger_file.Written, described: bytes = b"") -> bool:
    """Append one line to the ledger (its folders made 0700, yours alone; the file 0600, a
    regular file of yours with one link, never through a symlink, its header naming itself).
    `described`: the writer's fingerprint line, written before the first line this process
    adds to that ledger file, in the same write. False when it cannot be trusted or written:
    the entry then stays of unknown origin, which fails closed."""
    from jaxcache import folders
    from jaxcache.errors import JaxcacheError

    try:
        _, dfd = folders.private_folders(os.path.dirname(ledger), "origin ledger")
    except (JaxcacheError, OSError):  # not yours alone, or the disk failed: not written
        return False
    name = os.path.basename(ledger)
    try:
        # again after setting an unbound ledger aside, or when gc compacted it meanwhile: as
        # often as that happens until the lock's deadline (ledger_writes.hold() waits within
        # it too), never a fixed count that back-to-back compactions could use up
        deadline = time.monotonic() + ledger_writes.LOCK_WAIT_S
        while time.monotonic() < deadline:
            _create(dfd, name)
            fd = os.open(name, _READ_APPEND, dir_fd=dfd)
            try:
                st = os.fstat(fd)
                if st.st_nlink == 0:
                    continue  # a compaction renamed a new file over it since our open
                if not ledger_writes.appendable(st):
                    if st.st_nlink == 2 and _created(dfd, name, st):
                        continue  # its creation's temporary name, left by a kill: gone now
                    return False
                if _set_aside(dfd, name, fd, st):
                    continue
                held = ledger_writes.hold(fd, dfd, name)
                if held is None:
                    continue  # replaced by its compaction while we waited: the new one
                if not held:
                    return False
                st = os.fstat(fd)
                head = described if (st.st_dev, st.st_ino) not in _described else b""
                done = ledger_writes.write_lines(fd, st, head + ledger_file.line(written))
                if done and head:
                    _described.add((st.st_dev, st.st_ino))
                return done
            finally:
                os.close(fd)
        return False
    except OSError:
        return False
    finally:
        os.close(dfd)


# a trusted writer's ledger the in-job gate reads again: its path, and the users the policy
# trusts for the cache (who may own and write it besides you and root)
Vouching = tuple[str, frozenset[int]]


def gatekeeper(ledger: str | None = None, trusted: tuple[Vouching, ...] = ()
               ) -> Callable[[str, str, bytes], bool]:
    """The guard's judge of each entry JAX is about to load (jaxcompat.gate_gets), where
    entries of unknown origin are refused (under CI, --require-origin): the very bytes must
    hash to a line for that name, of your ledger or of a trusted writer's (`trusted`: those
    the audit found vouching, trust/judgement/origin_findings.py's vouching()), written by a
    build that may load here (trust/origin's built(): a line naming another build or host is
    a refusal, one that names none, an older jaxcache's, is not), else the load is a miss and
    JAX compiles. Each trusted ledger is read again as the audit read it (trust/inputs/
    ledger.py's load_trusted: a trusted input only its owner among `writers`, you and root can
    change, all the way up, bound to its file; under CI, this boot's lines): one that fails
    vouches for nothing here. The ledgers and this process's fingerprint (fingerprint.in_job())
    are read once, at the first load."""
    path = os.path.abspath(ledger or ledger_place.ledger_path())
    known: list[tuple[tuple[Ledger, ...], Fingerprint | None, str]] = []  # ledgers, mine, id

    def judge(directory: str, key: str, value: bytes) -> bool:
        if not known:
            from jaxcache.trust.inputs import ledger as ledgermod

            mine = _reader()
            loaded = (ledgermod.load(path), *(ledgermod.load_trusted(p, writers)
                                              for p, writers in trusted))
            known.append((tuple(r for r in loaded if not r.problem), mine,
                          mine.id if mine is not None and mine.build is not None else ""))
        [(ledgers, mine, mine_id)] = known
        digest = hashlib.sha256(value).hexdigest()
        name = f"{key}{ENTRY_SUFFIX}"
        return any(w.sha256 == digest and origin.may_load(w, read, mine, mine_id)
                   for read in ledgers for w in read.by_name.get(name, ()))

    return judge


def vouching_env(trusted: tuple[Vouching, ...]) -> str:
    """The trusted ledgers the in-job gate reads (JAXCACHE_ORIGIN_TRUSTED), as `jaxcache run`
    hands them to the job: JSON [[path, [uid, ...]], ...]. Only this run's (jobenv.PER_RUN):
    each is read again in the job by the same loader, with the same writers."""
    import json

    return json.dumps([[p, sorted(writers)] for p, writers in trusted])


def vouching_from_env(value: str | None) -> tuple[Vouching, ...]:
    """vouching_env()'s value read back; anything else vouches for nothing (fail closed)."""
    if not value:
        return ()
    import json

    try:
        doc = json.loads(value)
    except ValueError:
        return ()
    out = []
    for item in doc if isinstance(doc, list) else ():
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
                and item[0].startswith("/") and isinstance(item[1], list)
                and all(type(u) is int and u >= 0 for u in item[1])):
            return ()
        out.append((item[0], frozenset(item[1])))
    return tuple(out)


def _reader() -> Fingerprint | None:
    """This process's fingerprint, or None where it cannot be found (then the build of each
    line cannot be compared: judged by its bytes alone, as before lines named builds)."""
    try:
        from jaxcache import fingerprint

        return fingerprint.in_job()
    except Exception:
        return None
