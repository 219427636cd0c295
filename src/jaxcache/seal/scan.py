"""`jaxcache verify DIR` and `jaxcache seal DIR`: every entry of a directory, one status each.

Both read entries exactly as the sealed backend does (directory fd, O_NOFOLLOW, one read),
so what verify calls valid is what a sealed reader would load.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from jaxcache.seal import hittable, names, signature
from jaxcache.seal.keys import PublicKey, SigningKey
from jaxcache.seal.publish import _link_new
from jaxcache.seal.store import _open_dir, _read, _Rejected
from jaxcache.trust.entries import classify


@dataclass(frozen=True)
class EntryStatus:
    name: str
    status: str  # valid | unsigned | bad-signature | unknown-key | not-a-file | signed-now
    #              | never-hit (seal: not signed, a sealed reader would never load it)
    reason: str
    size: int
    never_hit: str | None = None  # why a sealed reader never hits it (seal/hittable.py)


@dataclass(frozen=True)
class ScanResult:
    directory: str
    entries: tuple[EntryStatus, ...]
    leftovers: tuple[str, ...]  # temporary files of interrupted writers, orphan signatures
    refuse_unhittable: bool = False  # seal without --allow-unhittable: such entries fail it
    others: tuple[str, ...] = ()  # names that are no entry, sidecar, lock or leftover (dirs too)

    def count(self, status: str) -> int:
        return sum(1 for e in self.entries if e.status == status)

    @property
    def unhittable(self) -> int:
        """Entries a sealed reader never hits (made with XLA's sub-caches on)."""
        return sum(1 for e in self.entries if e.never_hit)

    @property
    def all_valid(self) -> bool:
        return all(e.status in (signature.VALID, "signed-now") for e in self.entries)

    @property
    def ok(self) -> bool:
        """The exit status's answer: every entry verifies, and (for seal, unless allowed)
        none is one that a sealed reader would never hit."""
        return self.all_valid and not (self.refuse_unhittable and self.unhittable)

    @property
    def strict_ok(self) -> bool:
        """`verify --strict`, a CI gate after a restore: every entry verifies, none is one a
        sealed reader never hits, and nothing else was left there (orphan signatures,
        interrupted writes): whatever came in with the cache was signed by a trusted key."""
        return self.all_valid and not self.unhittable and not self.leftovers and not self.others


def _others(fd: int) -> tuple[str, ...]:
    """What `verify --strict` fails on besides entries: every name that is not an entry, a
    sidecar or JAX's -atime file of one present, a lock or a leftover; every directory
    (XLA's sub-caches included: nothing signs them)."""
    entries, leftovers = _names(fd)
    known = set(entries) | set(leftovers)
    out = []
    for n in sorted(os.listdir(fd)):
        kind = classify(n)[0]
        if n in known or kind == "lockfile":
            continue
        if kind in ("signature", "used", "atime"):
            try:
                if stat.S_ISREG(os.stat(n, dir_fd=fd, follow_symlinks=False).st_mode):
                    continue
            except OSError:
                pass
        out.append(n)
    return tuple(out)


def _names(fd: int) -> tuple[list[str], list[str]]:
    names_ = sorted(os.listdir(fd))
    entries = [n for n in names_ if classify(n)[0] == "cache"]
    present = set(names_)
    leftovers = [n for n in names_ if names.is_temporary(n)]
    for suffix in (names.SIGNATURE, names.USED):  # sidecars whose entry is gone
        leftovers += [n for n in names_ if (e := names.entry_of_sidecar(n, suffix)) is not None
                      and classify(e)[0] == "cache" and e not in present]
    return entries, leftovers


def _status(fd: int, name: str, trusted: dict[bytes, PublicKey], *, read_unsigned: bool = False
            ) -> tuple[EntryStatus, bytes | None]:
    """The entry's status, and the bytes it was judged on (what `seal` signs: no second read).

    The signature is judged first: an entry is read only as far as a trusted key vouched for
    its size, so a planted multi-GB file costs a stat, not the reader's memory. Unsigned
    entries are read whole only with `read_unsigned` (seal, in a directory you trust, signs
    them); a bad or foreign signature's entry is never read."""
    key = names.key_of(name)
    try:
        sig = _read(fd, names.sidecar(name, names.SIGNATURE, names.name_max(fd)),
                    limit=signature.MAX_BYTES + 1)
        vouched, size = signature.vouched_size(key, sig, trusted)
        whole = size is None and read_unsigned and vouched.status == signature.UNSIGNED
        if size is not None:
            limit: int | None = size + 1  # what a trusted key vouched for, and one byte more
        else:
            limit = None if whole else 1  # 1: only to tell a link or special file
        data = _read(fd, name, limit=limit)
        if data is None:
            return EntryStatus(name, "not-a-file", "vanished while scanning", 0), None
    except _Rejected as exc:
        return EntryStatus(name, exc.status, exc.reason, 0), None
    if size is None and not whole:  # judged unread: its size from the file, not its bytes
        try:
            on_disk = os.stat(name, dir_fd=fd, follow_symlinks=False).st_size
        except FileNotFoundError:
            return EntryStatus(name, "not-a-file", "vanished while scanning", 0), None
        return EntryStatus(name, vouched.status, vouched.reason, on_disk), None
    check = signature.check(key, data, sig, trusted)
    return EntryStatus(name, check.status, check.reason, len(data),
                       hittable.why_never_hit(data)), data


def verify(directory: str, trusted: list[PublicKey]) -> ScanResult:
    fd = _open_dir(directory)
    try:
        entries, leftovers = _names(fd)
        table = {k.raw: k for k in trusted}
        return ScanResult(directory, tuple(_status(fd, n, table)[0] for n in entries),
                          tuple(leftovers), others=_others(fd))
    finally:
        os.close(fd)


def seal(directory: str, signer: SigningKey, trusted: list[PublicKey], *,
         allow_unhittable: bool = False) -> ScanResult:
    """Sign every unsigned entry. A bad or foreign signature is reported, never replaced:
    replacing it would delete a file, and sealing launders whatever is there now. An entry a
    sealed reader would never hit is left unsigned (status never-hit) and fails the seal,
    unless `allow_unhittable`: then it is signed and still reported."""
    fd = _open_dir(directory)
    try:
        entries, leftovers = _names(fd)
        table = {k.raw: k for k in [*trusted, signer.public]}
        out = []
        for name in entries:
            st, data = _status(fd, name, table, read_unsigned=True)
            if st.status == signature.UNSIGNED and data is not None:
                if st.never_hit and not allow_unhittable:
                    st = EntryStatus(name, "never-hit", f"not signed: {st.never_hit}",
                                     len(data), st.never_hit)
                else:
                    sig = signature.sign(names.key_of(name), data, signer)
                    if _link_new(fd, names.sidecar(name, names.SIGNATURE, names.name_max(fd)),
                                 sig):
                        st = EntryStatus(name, "signed-now", f"signed by {signer.public.id}",
                                         len(data), st.never_hit)
            out.append(st)
        return ScanResult(directory, tuple(out), tuple(leftovers),
                          refuse_unhittable=not allow_unhittable)
    finally:
        os.close(fd)
