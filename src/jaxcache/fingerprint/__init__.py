"""What a compiled entry depends on that JAX's cache key leaves out: the build and the host.

`current()` is this Python's and this host's fingerprint (model.py: what it holds; binaries.py:
the build's digests, kept in the memo so a warm run pays a few dozen stats; cpu.py: the CPU);
rule.py says whether a writer's entries may load here. Low in the house (beside jaxcompat):
records, the origin ledger, the sealed cache, explain and decide all read it. Standard library
and blake3 only; JAX is never imported here (jaxcompat.accelerator() adds what a job's backend
says of itself).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from jaxcache.fingerprint.model import Accelerator, Build, Cpu, Fingerprint

__all__ = ["Accelerator", "Build", "Cpu", "Fingerprint", "current"]

_cached: dict[str, Fingerprint] = {}
_handed: list[tuple[dict[str, object], Fingerprint]] = []
_MODEL = frozenset({"Accelerator", "Build", "Cpu", "Fingerprint"})


def __getattr__(name: str) -> object:
    """The model's classes, imported when first asked for: a job's witness imports boot.py,
    which is in this package, and must not pay for the model (and validate) on every start."""
    if name in _MODEL:
        from jaxcache.fingerprint import model

        return getattr(model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def current(*, on_hashing: Callable[[int, int, bool], None] | None = None,
            state: str | None = None, fresh: bool = False) -> Fingerprint:
    """This host's and this Python's fingerprint (without the accelerator: that needs JAX).
    Once per process (`fresh`: look again); `on_hashing(bytes, files, for_all)` is called
    before any shared object is hashed, which happens once per install where its owner hashes
    it (for_all: kept beside the install for every user), else once per install and user
    (memo.py)."""
    key = state or ""
    if not fresh and key in _cached:
        return _cached[key]
    from jaxcache.fingerprint import binaries, cpu, memo
    from jaxcache.fingerprint.model import SHORT, Fingerprint

    kept = memo.load(state)
    notes: list[str] = []
    if not kept.usable:
        notes.append(f"digests not kept ({kept.why}): every run hashes what the install's "
                     "own memo does not vouch for")

    def hashing(size: int, files: int, for_all: bool) -> None:
        from jaxcache.text import plural
        from jaxcache.text import size as size_text

        notes.append(f"hashed {plural(files, 'shared object')} ({size_text(size)})")
        if on_hashing is not None:
            on_hashing(size, files, for_all)
    where = binaries.roots(kept)
    found = Fingerprint(binaries.build(where, kept, hashing), cpu.machine(), cpu.read(), None,
                        tuple(notes))
    found = Fingerprint(found.build, found.machine, found.cpu, None, found.notes,
                        kept.digest_of(found.id_text())[:SHORT], tuple(where))
    memo.save(kept)
    _cached[key] = found
    return found


def with_known_id(found: Fingerprint) -> Fingerprint:
    """`found` with the id this process already computed for an equal fingerprint (current():
    the one `jaxcache run` handed its job, read back from the job's probe), so no digest is
    taken again (blake3 costs ~1 ms to import); `found` as it is otherwise."""
    from jaxcache.fingerprint.model import Fingerprint

    for mine in _cached.values():
        if mine == found and mine.known_id:
            return Fingerprint(found.build, found.machine, found.cpu, found.accelerator,
                               found.notes, mine.known_id, found.roots)
    return found


def to_env(found: Fingerprint) -> str:
    """The value of JAXCACHE_FINGERPRINT (jobenv.FINGERPRINT): `jaxcache run` hashes once,
    before the job, and hands the job its fingerprint with the package folders it hashed."""
    import json

    doc = {**found.to_json(), "host": _host()}
    _handed.append((doc, found))
    return json.dumps({**doc, "roots": [list(r) for r in found.roots]}, separators=(",", ":"))


def handed(doc: object) -> Fingerprint | None:
    """The fingerprint this process handed a job (to_env) whose probe gave back exactly `doc`
    (its `given`, roots left out): taken as it is, without parsing it again (~0.4 ms after
    the job, on `jaxcache run`'s critical path); None for anything else."""
    for sent, found in _handed:
        if doc == sent:
            return found
    return None


def _host() -> str:
    """This boot of this host (its name and the kernel's boot id): a job's processes on another
    node (srun, mpirun -x, a Ray worker inheriting the variable) or after a reboot compute
    their own fingerprint instead of taking the launcher's."""
    import os

    from jaxcache.fingerprint.boot import boot_id

    return f"{os.uname().nodename} {boot_id()}"


def inherited(value: str | None) -> Fingerprint | None:
    """The fingerprint `jaxcache run` handed this job (to_env), if it speaks of the jaxlib
    this process loaded, on this boot of this host, with this CPU: a job that runs another
    Python than jaxcache's loads other folders, a rank on another node may run other bytes
    under the same path; then None (the caller computes its own: `in_job`). Only the build's
    digest is taken on trust (hashing it again is what this saves): the CPU is read again."""
    import json
    import os
    import sys

    from jaxcache import validate
    from jaxcache.fingerprint import cpu
    from jaxcache.fingerprint.model import SHORT, Fingerprint, Handed

    if not value or len(value) > 1 << 20:
        return None
    try:
        got = Handed.from_json(json.loads(value))
    except (ValueError, TypeError, AttributeError, RecursionError, validate.Invalid):
        return None
    found, roots = got.fingerprint, got.roots
    if got.host != _host() or found.machine != cpu.machine() or found.cpu != cpu.read():
        return None
    jaxlib = sys.modules.get("jaxlib")
    loaded = [os.path.realpath(p) for p in getattr(jaxlib, "__path__", None) or ()]
    if not loaded or any(("jaxlib", p) not in roots for p in loaded):
        return None
    return Fingerprint(found.build, found.machine, found.cpu, found.accelerator, (),
                       got.given_id[:SHORT] if found.build else "", roots)


def in_job(env: dict[str, str] | None = None) -> Fingerprint:
    """Inside a job (the probe's witness, the sealed reader): what `jaxcache run` handed it
    when it speaks of this process's jaxlib, else this process's own (hashed if need be:
    nothing is printed into the job)."""
    import os

    from jaxcache import jobenv

    got = inherited((env if env is not None else os.environ).get(jobenv.FINGERPRINT))
    return got if got is not None else current()
