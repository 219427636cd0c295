"""The origin ledger's binding, signatures counted per key and holder, root links on the way to
a trusted file, planted locks, hostile names and XLA sub-cache flags, each tried with cases the
fixes of issue 39 (commit 1bfb9d3) did not cover in their own tests. A test that passes means
the defence held (it asserts the safe behaviour); one marked xfail(strict=True) found a hole,
and says where.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path

import pytest
from support.ledgers import bound_ledger, judged
from support.users import mkdir, needs_root, needs_setfacl

from jaxcache.fingerprint.boot import boot_id
from jaxcache.trust.inputs import ledger as ledger_mod
from jaxcache.trust.provenance import birth, ledger_file, ledger_writes

ENTRY = "jit_f-" + "ab" * 32 + "-cache"


# ---- class 1: the origin ledger ---------------------------------------------------------------
def _written(name: str = ENTRY, digest: str = "b" * 64, size: int = 10) -> ledger_file.Written:
    return ledger_file.Written(name, digest, size, (1, 2, 3, 4), 1.5, "/c")


def _identity(path: Path) -> tuple[int, int, int | None]:
    st = path.stat()
    return st.st_dev, st.st_ino, birth.of_path(str(path))


@pytest.mark.parametrize("extra", [b"\textra", b"\t", b" ", b"\r", b"0", b"\t-"])
def test_a_header_with_anything_after_the_birth_time_vouches_for_nothing(extra, tmp_path):
    state = mkdir(tmp_path / "s", 0o700)
    led = state / "origin.ledger"
    bound_ledger(led, ledger_file.line(_written()), extra)
    got = ledger_mod.load(str(led))
    assert got.problem and not got.by_name


def _chunked(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)] or [b""]


def test_every_chunk_boundary_reads_the_same_ledger(tmp_path):
    """The streaming reader split at every byte: a boundary inside the header, inside a line,
    right after a newline, and a header longer than the chunk give the one-chunk answer."""
    led = tmp_path / "l"
    led.write_bytes(b"")
    dev, ino, born = _identity(led)
    head = ledger_file.header(dev, ino, born or 1)
    lines = (ledger_file.line(_written()) + b"garbage\n"
             + ledger_file.line(_written("jit_g-" + "c" * 64 + "-cache")) + b"\n\n"
             + ledger_file.line(_written())[:-5])  # torn last line
    ident = (dev, ino, born or 1)
    for body in (head + lines, head + lines + b"\n", head, head.rstrip(b"\n"), b"",
                 lines, head + b"\n"):
        whole = ledger_file.parse_chunks([body], "l", ident)
        for size in range(1, len(body) + 2):
            part = ledger_file.parse_chunks(_chunked(body, size), "l", ident)
            assert (part.problem, part.lines, part.skipped, dict(part.by_name)) == \
                (whole.problem, whole.lines, whole.skipped, dict(whole.by_name)), (body, size)


def test_a_ledger_only_header_without_newline_is_bound_and_empty(tmp_path):
    led = tmp_path / "l"
    led.write_bytes(b"")
    dev, ino, born = _identity(led)
    if born is None:
        pytest.skip("no birth time here")
    got = ledger_file.parse_chunks([ledger_file.header(dev, ino, born).rstrip(b"\n")], "l",
                              (dev, ino, born))
    assert got.problem is None and got.lines == 0 and got.skipped == 0


def test_a_ledger_in_a_folder_others_can_write_vouches_for_nothing(tmp_path):
    top = mkdir(tmp_path / "t", 0o755)
    state = mkdir(top / "state", 0o777)
    led = state / "origin.ledger"
    bound_ledger(led, ledger_file.line(_written()))
    got = ledger_mod.load(str(led))
    assert got.problem and not got.by_name


def test_a_symlinked_ledger_vouches_for_nothing(tmp_path):
    state = mkdir(tmp_path / "s", 0o700)
    real = state / "real.ledger"
    bound_ledger(real, ledger_file.line(_written()))
    (state / "origin.ledger").symlink_to(real)
    got = ledger_mod.load(str(state / "origin.ledger"))
    assert got.problem and not got.by_name


def test_a_hard_linked_ledger_is_never_appended_to(tmp_path):
    """A second name gives no one else the inode's content (its mode does), and the reader
    takes it (load() does not look at st_nlink); the witness and relearn do refuse it."""
    from jaxcache.lifecycle import witness

    state = mkdir(tmp_path / "s", 0o700)
    real = state / "real.ledger"
    bound_ledger(real, ledger_file.line(_written()))
    os.link(real, state / "origin.ledger")
    got = ledger_mod.load(str(state / "origin.ledger"))
    assert got.problem is None  # as found: read like the one name
    before = real.read_bytes()
    assert not witness.append(str(state / "origin.ledger"), _written("jit_h-" + "e" * 64
                                                                    + "-cache"))
    assert not ledger_writes.relearn(got, (_written("jit_h-" + "e" * 64 + "-cache"),))
    assert real.read_bytes() == before


@pytest.fixture
def shm(tmp_path):
    """A directory on a tmpfs (/dev/shm): where CI runners and `--tmpfs` mounts keep caches."""
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm")
    d = Path(tempfile.mkdtemp(prefix="jaxcache-atk-", dir="/dev/shm"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@needs_root
def test_relearn_never_vouches_for_a_file_another_account_can_still_write(shm, tmp_path):
    """Another account (nobody) puts a copy of an entry you wrote, keeps it mapped writable,
    and waits for an audit to relearn its identity; then rewrites it through the mapping."""
    state = mkdir(tmp_path / "state", 0o700)
    mine = mkdir(tmp_path / "mine", 0o700)
    body = b"compiled f " * 400
    (mine / ENTRY).write_bytes(body)
    st = os.stat(mine / ENTRY)
    led = state / "origin.ledger"
    bound_ledger(led, ledger_file.line(ledger_file.Written(
        ENTRY, hashlib.sha256(body).hexdigest(), len(body),
        (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns), 1.0, str(mine))))
    cache = shm / "cache"
    cache.mkdir(mode=0o755)
    theirs = cache / ENTRY
    theirs.write_bytes(body)
    shutil.chown(theirs, "nobody")  # the account that wrote it, and can write it again
    fd = os.open(theirs, os.O_RDWR)
    try:
        m = mmap.mmap(fd, len(body))
        m[0:1] = m[0:1]  # the first write fault sets ctime once, before the audit
        first = judged(cache, led)
        assert first.by_name()[ENTRY] == "yours"  # the very bytes you wrote: true now
        m[0:len(body)] = b"compiled g " * 400  # then the code of another function
        m.flush()
        assert theirs.read_bytes() != body
        again = judged(cache, led)
        m.close()
    finally:
        os.close(fd)
    assert again.by_name()[ENTRY] != "yours", "poisoned bytes judged yours by identity"


def test_an_entry_rewritten_through_a_mapping_is_not_yours(shm, tmp_path):
    """A file of yours others may write (0666 here) can be rewritten through a shared mapping
    without moving its ctime: its identity stands for nothing, it is read and hashed. (Your
    own account's mappings of your 0644 files are whoever runs as you: out of reach.)"""
    state = mkdir(tmp_path / "state", 0o700)
    cache = shm / "cache"
    cache.mkdir(mode=0o700)
    body = b"compiled f " * 400
    (cache / ENTRY).write_bytes(body)
    (cache / ENTRY).chmod(0o666)
    fd = os.open(cache / ENTRY, os.O_RDWR)
    try:
        m = mmap.mmap(fd, len(body))
        m[0:1] = m[0:1]
        st = os.stat(cache / ENTRY)  # what the witness records right after JAX's write
        led = state / "origin.ledger"
        bound_ledger(led, ledger_file.line(ledger_file.Written(
            ENTRY, hashlib.sha256(body).hexdigest(), len(body),
            (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns), 1.0, str(cache))))
        m[0:len(body)] = b"compiled g " * 400
        m.close()
    finally:
        os.close(fd)
    assert (cache / ENTRY).read_bytes() != body
    assert judged(cache, led).by_name()[ENTRY] != "yours"


def test_the_gatekeeper_hashes_what_jax_loads_whatever_the_identity(tmp_path):
    """Where origin is required, a load is judged by its bytes (witness.gatekeeper), so the
    two holes above reach the audit's verdict, not a job's load."""
    from jaxcache.lifecycle import witness

    state = mkdir(tmp_path / "state", 0o700)
    body = b"compiled f"
    led = state / "origin.ledger"
    bound_ledger(led, ledger_file.line(_written(digest=hashlib.sha256(body).hexdigest(),
                                            size=len(body))))
    judge = witness.gatekeeper(str(led))
    key = ENTRY[: -len("-cache")]
    assert judge("/c", key, body)
    assert not judge("/c", key, b"compiled g")


def test_relearn_does_not_append_to_a_ledger_replaced_since_it_was_read(tmp_path):
    """Between the audit's read and its append the witness may set the ledger aside and
    start another: the relearned lines must not land in the new one unchecked."""
    state = mkdir(tmp_path / "state", 0o700)
    led = state / "origin.ledger"
    bound_ledger(led, ledger_file.line(_written()))
    loaded = ledger_mod.load(str(led))
    assert loaded.identity is not None
    os.rename(led, state / "aside")
    bound_ledger(led, b"")
    assert not ledger_writes.relearn(loaded, (_written("jit_h-" + "d" * 64 + "-cache"),))
    assert led.read_bytes().count(b"\n") == 1


# ---- class 2: counting signatures -------------------------------------------------------------
def _sealed_dir(tmp_path: Path, sigs: list[tuple[object, tuple[str, ...] | None, str]],
                data: bytes) -> Path:
    from jaxcache.seal.publishing import tier_names as names
    from jaxcache.seal.signing import signature_file as sigfile

    d = mkdir(tmp_path / "sealed", 0o700)
    (d / ENTRY).write_bytes(data)
    for signer, relies, slot in sigs:
        sig = sigfile.sign(names.key_of(ENTRY), data, signer, relies_on=relies)
        where = names.sidecar(ENTRY, names.SIGNATURE) if slot == "first" else \
            names.cosignature(ENTRY, slot)
        (d / where).write_bytes(sig)
    return d


def _loads(d: Path, ring) -> bytes | None:
    from jaxcache.seal.publishing import tier_names as names
    from jaxcache.seal.stores.sealed_cache import SealedCache

    cache = SealedCache(str(d), trusted=ring)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return cache.get(names.key_of(ENTRY))
    finally:
        cache.close()


def test_one_holder_with_two_keys_never_reaches_two(tmp_path):
    from dataclasses import replace

    from jaxcache.trust.inputs import signing_keys as keymod
    from jaxcache.trust.rules.keyring import KeyRing

    old, new, bob = (keymod.generate(n) for n in ("ci-old", "ci-new", "bob"))
    pubs = [replace(old.public, holder="publisher"), replace(new.public, holder="publisher"),
            replace(bob.public, holder="bob")]
    ring = KeyRing({p.raw: p for p in pubs}, needed=2)
    poison = b"code only the publisher approved"
    d = _sealed_dir(tmp_path, [(old, None, "first"), (new, (), new.public.id)], poison)
    assert _loads(d, ring) is None, "one holder's two keys counted as two approvals"


def test_the_same_key_under_two_names_counts_once(tmp_path):
    from dataclasses import replace

    from jaxcache.trust.inputs import signing_keys as keymod
    from jaxcache.trust.rules.keyring import KeyRing, KeyRingError

    a, b = keymod.generate("a"), keymod.generate("b")
    twice = [replace(a.public, name="one"), replace(a.public, name="two"), b.public]
    try:
        ring = KeyRing({p.raw: p for p in twice}, needed=2)
    except KeyRingError:
        return
    d = _sealed_dir(tmp_path, [(a, None, "first"), (a, (), a.public.id)], b"x")
    assert _loads(d, ring) is None


def test_a_cosignature_relying_on_a_key_that_never_signed_adds_nothing_twice(tmp_path):
    """A co-signer naming a stranger in relies_on only shrinks its own word."""
    from jaxcache.trust.inputs import signing_keys as keymod
    from jaxcache.trust.rules.keyring import KeyRing

    a, b, c = (keymod.generate(n) for n in "abc")
    ring = KeyRing({k.public.raw: k.public for k in (a, b, c)}, needed=2)
    d = _sealed_dir(tmp_path, [(a, None, "first"), (a, (b.public.id,), a.public.id)], b"x")
    assert _loads(d, ring) is None


def test_a_policy_listing_one_key_twice_needs_two_keys(tmp_path):
    """trusted_keys with one key under two names, signatures_needed = 2: refused or one."""
    from jaxcache.trust.inputs import policy as policymod
    from jaxcache.trust.inputs import signing_keys as keymod
    from jaxcache.trust.rules import keyring as ringmod
    from jaxcache.trust.rules.keyring import KeyRingError

    a = keymod.generate("a")
    cache = mkdir(tmp_path / "c", 0o700)
    text = a.public.text
    pol = tmp_path / "p.toml"
    pol.write_text(f'[[cache]]\npath = "{cache}"\ntrusted_keys = [{{ holder = "root", key = '
                   f'"one:{text}" }}, {{ holder = "root", key = "two:{text}" }}]\n'
                   "signatures_needed = 2\n")
    pol.chmod(0o600)
    try:
        from jaxcache.trust.kernel.principals import Accounts

        rule = policymod.load(str(pol), Accounts()).rule_for(str(cache))
        ring = ringmod.for_rule(rule)
    except (KeyRingError, policymod.PolicyError):
        return
    d = _sealed_dir(tmp_path, [(a, None, "first"), (a, (), a.public.id)], b"x")
    assert _loads(d, ring) is None


# ---- class 3: policy paths --------------------------------------------------------------------
def _declared_applies(declared: Path, target: Path) -> bool:
    from jaxcache.trust.rules.policy_rules import Policy, Rule, as_written

    pol = Policy(per_path=((as_written(str(declared)), Rule(restored_from=("src",))),))
    return bool(pol.rule_for(str(target)).restored_from)


@needs_root
def test_a_root_link_in_a_folder_another_account_owns_carries_nothing(base, accounts):
    target = mkdir(base / "real", 0o700)
    theirs = mkdir(base / "theirs", 0o755, accounts.a)
    (theirs / "cache").symlink_to(target)
    os.lchown(theirs / "cache", 0, 0)
    assert _declared_applies(target, target)  # the check can fail
    assert not _declared_applies(theirs / "cache", target)


@needs_root
@needs_setfacl
def test_a_root_link_in_a_folder_an_acl_lets_another_write_carries_nothing(base, accounts):
    target = mkdir(base / "real", 0o700)
    folder = mkdir(base / "f", 0o755)
    (folder / "cache").symlink_to(target)
    subprocess.run(["setfacl", "-m", f"u:{accounts.c}:rwx", str(folder)], check=True)
    assert not _declared_applies(folder / "cache", target)


@needs_root
def test_a_root_link_below_a_folder_another_account_can_rename_carries_nothing(base,
                                                                                accounts):
    target = mkdir(base / "real", 0o700)
    theirs = mkdir(base / "theirs", 0o755, accounts.a)
    inner = mkdir(theirs / "inner", 0o755)  # root's, but inside a's: a can rename it away
    (inner / "cache").symlink_to(target)
    assert not _declared_applies(inner / "cache", target)


@needs_root
def test_a_root_link_to_a_target_under_another_accounts_folder_carries_nothing(base,
                                                                                 accounts):
    theirs = mkdir(base / "theirs", 0o755, accounts.a)
    target = mkdir(theirs / "real", 0o700)  # root's, but a can replace it
    (base / "cache").symlink_to(target)
    assert not _declared_applies(base / "cache", target)


@needs_root
def test_a_group_writable_folder_on_the_way_carries_nothing(base, accounts):
    target = mkdir(base / "real", 0o700)
    team = mkdir(base / "team", 0o775, "root", accounts.group)
    (team / "cache").symlink_to(target)
    assert not _declared_applies(team / "cache", target)


@needs_root
def test_dotdot_through_a_planted_link_carries_nothing(base, accounts):
    """'/sticky/x/../cache' is '/sticky/cache' as text, whatever x is: the declaration names
    that, and a planted link there still carries nothing onto its target."""
    target = mkdir(base / "real", 0o700)
    sticky = mkdir(base / "sticky", 0o1777)
    mkdir(sticky / "x", 0o755)
    subprocess.run(["setpriv", f"--reuid={accounts.c}", "--regid=65534", "--clear-groups",
                    "ln", "-s", str(target), str(sticky / "cache")], check=True)
    assert not _declared_applies(Path(f"{sticky}/x/../cache"), target)
    assert not _declared_applies(Path(f"{sticky}//./cache"), target)


def test_bucket_spellings_match_one_declaration_only():
    from jaxcache.trust.rules.policy_rules import Policy, Rule, url_text

    pol = Policy(per_path=((url_text("gs://bkt/team/cache"), Rule(restored_from=("s",))),))
    assert pol.declared("gs://bkt/team/cache/").restored_from
    assert pol.declared("gs://bkt//team/cache").restored_from  # the same objects
    for other in ("gs://bkt/team/cache2", "gs://bkt/team", "s3://bkt/team/cache",
                  "gs://bkt/team/cache/x", "gs://bkt/team/./cache", "gs://bkt/team/x/../cache",
                  "GS://bkt/team/cache", "gs://BKT/team/cache", "gs://bkt/Team/cache"):
        assert not pol.declared(other).restored_from, other


# ---- classes 5, 6, 7: hostile names, planted locks, quarantine, through verify and ls ----------
HOSTILE = ("jit_\x1b]0;pwned\x07f-" + "1" * 64 + "-cache",
           "jit_f\n[valid] jit_g-" + "2" * 64 + "-cache",
           "jit_\u202eevil-" + "3" * 64 + "-cache",
           "jit_\r\x1b[2Kf-" + "4" * 64 + "-cache")


def _raw_controls(text: str) -> list[str]:
    return [c for c in text if (ord(c) < 32 and c != "\n") or c == "\x7f" or
            0x80 <= ord(c) < 0xa0 or c in "\u202e\u202d\u2066\u2067\u2068\u2069"]


@needs_root
def test_hostile_names_and_planted_locks_through_verify_and_ls(base, accounts, tmp_path):
    from support.jobs import jaxcache

    from jaxcache.seal.publishing import locks
    from jaxcache.trust.inputs import signing_keys as keymod

    key = keymod.generate("ci")
    shared = mkdir(base / "shared", 0o1777)
    me = os.geteuid()
    as_c = ["setpriv", f"--reuid={accounts.c}", f"--regid={accounts.c}", "--init-groups"]
    for n in HOSTILE:
        subprocess.run([*as_c, "sh", "-c", 'printf x > "$1"', "-", str(shared / n)],
                       check=True)
    subprocess.run([*as_c, "mkfifo", str(shared / locks.name(me))], check=True)
    subprocess.run([*as_c, "sh", "-c", 'printf x > "$1"', "-",
                    str(shared / f".jaxcache-lock-0{me}")], check=True)
    subprocess.run([*as_c, "ln", "-s", "/etc/shadow", str(shared / ".lockfile")], check=True)
    pub = tmp_path / "ci.pub"
    pub.write_text(key.public.text + "\n")
    outs = []
    for args in (("verify", "--strict", "-v", "--trusted-key", str(pub), str(shared)),
                 ("verify", "--format", "json", "--trusted-key", str(pub), str(shared)),
                 ("ls", str(shared)), ("audit", "-v", str(shared)),
                 ("audit", "--format", "sarif", str(shared))):
        proc = jaxcache(*args, env={**os.environ, "NO_COLOR": "1"})
        assert "Traceback" not in proc.stderr, (args, proc.stderr[-2000:])
        outs.append((args, proc))
        for text in (proc.stdout, proc.stderr):
            assert not _raw_controls(text), (args, text[-3000:])
            assert "\n[valid] jit_g" not in text, args
    strict = outs[0][1]
    assert strict.returncode == 1
    assert locks.name(me) in strict.stdout + strict.stderr
    assert f".jaxcache-lock-0{me}" in strict.stdout + strict.stderr
    qdir = tmp_path / "q"
    proc = jaxcache("verify", "--trusted-key", str(pub), "--quarantine", str(qdir),
                    str(shared), env={**os.environ, "NO_COLOR": "1"})
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    for text in (proc.stdout, proc.stderr):
        assert not _raw_controls(text), text[-3000:]
    # moved (root may move them even under the sticky bit) into this run's own folder
    runs = list(qdir.iterdir())
    assert len(runs) == 1 and sorted(p.name for p in runs[0].iterdir()) == sorted(HOSTILE)


@needs_root
def test_another_account_cannot_stop_your_size_limited_publish(base, accounts):
    """The publisher is account a (not root), its tier a sticky shared folder; account c
    creates a's lock name first. The control: the same publish without c's file succeeds.
    (a has a state folder of its own, as a real account has: its locks live there now.)"""
    from support.users import as_user_argv, user_runtime

    from jaxcache.seal.publishing import locks

    runtime = user_runtime()
    script = (
        "import sys, warnings\n"
        "from jaxcache.trust.inputs import signing_keys as keys\n"
        "from jaxcache.seal.publishing import tier_names as names\n"
        "from jaxcache.seal.stores.sealed_cache import SealedCache\n"
        "k = keys.generate('ci')\n"
        "c = SealedCache(sys.argv[1], trusted=[k.public], signer=k, max_size=lambda: 1 << 30)\n"
        "warnings.simplefilter('ignore')\n"
        "try:\n"
        "    c.put(names.key_of(sys.argv[2]), b'compiled f')\n"
        "except OSError as exc:\n"
        "    print('refused:', exc)\n"
        "c.close()\n")
    uid_a = int(subprocess.run(["id", "-u", accounts.a], capture_output=True, text=True,
                               check=True).stdout)
    state = mkdir(base / "state-a", 0o700, owner=accounts.a)
    results = {}
    for planted in (False, True):
        shared = mkdir(base / f"shared-{planted}", 0o1777)
        if planted:
            subprocess.run(["setpriv", f"--reuid={accounts.c}", f"--regid={accounts.c}",
                            "--init-groups", "sh", "-c", ': > "$1"', "-",
                            str(shared / locks.name(uid_a))], check=True)
        proc = subprocess.run([*as_user_argv(accounts.a), runtime.python, "-c", script,
                               str(shared), ENTRY], env=runtime.env(XDG_STATE_HOME=str(state)),
                              capture_output=True, text=True, cwd="/")
        assert proc.returncode == 0, proc.stderr[-2000:]
        results[planted] = ((shared / ENTRY).exists(), proc.stdout)
    assert results[False][0], results  # the check can pass
    assert results[True][0], f"a's write was refused by c's planted lock: {results[True][1]}"


@needs_root
@pytest.mark.parametrize("through_mapping", [
    False,
    True])
def test_ci_audit_after_a_trusted_writer_rewrites_a_relearned_entry(through_mapping, shm,
                                                                      accounts):
    import json

    from support.jobs import jaxcache

    state = shm / "state"
    (state / "jaxcache").mkdir(parents=True, mode=0o700)
    state.chmod(0o700)
    cache = shm / "cache"
    cache.mkdir(mode=0o755)
    shutil.chown(cache, accounts.c)
    body = b"compiled f " * 400
    bound_ledger(state / "jaxcache" / "origin.ledger", ledger_file.line(ledger_file.Written(
        ENTRY, hashlib.sha256(body).hexdigest(), len(body), (1, 2, 3, 4), 1.0, "/mine",
        boot_id())))  # as your watched job wrote it, in this boot
    theirs = cache / ENTRY
    theirs.write_bytes(body)  # c's copy of an entry your watched job wrote elsewhere
    shutil.chown(theirs, accounts.c)
    pol = shm / "policy.toml"
    pol.write_text(f'[[cache]]\npath = "{cache}"\ntrusted_users = ["{accounts.c}"]\n')
    pol.chmod(0o600)
    env = {**os.environ, "XDG_STATE_HOME": str(state), "CI": "true", "NO_COLOR": "1"}

    def audit() -> tuple[int, dict]:
        proc = jaxcache("audit", "--format", "json", "--policy", str(pol), str(cache), env=env)
        return proc.returncode, json.loads(proc.stdout)["origins"]

    if not through_mapping:  # the control: an ordinary rewrite moves ctime, and is caught
        assert audit()[1]["yours"] == 1
        theirs.write_bytes(b"compiled g " * 400)
        code, origins = audit()
        # the line was written for another directory (/mine): bytes it does not hold here are
        # of unknown origin (origin.py's _same_dir), refused under CI all the same
        assert code == 1 and (origins["yours"], origins["unknown"]) == (0, 1), origins
        return
    fd = os.open(theirs, os.O_RDWR)
    try:
        m = mmap.mmap(fd, len(body))
        m[0:1] = m[0:1]
        assert audit() == (0, {**audit()[1], "yours": 1})  # true: your very bytes
        m[0:len(body)] = b"compiled g " * 400
        m.close()
    finally:
        os.close(fd)
    code, origins = audit()
    assert (code, origins["yours"]) != (0, 1), "poisoned bytes passed the CI origin check"


# ---- class 1: a block-level restore keeps the birth time -------------------------------------
def _attach(image: Path, point: Path) -> str:
    dev = subprocess.run(["losetup", "-f", "--show", str(image)], capture_output=True,
                         text=True, check=True).stdout.strip()
    try:
        subprocess.run(["mount", dev, str(point)], check=True, capture_output=True)
    except subprocess.CalledProcessError:
        subprocess.run(["losetup", "-d", dev], capture_output=True)
        raise
    return dev


def _detach(dev: str, point: Path) -> None:
    subprocess.run(["umount", str(point)], capture_output=True)
    subprocess.run(["losetup", "-d", dev], capture_output=True)


@needs_root
def test_a_ledger_restored_in_a_disk_image_vouches_for_nothing(tmp_path):
    """A block-level restore (a disk image or volume snapshot restored as the CI cache: sticky
    disks, persistent-disk snapshots) keeps each inode's number and birth time, and the device
    number is the first free loop device: the ledger's binding holds. Under CI a line vouches
    only if written in this boot, whose id (drawn at random at boot) no image made beforehand
    can hold."""
    import json
    import secrets

    from support.jobs import jaxcache

    if shutil.which("mkfs.ext4") is None or shutil.which("losetup") is None:
        pytest.skip("no mkfs.ext4 or losetup")
    image = tmp_path / "volume.img"
    with open(image, "wb") as f:
        f.truncate(32 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, capture_output=True)
    point = mkdir(tmp_path / "runner", 0o700)
    poison = b"compiled g, stored under f's key"
    # the attacker's machine: the volume filled as the attacker likes, the ledger bound to
    # the file as the attacker's own jaxcache would make it
    try:
        dev = _attach(image, point)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"cannot attach a loop device here: {exc.stderr}")
    try:
        home = mkdir(point / "home", 0o700)
        state = home / "state" / "jaxcache"
        state.mkdir(parents=True, mode=0o700)
        (home / "state").chmod(0o700)
        cache = mkdir(home / "cache", 0o700)
        (cache / ENTRY).write_bytes(poison)
        (cache / ENTRY).chmod(0o600)
        bound_ledger(state / "origin.ledger", ledger_file.line(ledger_file.Written(
            ENTRY, hashlib.sha256(poison).hexdigest(), len(poison), (1, 2, 3, 4), 1.0,
            "/elsewhere", secrets.token_hex(16))))  # written in the attacker's own boot
        made_on = os.stat(state / "origin.ledger").st_dev
    finally:
        _detach(dev, point)
    # the runner: the volume restored (a byte copy), attached, its home used under CI
    restored = tmp_path / "restored.img"
    shutil.copyfile(image, restored)
    image.unlink()
    dev = _attach(restored, point)
    try:
        led = point / "home" / "state" / "jaxcache" / "origin.ledger"
        if os.stat(led).st_dev != made_on:
            pytest.skip("another loop device number this time (the premise did not hold)")
        env = {**os.environ, "XDG_STATE_HOME": str(point / "home" / "state"),
               "GITHUB_ACTIONS": "true", "NO_COLOR": "1"}
        proc = jaxcache("audit", "--format", "json", "--no-processes",
                        str(point / "home" / "cache"), env=env)
        doc = json.loads(proc.stdout)
    finally:
        _detach(dev, point)
    assert doc["origins"]["yours"] == 0, (doc["verdict"], doc["origins"])
    assert proc.returncode == 1 and doc["verdict"] == "UNSAFE", doc["verdict"]


@needs_root
@needs_setfacl
def test_a_ledger_whose_folder_an_acl_lets_another_write_vouches_for_nothing(tmp_path,
                                                                           accounts):
    state = mkdir(tmp_path / "s", 0o700)
    led = state / "origin.ledger"
    bound_ledger(led, ledger_file.line(_written()))
    assert ledger_mod.load(str(led)).problem is None  # the check can fail
    subprocess.run(["setfacl", "-m", f"u:{accounts.c}:rwx", str(state)], check=True)
    got = ledger_mod.load(str(led))
    assert got.problem and not got.by_name


@needs_root
@needs_setfacl
def test_a_ledger_file_an_acl_lets_another_write_vouches_for_nothing(tmp_path, accounts):
    state = mkdir(tmp_path / "s", 0o700)
    led = state / "origin.ledger"
    bound_ledger(led, ledger_file.line(_written()))
    subprocess.run(["setfacl", "-m", f"u:{accounts.c}:rw", str(led)], check=True)
    got = ledger_mod.load(str(led))
    assert got.problem and not got.by_name


# ---- class 5: a job's own hostile function name through run, explain and ls -------------------
def test_a_hostile_function_name_through_run_explain_and_ls(tmp_path):
    import sys

    from support.jobs import clean_env, jaxcache

    pytest.importorskip("jax")
    job = tmp_path / "job.py"
    job.write_text(
        "import jax, jax.numpy as jnp\n"
        "def f(x):\n    return x * 2 + 1\n"
        "f.__name__ = f.__qualname__ = 'evil\\x1b]0;pwned\\x07\\u202e\\nname'\n"
        "print(jax.jit(f)(jnp.arange(3.0)))\n")
    cache = mkdir(tmp_path / "cache", 0o700)
    rec = tmp_path / "rec.json"
    env = clean_env(XDG_STATE_HOME=str(tmp_path / "state"), NO_COLOR="1",
                    JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                    JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
    runs = [("run", "--cache-dir", str(cache), "--record", str(rec), "--", sys.executable,
             str(job))]
    runs += [("explain", str(rec)),
             ("explain", "--format", "json", str(rec)), ("ls", str(cache)),
             ("records", "list")]
    for args in runs:
        proc = jaxcache(*args, env=env)
        assert proc.returncode in (0, 1), (args, proc.stderr[-2000:])
        ours = proc.stderr if args[0] == "run" else proc.stdout + proc.stderr
        if args[0] == "run":  # the job's own stdout is the job's; jaxcache's lines are ours
            ours += "\n".join(line for line in proc.stdout.splitlines()
                              if not line.startswith("["))
        assert not _raw_controls(ours), (args, ours[-2000:])


# ---- class 6: every file type at a lock's name, planted by another account --------------------
@needs_root
@pytest.mark.parametrize("kind", ["dir", "fifo", "socket", "symlink", "file", "dangling"])
def test_every_planted_lock_type_stops_no_writer_and_is_surveyed(kind, base, accounts):
    """Whatever another account plants at a lock's name in the tier, the writer's own lock
    (in its state folder) is taken all the same, nothing planted is opened or replaced, and
    verify's survey reports it."""
    from support.users import user_runtime

    from jaxcache.seal.publishing import locks

    shared = mkdir(base / "shared", 0o1777)
    lock = shared / locks.name(os.geteuid())
    as_c = ["setpriv", f"--reuid={accounts.c}", f"--regid={accounts.c}", "--init-groups"]
    make = {"dir": ["mkdir", str(lock)], "fifo": ["mkfifo", str(lock)],
            "socket": [user_runtime().python, "-c", "import socket,sys; "
                       "socket.socket(socket.AF_UNIX).bind(sys.argv[1])", str(lock)],
            "symlink": ["ln", "-s", str(shared / "x"), str(lock)],
            "file": ["sh", "-c", ': > "$1"', "-", str(lock)],
            "dangling": ["ln", "-s", "/nonexistent/lock", str(lock)]}[kind]
    subprocess.run([*as_c, *make], check=True, cwd="/")
    before = os.lstat(lock)
    fd = os.open(shared, os.O_RDONLY | os.O_DIRECTORY)
    try:
        held = locks.hold(fd)
        try:
            assert os.fstat(held).st_ino != before.st_ino
            assert os.path.samestat(os.fstat(held), os.stat(locks.path_of(fd)))
        finally:
            os.close(held)
        assert [p.name for p in locks.survey(fd)] == [lock.name]
    finally:
        os.close(fd)
    after = os.lstat(lock)  # nothing of ours was made in its place
    assert (after.st_ino, after.st_uid, after.st_mode) == (before.st_ino, before.st_uid,
                                                            before.st_mode)


# ---- class 4 (and the sealed reader): XLA's sub-caches named in a flags file -----------------
@pytest.mark.parametrize("form", ["inline", "file"])
def test_xla_subcache_flags_are_refused_however_xla_flags_gives_them(form, tmp_path):
    """XLA reads XLA_FLAGS as flags when it starts with '-', else as the name of a file of
    flags (XLA's parse_flags_from_env): the premise is shown with --xla_dump_to. The guard
    that keeps XLA's unsigned sub-caches off (jaxcompat/backend.py disable_xla_subcaches,
    under the origin gate and for every sealed job) must see them either way."""
    import sys

    pytest.importorskip("jax")
    flags = f"--xla_gpu_per_fusion_autotune_cache_dir={tmp_path / 'cache' / 'xla'}"
    dump = tmp_path / "dump"
    if form == "file":
        (tmp_path / "xla.flags").write_text(f"--xla_dump_to={dump}\n{flags}\n")
        value = str(tmp_path / "xla.flags")
    else:
        value = f"--xla_dump_to={dump} {flags}"
    code = ("import jax, jax.numpy as jnp\n"
            "from jaxcache.jaxcompat import backend\n"
            "try:\n    backend.disable_xla_subcaches()\n    print('ACCEPTED')\n"
            "except Exception as exc:\n    print('REFUSED', type(exc).__name__)\n"
            "jax.jit(lambda x: x + 1)(jnp.ones(2)).block_until_ready()\n")
    from support.jobs import clean_env

    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=clean_env(XLA_FLAGS=value), timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert dump.is_dir() and any(dump.iterdir()), "XLA did not take the flags (premise)"
    assert "REFUSED" in proc.stdout, proc.stdout


@needs_root
def test_one_publisher_reaches_two_signatures_with_the_cli_in_a_rotation(base, accounts,
                                                                         tmp_path):
    from support.jobs import jaxcache

    keys = {}
    for name in ("old", "new", "bob"):
        proc = jaxcache("keygen", "--name", f"ci-{name}", str(tmp_path / f"{name}.key"))
        assert proc.returncode == 0, proc.stderr
        keys[name] = (tmp_path / f"{name}.key.pub").read_text().strip()
    shared = mkdir(base / "shared", 0o700)
    poison = b"code only the publisher approved"
    (shared / ENTRY).write_bytes(poison)
    own = mkdir(base / "own", 0o700)
    (own / ENTRY).write_bytes(poison)  # "my own build": whatever the holder puts there
    pol = tmp_path / "policy.toml"
    pol.write_text(
        f'[[cache]]\npath = "{shared}"\ntrusted_signers = ["{accounts.c}"]\n'
        f'trusted_keys = [{{ holder = "root", key = "{keys["old"]}" }}, '
        f'{{ holder = "root", key = "{keys["new"]}" }}, '
        f'{{ holder = "{accounts.c}", key = "{keys["bob"]}" }}]\nsignatures_needed = 2\n')
    pol.chmod(0o600)
    env = {**os.environ, "NO_COLOR": "1"}
    first = jaxcache("seal", str(shared), "--signing-key", str(tmp_path / "old.key"),
                     "--policy", str(pol), "--allow-unhittable", env=env)
    assert first.returncode in (0, 1), first.stderr
    co = jaxcache("seal", str(shared), "--signing-key", str(tmp_path / "new.key"),
                  "--add-signature", "--from", str(own), "--policy", str(pol), env=env)
    assert co.returncode in (0, 1), co.stderr
    assert len([p for p in shared.iterdir() if p.name.endswith(".sig")]) == 2, co.stdout
    verify = jaxcache("verify", str(shared), "--policy", str(pol), env=env)
    assert verify.returncode == 1, verify.stdout  # one holder's word: not enough
