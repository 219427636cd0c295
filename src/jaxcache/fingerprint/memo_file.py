"""The digest memo's file (memo.py keeps it) parsed once into typed values, and written back:
each shared object's digest by its identity, the texts digested, and what was found of each
package folder (a Listing) and of sys.path (FoundRoots). Anything malformed is dropped (it is
found or hashed again), never trusted.

Plain classes with slots, not @frozen: every warm `jaxcache run` reads the memo, and each
frozen class costs start-up (model.py says why it writes its values out too).
"""

from __future__ import annotations

import json

FORMAT = "jaxcache.fingerprint-memo/1"
FOUND_KEY = "sys.path:"  # the roots' key of FoundRoots; every other root is a folder's Listing

Identity = tuple[int, int, int, int, int]  # dev, ino, size, mtime_ns, ctime_ns

_HEX = frozenset("0123456789abcdef")


def _digest(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and _HEX.issuperset(value)


class Listing:
    """A package folder's shared objects (relative paths, sorted), the mtime of each folder
    under it ("" the folder itself, always there) and the version of its distribution."""

    __slots__ = ("dirs", "files", "version")

    def __init__(self, dirs: tuple[tuple[str, int], ...], files: tuple[str, ...],
                 version: str) -> None:
        self.dirs, self.files, self.version = dirs, files, version

    @classmethod
    def from_json(cls, doc: object) -> Listing | None:
        if not isinstance(doc, dict):
            return None
        dirs, files, version = doc.get("dirs"), doc.get("files"), doc.get("version")
        if not isinstance(dirs, dict) or "" not in dirs or not isinstance(files, list) or \
                not all(isinstance(f, str) for f in files):
            return None
        if not all(isinstance(m, int) and not isinstance(m, bool) for m in dirs.values()):
            return None
        return cls(tuple(dirs.items()), tuple(files), str(version) if version else "")

    def to_json(self) -> dict[str, object]:
        return {"dirs": dict(self.dirs), "files": list(self.files), "version": self.version}


class FoundRoots:
    """(package, folder) of the packages importlib would load, under the mtime of each
    sys.path entry (-1: missing) when they were found."""

    __slots__ = ("stamp", "roots")

    def __init__(self, stamp: tuple[int, ...], roots: tuple[tuple[str, str], ...]) -> None:
        self.stamp, self.roots = stamp, roots

    @classmethod
    def from_json(cls, doc: object) -> FoundRoots | None:
        if not isinstance(doc, dict):
            return None
        stamp, roots = doc.get("stamp"), doc.get("roots")
        if not isinstance(stamp, list) or not isinstance(roots, list) or not all(
                isinstance(r, list) and len(r) == 2 and all(isinstance(x, str) for x in r)
                for r in roots):
            return None
        if not all(isinstance(s, int) and not isinstance(s, bool) for s in stamp):
            return None
        return cls(tuple(stamp), tuple((n, f) for n, f in roots))

    def to_json(self) -> dict[str, object]:
        return {"stamp": list(self.stamp), "roots": [list(r) for r in self.roots]}


class MemoFile:
    """The whole file: digests by path and identity, what was found per root, the texts
    digested (text -> its BLAKE3 digest)."""

    __slots__ = ("files", "roots", "derived")

    def __init__(self, files: dict[str, tuple[Identity, str]],
                 roots: dict[str, Listing | FoundRoots], derived: dict[str, str]) -> None:
        self.files, self.roots, self.derived = files, roots, derived

    @classmethod
    def parse(cls, data: bytes) -> MemoFile | None:
        """The file's bytes, or None where they are not a memo of this FORMAT."""
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError):
            return None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            return None
        files, roots, derived = doc.get("files"), doc.get("roots"), doc.get("derived")
        digests = {k: d for k, d in derived.items() if _digest(d)} \
            if isinstance(derived, dict) else {}
        known: dict[str, tuple[Identity, str]] = {}
        for path, value in (files.items() if isinstance(files, dict) else ()):
            if (isinstance(value, list) and len(value) == 6
                    and all(isinstance(x, int) and not isinstance(x, bool) for x in value[:5])
                    and _digest(value[5])):
                known[path] = ((value[0], value[1], value[2], value[3], value[4]), value[5])
        found: dict[str, Listing | FoundRoots] = {}
        for key, kept in (roots.items() if isinstance(roots, dict) else ()):
            got = FoundRoots.from_json(kept) if key.startswith(FOUND_KEY) \
                else Listing.from_json(kept)
            if got is not None:
                found[key] = got
        return cls(known, found, digests)

    def to_json(self) -> dict[str, object]:
        return {"format": FORMAT, "roots": {k: r.to_json() for k, r in self.roots.items()},
                "derived": self.derived,
                "files": {p: [*ident, digest] for p, (ident, digest) in self.files.items()}}
