"""Counting signatures is monotone (issue 39, class 2): removing or damaging any signature
file, or retiring, expiring or revoking any key, can only lower an entry's count, and one key
holder's word, however many co-signers repeated it and however many keys it holds, never
counts twice.

The report: under `signatures_needed = 2`, B and C had co-signed key A's entry on A's word.
With A's signature there they counted once with it; with A's `.sig` corrupted (or A retired)
they counted as two, and a sealed reader loaded what only A's holder had signed.

A real fixture on disk: three Ed25519 keys, three entries with a first signature by A and
co-signatures (A's holder's own second file, B and C on A's word, C on B's, B from its own
build), every combination of each signature file present, removed, forged or garbage, every
combination of each key trusted, retired, expired or revoked, judged by the sealed reader
JAX calls (SealedCache.get) at each threshold the ring allows; once with keys that have no
holder (each its own) and once with A and C held by one publisher (the rotation window trusts
its old key A and its new key C at once).

The second report: signatures_needed counted keys, so that publisher alone reached 2 with A's
signature and C's from its own build (the "rotation" entry).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import warnings

import pytest

pytest.importorskip("cryptography")

FILES = ("first", "A", "B", "C")  # <entry>.sig by A, then each key's co-signature file
PRESENT, REMOVED, FORGED, GARBAGE = "present", "removed", "forged", "garbage"
FILE_STATES = (PRESENT, REMOVED, FORGED, GARBAGE)
# per file: garbage where a co-signature goes is judged as a forged one is (a bad signature
# of no use to anyone); where the first signature goes it differs (it names no key)
SLOT_STATES = (FILE_STATES, *[(PRESENT, REMOVED, FORGED)] * (len(FILES) - 1))
TRUSTED, RETIRED, EXPIRED, REVOKED = "trusted", "retired", "expired", "revoked"
KEY_STATES = (TRUSTED, RETIRED, EXPIRED, REVOKED)
# a key state below another: retiring, expiring or revoking a trusted key; revoking where it
# was retired or expired
KEY_BELOW = {(RETIRED, TRUSTED), (EXPIRED, TRUSTED), (REVOKED, TRUSTED), (REVOKED, RETIRED),
             (REVOKED, EXPIRED)}

# the co-signatures of each entry: signer -> the keys it relies on (None: a first signature)
ENTRIES = {
    # the report's shape: B and C each co-signed on A's word (a rotation under one signature);
    # A's holder also left a second signature, claiming to rely on nobody
    "fan": {"first": ("A", None), "A": ("A", ()), "B": ("B", ("A",)), "C": ("C", ("A",))},
    # a chain of rotations: B on A's word, then C on B's (B's chain included)
    "chain": {"first": ("A", None), "A": ("A", ()), "B": ("B", ("A",)),
              "C": ("C", ("A", "B"))},
    # two approvals: B from its own build, C taking over from A (--succeeds A)
    "honest": {"first": ("A", None), "B": ("B", ()), "C": ("C", ("A",))},
    # A's holder signs again with its new key C, from "its own build", relying on nobody
    "rotation": {"first": ("A", None), "C": ("C", ())},
}
ONE_HOLDER = ("fan", "chain")  # only A's holder ever approved these bytes
# who holds each key: none declared (each key its own holder), or A and C one publisher's
LAYOUTS = {"own": {}, "publisher": {"A": "publisher", "B": "bob", "C": "publisher"}}


def _name(entry: str) -> str:
    return f"jit_{entry}-{list(ENTRIES).index(entry):064x}-cache"


def _forged(sig: bytes) -> bytes:
    """The same document with its signature's bytes changed: it names its key, and fails."""
    import base64

    doc = json.loads(sig)
    raw = bytearray(base64.b64decode(doc["signature"]))
    raw[0] ^= 1
    doc["signature"] = base64.b64encode(bytes(raw)).decode()
    return json.dumps(doc, sort_keys=True).encode()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Every file state of every entry on disk, one directory per combination of states of
    the four signature files: {states: directory}, the keys, the entries' bytes."""
    from jaxcache.seal.publishing import tier_names as names
    from jaxcache.seal.signing import signature_file as sigfile
    from jaxcache.trust.inputs import signing_keys as keymod

    root = tmp_path_factory.mktemp("count")
    keys = {n: keymod.generate(f"ci-{n.lower()}") for n in "ABC"}
    ids = {n: k.public.id for n, k in keys.items()}
    files: dict[str, dict[str, tuple[str, bytes]]] = {}  # entry -> slot -> (name, bytes)
    data = {}
    for entry, sigs in ENTRIES.items():
        name = _name(entry)
        data[entry] = b"entry %s" % entry.encode()
        files[entry] = {}
        for slot, (signer, relies) in sigs.items():
            sig = sigfile.sign(names.key_of(name), data[entry], keys[signer],
                               relies_on=None if relies is None else
                               tuple(ids[r] for r in relies))
            where = names.sidecar(name, names.SIGNATURE) if slot == "first" else \
                names.cosignature(name, ids[slot])
            files[entry][slot] = (where, sig)
    dirs = {}
    for n, states in enumerate(itertools.product(*SLOT_STATES)):
        d = root / f"d{n}"
        d.mkdir(mode=0o700)
        for entry in ENTRIES:
            (d / _name(entry)).write_bytes(data[entry])
            for slot, state in zip(FILES, states, strict=True):
                if slot not in files[entry] or state == REMOVED:
                    continue
                where, sig = files[entry][slot]
                body = {PRESENT: sig, FORGED: _forged(sig), GARBAGE: b"junk"}[state]
                (d / where).write_bytes(body)
        dirs[states] = d
    return {"dirs": dirs, "keys": keys, "data": data}


def _ring(world, states: tuple[str, ...], needed: int, holders: dict[str, str]):
    from jaxcache.trust.rules.keyring import KeyRing

    trusted, revoked, held = {}, set(), set()
    for n, state in zip("ABC", states, strict=True):
        public = dataclasses.replace(world["keys"][n].public, holder=holders.get(n))
        if state in (TRUSTED, EXPIRED):
            held.add(holders.get(n, n))  # a key with no holder is its own
        if state == TRUSTED:
            trusted[public.raw] = public
        elif state == EXPIRED:
            trusted[public.raw] = dataclasses.replace(public, not_after=1.0)  # in 1970
        elif state == REVOKED:
            revoked.add(public.raw)
    if needed > len(held):
        return None  # a policy mistake (keyring.py): no reader runs under it
    return KeyRing(trusted, frozenset(revoked), needed=needed)


def _counts(world, holders: dict[str, str]
            ) -> dict[tuple[str, tuple[str, ...], tuple[str, ...]], int]:
    """(entry, file states, key states) -> the highest signatures_needed under which the
    sealed reader loads the entry (0: under none)."""
    from jaxcache.seal.publishing import tier_names as names
    from jaxcache.seal.stores.sealed_cache import SealedCache

    counts = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # each rejection's SealWarning
        for keys in itertools.product(KEY_STATES, repeat=3):
            for files, d in world["dirs"].items():
                for entry in ENTRIES:
                    key = names.key_of(_name(entry))
                    count = 0
                    while (ring := _ring(world, keys, count + 1, holders)) is not None:
                        cache = SealedCache(str(d), trusted=ring)
                        try:
                            if cache.get(key) != world["data"][entry]:
                                break
                        finally:
                            cache.close()
                        count += 1
                    counts[(entry, files, keys)] = count
    return counts


def _below(order: set[tuple[str, str]], low: tuple[str, ...], high: tuple[str, ...]) -> bool:
    return all(a == b or (a, b) in order for a, b in zip(low, high, strict=True))


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_counting_is_monotone_over_every_subset_of_files_and_keys(world, layout):
    counts = _counts(world, LAYOUTS[layout])
    file_below = {(s, PRESENT) for s in FILE_STATES if s != PRESENT}
    file_states, key_states = list(world["dirs"]), list(itertools.product(KEY_STATES, repeat=3))
    # every ordered pair (low below high) once: which pairs are ordered depends on neither the
    # entry nor the other side's states (judging it inside those loops was half this test's time)
    file_pairs = [(low, high) for low, high in itertools.product(file_states, repeat=2)
                  if low != high and _below(file_below, low, high)]
    key_pairs = [(low, high) for low, high in itertools.product(key_states, repeat=2)
                 if low != high and _below(KEY_BELOW, low, high)]
    raised = []
    for entry in ENTRIES:
        for keys in key_states:
            for low, high in file_pairs:
                if counts[(entry, low, keys)] > counts[(entry, high, keys)]:
                    raised.append((entry, low, high, keys))
        for files in file_states:
            for low, high in key_pairs:
                if counts[(entry, files, low)] > counts[(entry, files, high)]:
                    raised.append((entry, files, low, high))
    assert not raised, f"{len(raised)} losses that raised a count, e.g. {raised[:3]}"
    # one key holder never reaches two: under signatures_needed = 2 no reader loads these
    one_holder = ONE_HOLDER + (("rotation",) if layout == "publisher" else ())
    reached = [k for k, c in counts.items() if k[0] in one_holder and c >= 2]
    assert not reached, f"one key holder counted twice in {len(reached)} cases: {reached[:3]}"
    # and the count is not vacuous: the honest entry's two approvals count as two
    full = (PRESENT,) * len(FILES)
    everyone = (TRUSTED,) * 3
    assert counts[("honest", full, everyone)] == 2
    assert counts[("fan", full, everyone)] == counts[("chain", full, everyone)] == 1
    # A's .sig corrupted or A expired: C took over from A, B approved on its own: still two
    forged_first = (FORGED, PRESENT, PRESENT, PRESENT)
    assert counts[("honest", forged_first, everyone)] == 2
    assert counts[("honest", full, (EXPIRED, TRUSTED, TRUSTED))] == 2
    # A retired (gone from the ring): whose word C relied on is no longer known, so C's
    # counts beside nobody's (it might be B's holder's)
    assert counts[("honest", full, (RETIRED, TRUSTED, TRUSTED))] == 1
    # A and C: two approvals when two holders, one when they are one publisher's two keys
    assert counts[("rotation", full, everyone)] == (2 if layout == "own" else 1)
    # revoking A revokes what C vouched on A's word: B alone is left
    assert counts[("honest", full, (REVOKED, TRUSTED, TRUSTED))] == 1
    assert counts[("honest", (PRESENT, PRESENT, REMOVED, PRESENT), everyone)] == 1
    # the report's case: A's .sig corrupted, or A retired, leaves B and C on A's word: one
    for entry in ONE_HOLDER:
        assert counts[(entry, forged_first, everyone)] == 1
        assert counts[(entry, full, (RETIRED, TRUSTED, TRUSTED))] == 1
        assert counts[(entry, (REMOVED, PRESENT, PRESENT, PRESENT), everyone)] == 0  # unsigned


def test_one_key_counts_once_however_many_files_carry_it(world):
    """A's signature also under B's and C's co-signature names is a bad signature there, and
    A's own second file adds nothing: one key, one count."""
    from jaxcache.seal.publishing import tier_names as names
    from jaxcache.seal.signing import signature_rule as signature
    from jaxcache.trust.rules.keyring import KeyRing

    keys, data = world["keys"], world["data"]["fan"]
    key = names.key_of(_name("fan"))
    d = world["dirs"][(PRESENT,) * len(FILES)]
    first = (d / names.sidecar(_name("fan"), names.SIGNATURE)).read_bytes()
    own = (d / names.cosignature(_name("fan"), keys["A"].public.id)).read_bytes()
    ring = KeyRing({k.public.raw: k.public for k in keys.values()}, needed=2)
    copies = {keys["A"].public.id: own, keys["B"].public.id: first,
              keys["C"].public.id: first}
    found = signature.check(key, data, first, ring, copies.get)
    assert found.status == signature.TOO_FEW and "1 distinct" in found.reason
