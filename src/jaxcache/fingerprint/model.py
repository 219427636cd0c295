"""The fingerprint as data: what a compiled entry depends on that JAX's cache key leaves out.

JAX's key holds jaxlib's *version string*, the platform version, XLA flags, compile options and
the topology's fingerprint, but no digest of the binaries that compile and run the entry (JAX
issue 18750), and on CPU it may carry no target features (JAX 38445: XLA's loader only logs
"could lead to SIGILL" and loads). So two builds of one jaxlib version, or two CPUs, can share
keys and load each other's entries. A `Fingerprint` names what tells them apart:

- `build`: BLAKE3 digests of the shared objects of jaxlib and the installed plugins (libtpu,
  the CUDA/ROCm plugins), each file by its path inside its package, and one digest over all;
- `machine` and `cpu`: the architecture, the CPU's model and its instruction-set features;
- `accelerator`: the platform, its version (driver/CUDA on GPU, the libtpu build on TPU) and
  the device kind and compute capability, known only inside a process that imported JAX.

One document (`to_json`/`from_json`, schema SCHEMA) travels in run records, bench results, the
origin ledger and inside a sealed entry's signature; parsed once at that edge. Whether a
writer's fingerprint may serve a reader is rule.py's.

The classes are frozen value objects written out (_Value) rather than dataclasses: a warm
`jaxcache run` builds them, and defining five frozen dataclasses costs ~4 ms of start-up
(measured: `python -X importtime`), twice the budget of the whole fingerprint (issue 40).
"""

from __future__ import annotations

from jaxcache import validate as v

SCHEMA = "jaxcache.fingerprint/1"
DIGEST = "blake3"  # the algorithm of every digest here (seal/signing/digest.py says why)
SHORT = 16  # hex digits of an id shown to people and used as a namespace


class _Value:
    """A frozen value: set once in __init__ (through _set), compared and hashed by its
    fields (__slots__, minus those listed in _UNCOMPARED)."""

    __slots__ = ()
    _UNCOMPARED: tuple[str, ...] = ()

    def _set(self, **values: object) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def _key(self) -> tuple[object, ...]:
        names: tuple[str, ...] = self.__slots__
        return tuple(getattr(self, n) for n in names if n not in self._UNCOMPARED)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Value) and type(other) is type(self) \
            and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        names: tuple[str, ...] = self.__slots__
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in names)
        return f"{type(self).__name__}({inner})"


class Binary(_Value):
    """One shared object: `package` (jaxlib, libtpu, jax_plugins...) and its path inside it."""

    __slots__ = ("package", "path", "size", "digest")
    package: str
    path: str
    size: int
    digest: str  # hex

    def __init__(self, package: str, path: str, size: int, digest: str) -> None:
        self._set(package=package, path=path, size=size, digest=digest)

    def to_json(self) -> dict[str, object]:
        return {"package": self.package, "path": self.path, "size": self.size,
                "digest": self.digest}


class Build(_Value):
    """The binaries XLA runs in one Python environment: `digest` is over every part, so two
    builds of the same version that differ in one byte differ here."""

    __slots__ = ("digest", "versions", "parts")
    digest: str  # hex, over the sorted (package, path, digest) lines
    versions: tuple[tuple[str, str], ...]  # (package, version): for people only
    parts: tuple[Binary, ...]

    def __init__(self, digest: str, versions: tuple[tuple[str, str], ...] = (),
                 parts: tuple[Binary, ...] = ()) -> None:
        self._set(digest=digest, versions=versions, parts=parts)

    @property
    def short(self) -> str:
        return self.digest[:SHORT]

    def to_json(self) -> dict[str, object]:
        return {"digest": self.digest, "versions": dict(self.versions),
                "parts": [p.to_json() for p in self.parts]}


class Cpu(_Value):
    """The host's CPU as the kernel reports it (/proc/cpuinfo, the first processor)."""

    __slots__ = ("vendor", "model", "features")
    vendor: str
    model: str
    features: frozenset[str]  # instruction-set extensions (cpu.py: which)

    def __init__(self, vendor: str = "", model: str = "",
                 features: frozenset[str] = frozenset()) -> None:
        self._set(vendor=vendor, model=model, features=features)

    def to_json(self) -> dict[str, object]:
        return {"vendor": self.vendor, "model": self.model,
                "features": " ".join(sorted(self.features))}


class Accelerator(_Value):
    """What the backend says of itself, inside a process that imported JAX."""

    __slots__ = ("platform", "platform_version", "device_kind", "compute_capability")
    platform: str
    platform_version: str
    device_kind: str
    compute_capability: str  # GPU: "8.0"; elsewhere ""

    def __init__(self, platform: str = "", platform_version: str = "", device_kind: str = "",
                 compute_capability: str = "") -> None:
        self._set(platform=platform, platform_version=platform_version,
                  device_kind=device_kind, compute_capability=compute_capability)

    def to_json(self) -> dict[str, object]:
        return {"platform": self.platform, "platform_version": self.platform_version,
                "device_kind": self.device_kind,
                "compute_capability": self.compute_capability}


class Fingerprint(_Value):
    """What must match (rule.py says how) for an entry compiled here to be loaded there."""

    __slots__ = ("build", "machine", "cpu", "accelerator", "notes", "known_id", "roots")
    _UNCOMPARED = ("notes", "known_id", "roots")
    build: Build | None  # None: no jaxlib in this Python (the audit runs without JAX)
    machine: str
    cpu: Cpu
    accelerator: Accelerator | None
    notes: tuple[str, ...]  # how it was found (hashing...), not compared
    known_id: str  # the id, where already computed (memo.py), not compared
    roots: tuple[tuple[str, str], ...]  # (package, folder) hashed for the build, not compared

    def __init__(self, build: Build | None, machine: str, cpu: Cpu,
                 accelerator: Accelerator | None = None, notes: tuple[str, ...] = (),
                 known_id: str = "", roots: tuple[tuple[str, str], ...] = ()) -> None:
        self._set(build=build, machine=machine, cpu=cpu, accelerator=accelerator,
                  notes=notes, known_id=known_id, roots=roots)

    @property
    def id(self) -> str:
        """A short digest of the build, the machine and the CPU features (the accelerator's
        facts are known only inside a job, and JAX's key holds the platform version): equal
        ids, an entry written under one loads under the other. The namespace under which a
        mixed fleet shares one cache (`--namespace fingerprint`)."""
        if self.known_id:
            return self.known_id
        import blake3

        return blake3.blake3(self.id_text().encode()).hexdigest()[:SHORT]

    def id_text(self) -> str:
        """What the id digests (memo.py keeps its digest, so a warm run imports no hash)."""
        return "\n".join((SCHEMA, self.build.digest if self.build else "no-build",
                          self.machine, " ".join(sorted(self.cpu.features))))

    def with_accelerator(self, accelerator: Accelerator | None) -> Fingerprint:
        return Fingerprint(self.build, self.machine, self.cpu, accelerator, self.notes,
                           self.known_id, self.roots)

    def to_json(self) -> dict[str, object]:
        return {"schema": SCHEMA, "id": self.id,
                "build": self.build.to_json() if self.build else None,
                "machine": self.machine, "cpu": self.cpu.to_json(),
                "accelerator": self.accelerator.to_json() if self.accelerator else None}

    @classmethod
    def from_json(cls, doc: object, where: str = "fingerprint") -> Fingerprint:
        """The one parse of a fingerprint a writer sent (a record, a ledger line, a signature):
        validate.Invalid when it is not one. Its `id` is recomputed, never taken as written."""
        DOCUMENT(doc, where)
        assert isinstance(doc, dict)
        b = doc["build"]
        build = None
        if isinstance(b, dict):
            parts = tuple(Binary(p["package"], p["path"], p["size"], p["digest"])
                          for p in b.get("parts", []))
            build = Build(b["digest"], tuple(sorted(b.get("versions", {}).items())), parts)
        c, a = doc["cpu"], doc.get("accelerator")
        cpu = Cpu(c["vendor"], c["model"], frozenset(c["features"].split()))
        accel = Accelerator(a["platform"], a["platform_version"], a["device_kind"],
                            a["compute_capability"]) if isinstance(a, dict) else None
        return cls(build, doc["machine"], cpu, accel)


class Handed(_Value):
    """JAXCACHE_FINGERPRINT's document (fingerprint.to_env): the fingerprint `jaxcache run`
    handed a job, with the host it was computed on, its id as written and the package folders
    hashed. Parsed once; whether it may be taken is fingerprint.inherited's."""

    __slots__ = ("fingerprint", "host", "given_id", "roots")
    fingerprint: Fingerprint
    host: str | None
    given_id: str
    roots: tuple[tuple[str, str], ...]

    def __init__(self, fingerprint: Fingerprint, host: str | None, given_id: str,
                 roots: tuple[tuple[str, str], ...]) -> None:
        self._set(fingerprint=fingerprint, host=host, given_id=given_id, roots=roots)

    @classmethod
    def from_json(cls, doc: object) -> Handed:
        """validate.Invalid, TypeError or ValueError where `doc` is not one."""
        found = Fingerprint.from_json(doc)
        assert isinstance(doc, dict)
        roots = tuple((str(n), str(f)) for n, f in doc.get("roots", []))
        host = doc.get("host")
        return cls(found, host if isinstance(host, str) else None, str(doc.get("id", "")),
                   roots)


_HEX = v.both(v.TEXT, lambda value, where: _hex(value, where))


_HEX_DIGITS = frozenset("0123456789abcdef")


def _hex(value: object, where: str) -> None:
    if not (isinstance(value, str) and len(value) == 64 and _HEX_DIGITS.issuperset(value)):
        raise v.Invalid(where, "a 64-digit lower-case hex digest")


_SHORT_TEXT = v.both(v.TEXT, lambda value, where: _bounded(value, where, 256))
_LONG_TEXT = v.both(v.TEXT, lambda value, where: _bounded(value, where, 8192))


def _bounded(value: object, where: str, limit: int) -> None:
    if isinstance(value, str) and len(value) > limit:
        raise v.Invalid(where, f"at most {limit} characters")


DOCUMENT = v.obj(
    {"build": v.nullable(v.obj({"digest": _HEX}, {
        "versions": v.map_of(_SHORT_TEXT),
        "parts": v.list_of(v.obj({"package": _SHORT_TEXT, "path": _LONG_TEXT,
                                  "size": v.INTEGER, "digest": _HEX}))})),
     "machine": _SHORT_TEXT,
     "cpu": v.obj({"vendor": _SHORT_TEXT, "model": _SHORT_TEXT, "features": _LONG_TEXT})},
    {"schema": v.one_of(SCHEMA), "accelerator": v.nullable(v.obj({
        "platform": _SHORT_TEXT, "platform_version": _LONG_TEXT, "device_kind": _SHORT_TEXT,
        "compute_capability": _SHORT_TEXT}))})
