"""The audit's writers section grows with principals, not files (issue 28, point 4): each
principal once, one line per kind of power with its files counted by kind (a signature or a
last-use mark is not compiled code), and -v for every file. Real users own the files."""

from __future__ import annotations

import os

from support.jobs import audit_json, jaxcache
from support.users import mkdir, needs_root

pytestmark = needs_root

KEY = "ab" * 32
ENTRIES, ATIMES = 6, 2


def _filled(base, owner: str):
    """A private directory of root's in which `owner` owns every file: compiled entries,
    their signatures and access-time files."""
    cache = mkdir(base / "cache", 0o700)
    for i in range(ENTRIES):
        for name in (f"jit_f{i}-{KEY}-cache", f"jit_f{i}-{KEY}-cache.sig"):
            (cache / name).write_bytes(b"x")
            os.chown(cache / name, _uid(owner), -1)
    for i in range(ATIMES):
        (cache / f"jit_f{i}-{KEY}-atime").write_bytes(b"1")
        os.chown(cache / f"jit_f{i}-{KEY}-atime", _uid(owner), -1)
    return cache


def _uid(user: str) -> int:
    import pwd

    return pwd.getpwnam(user).pw_uid


def _section(text: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index("who can change what JAX loads:")
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("  "))
    return lines[start + 1:end]


def test_one_line_per_principal_and_power_counted_by_kind(base, accounts):
    cache = _filled(base, accounts.a)
    proc = jaxcache("audit", "--no-processes", str(cache))
    assert proc.returncode == 1, proc.stderr
    section = _section(proc.stdout)
    assert section[0] == f"  {accounts.a} [untrusted]"
    assert len(section) == 4, section  # the principal, its reason, its count; trusted: root
    assert section[2] == (f"      -> can change {ENTRIES} compiled entries, {ENTRIES} "
                          f"signatures, {ATIMES} access-time files (-v lists each)")
    assert "(likewise the other" in section[1]
    assert section[3].startswith("  trusted: root")


def test_verbose_lists_every_file_with_what_it_changes(base, accounts):
    cache = _filled(base, accounts.a)
    proc = jaxcache("audit", "-v", "--no-processes", str(cache))
    changes = [line.strip() for line in _section(proc.stdout) if "-> can change" in line]
    files = ENTRIES * 2 + ATIMES
    assert len(changes) == files
    assert sum("the compiled code in" in c for c in changes) == ENTRIES
    assert all(c.endswith("-cache") for c in changes if "the compiled code in" in c)
    assert sum(c.startswith("-> can change the signature") for c in changes) == ENTRIES
    assert sum("when JAX last used the entry" in c for c in changes) == ATIMES


def test_json_keeps_every_writer_and_says_what_each_file_is(base, accounts):
    cache = _filled(base, accounts.a)
    _, doc = audit_json(cache, "--no-processes")
    mine = [w for w in doc["writers"] if w["principal"] == accounts.a]
    assert len(mine) == ENTRIES * 2 + ATIMES
    for w in mine:
        code = w["target"].endswith("-cache")
        assert ("compiled code" in w["chain"][1]) == code, w
