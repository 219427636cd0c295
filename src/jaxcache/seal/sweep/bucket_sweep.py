"""`jaxcache verify gs://...`, `seal gs://...` and `ls gs://...` (or s3://): every entry under
a prefix.

Entries are read as the bucket tier reads them (bucket_backend.py): the signature, then the entry,
one download each, checked over exactly the bytes downloaded. Statuses are dir_sweep.py's, so
`verify` means the same for a bucket and a directory.
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxcache.errors import JaxcacheError
from jaxcache.fingerprint.model import Fingerprint
from jaxcache.seal.objects.object_store import OBJECT_NAME_MAX
from jaxcache.seal.objects.store_for_url import ObjectInfo, ObjectStore, StoreError
from jaxcache.seal.publishing import tier_names as names
from jaxcache.seal.signing import build_claims as builds
from jaxcache.seal.signing import (
    hittable,
)
from jaxcache.seal.signing import signature_file as sigfile
from jaxcache.seal.signing import signature_rule as signature
from jaxcache.seal.stores.backend_reports import trusting
from jaxcache.seal.stores.prefetch import cosignatures
from jaxcache.seal.sweep import dir_sweep as scan
from jaxcache.seal.sweep.dir_sweep import EntryStatus, ScanResult
from jaxcache.text import safe
from jaxcache.trust.inputs.public_keys import PublicKey
from jaxcache.trust.kernel.entries import classify
from jaxcache.trust.rules import keyring
from jaxcache.trust.rules.keyring import KeyRing

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


@dataclass(frozen=True, slots=True)
class BucketListing:
    url: str
    objects: tuple[ObjectInfo, ...]  # entries and signatures, by name
    signed: frozenset[str]  # entries with a signature object beside them (not checked here)


def _sig(name: str) -> str:
    return names.sidecar(name, names.SIGNATURE, OBJECT_NAME_MAX)


def listing(store: ObjectStore) -> BucketListing:
    try:
        objs = sorted(store.list(), key=lambda o: o.name)
    except StoreError as exc:
        raise JaxcacheError(f"cannot list {store.url}: {exc.message}") from None
    present = {o.name for o in objs}
    signed = frozenset(o.name for o in objs if _sig(o.name) in present)
    return BucketListing(store.url, tuple(objs), signed)


def entries(found: BucketListing) -> list[ObjectInfo]:
    return [o for o in found.objects if classify(o.name)[0] == "cache"]


def unsigned(found: BucketListing) -> list[str]:
    return [o.name for o in entries(found) if o.name not in found.signed]


def _entries(found: BucketListing) -> tuple[list[str], list[str]]:
    present = {o.name for o in found.objects}
    entries = [o.name for o in found.objects if classify(o.name)[0] == "cache"]
    orphans = [n for n in present if (e := names.entry_of_sidecar(n, names.SIGNATURE))
               is not None and classify(e)[0] == "cache" and e not in present]
    orphans += [n for n in present if (c := names.entry_of_cosignature(n)) is not None
                and classify(c[0])[0] == "cache" and c[0] not in present]
    return entries, sorted(orphans)


def _status(store: ObjectStore, name: str, table: KeyRing, *,
            read_unsigned: bool = False, here: Fingerprint | None = None
            ) -> tuple[EntryStatus, bytes | None]:
    """As scan._status: the signature first; the entry downloaded only as far as a trusted
    key vouched for its size (or whole when unsigned and `read_unsigned`: seal signs it)."""
    try:
        sig = store.get(_sig(name), limit=sigfile.MAX_BYTES + 1)
        found = signature.vouch(names.key_of(name), sig, table, cosignatures(store, name))
        vouched, size = found.check, found.size
        whole = size is None and read_unsigned and vouched.status == signature.UNSIGNED
        if size is None and not whole:  # judged without downloading a byte of it
            info = store.stat(name)
            if info is None:
                return EntryStatus(name, "not-a-file", "vanished while scanning", 0), None
            return EntryStatus(name, vouched.status, vouched.reason, info.size,
                               identities=vouched.identities), None
        data = store.get(name, limit=None if whole or size is None else size + 1)
        if data is None:
            return EntryStatus(name, "not-a-file", "vanished while scanning", 0), None
    except StoreError as exc:
        raise JaxcacheError(f"cannot read {store.url}/{name}: {exc.message}") from None
    check = signature.check(names.key_of(name), data, sig, table) if whole else \
        signature.confirm(names.key_of(name), data, found, table)
    return EntryStatus(name, check.status, check.reason, len(data),
                       hittable.why_never_hit(data), check.signers, check.lineage,
                       builds.built(found, check, here), check.identities), data


def verify(store: ObjectStore, trusted: KeyRing | list[PublicKey],
           here: Fingerprint | None = None) -> ScanResult:
    entries, leftovers = _entries(listing(store))
    table = keyring.of(trusted)
    here = here or builds.host()
    return ScanResult(store.url, tuple(_status(store, n, table, here=here)[0]
                                       for n in entries),
                      tuple(leftovers), keys=table.states(), needed=table.needed)


def seal(store: ObjectStore, signer: scan.Signer, trusted: KeyRing | list[PublicKey], *,
         allow_unhittable: bool = False, build: Fingerprint | None = None) -> ScanResult:
    """Sign every unsigned entry (create-only: a signature that appeared meanwhile stays),
    claiming `build` compiled it; one a sealed reader would never hit only with
    `allow_unhittable` (as scan.seal)."""
    entries, leftovers = _entries(listing(store))
    table = trusting(keyring.of(trusted), signer)  # keyless: signer.identify() first
    out = []
    for name in entries:
        st, data = _status(store, name, table, read_unsigned=True)
        if st.status == signature.UNSIGNED and data is not None and st.never_hit and \
                not allow_unhittable:
            st = EntryStatus(name, "never-hit", f"not signed: {st.never_hit}", len(data),
                             st.never_hit)
        elif st.status == signature.UNSIGNED and data is not None:
            sig = sigfile.sign(names.key_of(name), data, signer, build=build)
            try:
                if store.put_if_absent(_sig(name), sig):
                    st = EntryStatus(name, "signed-now",
                                     f"signed by {scan.label_of(table, signer)}", len(data),
                                     st.never_hit)
            except StoreError as exc:
                raise JaxcacheError(f"cannot sign {store.url}/{name}: {exc.message}") from None
        out.append(st)
    return ScanResult(store.url, tuple(out), tuple(leftovers),
                      refuse_unhittable=not allow_unhittable, keys=table.states(),
                      needed=table.needed, signer=scan.label_of(table, signer))


def cosign(store: ObjectStore, signer: scan.Signer, trusted: KeyRing | list[PublicKey],
           own: scan.Own | None = None, succeeds: str | None = None) -> ScanResult:
    """`seal gs://... --add-signature`: as scan.cosign, each co-signature object created only
    if absent."""
    full = keyring.of(trusted)
    ring = scan.cosigning_ring(full, signer)
    entries, leftovers = _entries(listing(store))

    def add(name: str, sig: bytes, stale: Callable[[bytes | None], bool]) -> str | None:
        where = names.cosignature(name, scan.counted_as(ring, signer).id, OBJECT_NAME_MAX)
        if where is None:
            return "no room for a co-signature name"
        try:
            if store.put_if_absent(where, sig):
                return None
            info = store.stat(where)  # the generation first, then the bytes judged
            existing = None if info is None else store.get(where,
                                                           limit=sigfile.MAX_BYTES + 1)
            if info is None:
                return None if store.put_if_absent(where, sig) else \
                    "a co-signature object appeared meanwhile"
            if not stale(existing) or not store.replace_if(where, sig, info.generation):
                return "a valid co-signature object appeared meanwhile"
            return None
        except StoreError as exc:  # this entry stays one signature short; the others go on
            return f"cannot write {safe(where)}: {safe(exc.message)}"
    def shared(name: str, limit: int) -> bytes | None:
        try:
            return store.get(name, limit=limit)
        except StoreError as exc:
            raise JaxcacheError(f"cannot read {store.url}/{name}: {exc.message}") from None
    return ScanResult(store.url, tuple(
        scan.cosign_entry(name, signer, ring, lambda n, r: _status(store, n, r), add, own,
                          shared, succeeds)
        for name in entries), tuple(leftovers), keys=full.states(), needed=full.needed,
        signer=scan.label_of(ring, signer))
