"""The kill campaign (issue 42): writers killed before each of their steps, and what every
reader must find afterwards. Used by tests/faults/ (a fixed, seeded sample inside `make test`)
and scripts/soak.py (every step, many rounds: `make soak`).

Each kind (a Kind below) is a writer, a light process driving jaxcache's own code and killed
by support/killpoints.py, with the state it starts from and what that state must keep:
- sealed publish (SealedCache.put of the real entries of a real JAX job, signed) and the
  sealed LRU (the same with a limit of about one entry): a file under an entry's final name is
  whole and signed, a reader loads exactly the bytes published or misses;
- seal and seal --add-signature (the commands) on a directory a job filled: the same, with
  entries still unsigned allowed after a kill of seal, and every entry still loading by the
  first key while a co-signer is killed;
- verify --quarantine of a directory with one changed entry: the changed bytes are never
  loaded and never lost (moved aside, not deleted), the other entries still load;
- the origin ledger's witness: every line acknowledged before the kill is in the ledger and
  parses; a torn last line is skipped, never a crash;
- gc of a sealed directory: an entry never stays without its signature;
- records prune --keep 2 of six real run records: the newest two always stay, every record
  left parses.
After every kill `verify` runs without failing inside and names each temporary file left;
then the next, complete run succeeds and leaves the state whole. A Tally per kind adds up what
the soak table shows: trials, kills, wrong loads, lost lines, hangs, internal errors.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from support import killpoints, paths
from support.jobs import CI_VARIABLES, jaxcache

# A failed put raises OSError, which JAX turns into a warning and goes on (the documented
# contract); a writer that cannot even start on a failing disk (its key or its directory
# unreadable: what enable() raises as a JaxcacheError) says so and exits 1.
PUBLISH = r"""
import json, sys
from jaxcache.trust.inputs import signing_keys as keys
from jaxcache.seal.stores.sealed_cache import SealedCache
from jaxcache.errors import JaxcacheError
shared, keyfile = sys.argv[1], sys.argv[2]
try:
    entries = json.load(open(sys.argv[3]))
    signer = keys.load_signing(keyfile)
    cache = SealedCache(shared, trusted=[signer.public], signer=signer)
except (OSError, JaxcacheError) as exc:
    sys.exit(f"cannot start: {exc}")
for key, hexdata in entries:
    try:
        cache.put(key, bytes.fromhex(hexdata))
    except OSError as exc:
        print(f"not published: {exc}", file=sys.stderr)
        continue
    print("published", key, flush=True)
"""

# the sealed tier's LRU: a publisher whose limit holds about one entry evicts as it publishes
LRU = r"""
import json, sys
from jaxcache.trust.inputs import signing_keys as keys
from jaxcache.seal.stores.sealed_cache import SealedCache
from jaxcache.errors import JaxcacheError
shared, keyfile, limit = sys.argv[1], sys.argv[2], int(sys.argv[4])
try:
    entries = json.load(open(sys.argv[3]))
    signer = keys.load_signing(keyfile)
    cache = SealedCache(shared, trusted=[signer.public], signer=signer,
                        max_size=lambda: limit)
except (OSError, JaxcacheError) as exc:
    sys.exit(f"cannot start: {exc}")
for key, hexdata in entries:
    try:
        cache.put(key, bytes.fromhex(hexdata))
    except OSError as exc:
        print(f"not published: {exc}", file=sys.stderr)
"""

WITNESS = r"""
import os, sys, time
from jaxcache.lifecycle import witness
from jaxcache.trust.provenance import ledger_file
ledger, count = sys.argv[1], int(sys.argv[2])
for i in range(count):
    name = f"jit_f{i}-{i:064x}-cache"
    w = ledger_file.Written(name, f"{i:064x}", 100 + i, (1, 1000 + i, 10**18 + i, 10**18 + i),
                            time.time(),
                            "/cache")
    if witness.append(ledger, w):
        print(name, flush=True)
"""

COLLECT = r"""
import sys
from jaxcache.errors import JaxcacheError
from jaxcache.gc import collect
try:
    r = collect.collect(sys.argv[1], max_size=int(sys.argv[2]))
except (OSError, JaxcacheError) as exc:  # as gc at exit and the command take it
    sys.exit(f"gc stopped: {exc}")
print(len(r.evicted), flush=True)
"""

# a jaxcache command, as `jaxcache ARGS...` runs it (seal, seal --add-signature, verify)
COMMAND = r"""
import sys
from jaxcache.cli import main
sys.argv = ["jaxcache", *sys.argv[1:]]
main()
"""


@dataclass
class Tally:
    """What one kind of fault did, for the soak table."""

    kind: str
    fault: str = "kill"  # killpoints.run's fault: kill, EIO, ENOSPC
    trials: int = 0
    faults: int = 0  # trials in which the fault was injected
    wrong_loads: int = 0
    lost_lines: int = 0
    hangs: int = 0
    internal_errors: int = 0
    failures: list[str] = field(default_factory=list)

    def fail(self, what: str) -> None:
        self.failures.append(what)

    def ran(self, t: killpoints.Trial, who: str, ok: tuple[int, ...] = (0,)) -> None:
        """Count one trial of the writer: killed, hung, or ended (cleanly, or not). A writer
        whose disk failed may end with an error, in one clear line (no traceback)."""
        self.trials += 1
        if t.faulted:
            self.faults += 1
        if t.killed:
            pass
        elif t.hung:
            self.hangs += 1
            self.fail(f"{who} hung")
        elif t.returncode not in ok or _internal(t.stderr):
            self.internal_errors += 1
            self.fail(f"{who} rc {t.returncode}: {t.stderr[-500:]}")


@dataclass
class World:
    """What every trial starts from: real entries of a real JAX job and two signing keys."""

    root: Path
    key: Path
    pub: str
    entries: list[tuple[str, bytes]]  # (cache key, the entry's bytes), as JAX wrote them
    sealed: Path  # a sealed directory holding all of them
    key2: Path  # a second key (a co-signer)
    pub2: str
    record: bytes  # a real run record's bytes

    @property
    def listing(self) -> Path:
        """The entries as a publisher's argument (JSON of key and hex)."""
        path = self.root / "entries.json"
        if not path.exists():
            path.write_text(json.dumps([(k, d.hex()) for k, d in self.entries]))
        return path


def world(root: Path) -> World:
    """Real entries: the sealed job (tests/programs/sealed_job.py) run once with the key."""
    keydir = root / "keys"
    for name in ("ci.key", "ci2.key"):
        proc = jaxcache("keygen", str(keydir / name))
        assert proc.returncode == 0, proc.stderr
    pub = (keydir / "ci.key.pub").read_text().strip()
    sealed = root / "sealed"
    sealed.mkdir(mode=0o700)
    sealed_job(sealed, pub, "--key", str(keydir / "ci.key"))
    entries = sorted((p.name[:-len("-cache")], p.read_bytes()) for p in sealed.iterdir()
                     if p.name.endswith("-cache"))
    assert entries, "the job wrote no entry"
    record = root / "record.json"  # a real run record (of a job that is not JAX: quick)
    proc = jaxcache("run", "-q", "--record", str(record), "--", sys.executable, "-c", "pass",
                    env=fresh_state(root / "record-state"))
    assert proc.returncode == 0, proc.stderr
    return World(root, keydir / "ci.key", pub, entries, sealed, keydir / "ci2.key",
                 (keydir / "ci2.key.pub").read_text().strip(), record.read_bytes())


def sealed_job(cache: Path, pub: str, *extra: str) -> dict:
    """tests/programs/sealed_job.py on `cache` (a real JAX job on the CPU): its JSON line."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    proc = subprocess.run([sys.executable, str(paths.PROGRAMS / "sealed_job.py"), str(cache),
                           pub, *extra], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fresh_state(path: Path) -> dict[str, str]:
    """The environment of a writer with a state folder of its own, new: every trial of a
    kind then takes the same steps (a memo written by one is not found by the next). Outside
    CI as far as jaxcache can tell (the soak may run under one)."""
    env = {k: v for k, v in os.environ.items() if k not in CI_VARIABLES}
    return {**env, "XDG_STATE_HOME": str(path)}


def _internal(text: str) -> bool:
    return "Traceback" in text or "internal error" in text.lower()


def _loads(w: World, cache: Path, tally: Tally, *, pub: str | None = None,
           must_load: bool = False, unsigned_ok: bool = False,
           tampered: frozenset[str] = frozenset()) -> None:
    """What a sealed reader trusting `pub` (default: the first key) finds: never bytes other
    than the entry's; a file under an entry's final name is whole (a `tampered` key's file
    aside) and signed (unless `unsigned_ok`: not sealed yet); a whole, signed entry loads;
    with `must_load` every entry but the tampered loads (after a complete run)."""
    from jaxcache.seal.stores.sealed_cache import SealedCache
    from jaxcache.trust.inputs.public_keys import load_public

    reader = SealedCache(str(cache), trusted=[load_public(pub or w.pub)])
    try:
        for key, data in w.entries:
            path = cache / f"{key}-cache"
            with warnings.catch_warnings():  # a rejection warns: expected here, checked below
                warnings.simplefilter("ignore")
                got = reader.get(key)
            if got is not None and got != data:
                tally.wrong_loads += 1
                tally.fail(f"{key}: loaded bytes that are not the entry's")
            if key in tampered:
                continue
            if path.exists():
                if path.read_bytes() != data:
                    tally.wrong_loads += 1
                    tally.fail(f"{path.name}: a partial or other file under the final name")
                if not (cache / f"{key}-cache.sig").exists():
                    if not unsigned_ok:
                        tally.fail(f"{path.name}: an entry without its signature")
                elif got != data and pub is None:
                    tally.fail(f"{path.name}: whole and signed, yet not loaded")
            if must_load and got != data:
                tally.fail(f"{path.name}: not loaded after a complete run")
    finally:
        reader.close()


def _verify(w: World, cache: Path, tally: Tally) -> None:
    """`verify` judges the state without failing inside and names every leftover."""
    proc = jaxcache("verify", str(cache), "--trusted-key", w.pub, "--format", "json")
    if _internal(proc.stderr) or proc.returncode not in (0, 1):
        tally.internal_errors += 1
        tally.fail(f"verify: rc {proc.returncode}: {proc.stderr[-500:]}")
        return
    named = json.dumps(json.loads(proc.stdout))
    for p in cache.iterdir():
        if p.name.startswith(".jaxcache-") and p.name.endswith(".tmp") and p.name not in named:
            tally.fail(f"verify does not name the leftover {p.name}")


class Kind:
    """One writer of the campaign: the state it starts from, its arguments, and what must
    hold after it was killed (`after_kill`) and after the next, complete run (`after_run`)."""

    name = ""
    writer = ""
    ok_codes: tuple[int, ...] = (0,)
    failed_codes: tuple[int, ...] = (1, 2)  # also allowed when its disk failed (one line)
    cache = True  # leaves a cache a real JAX job can read (d / "cache")

    def start(self, w: World, d: Path) -> None:
        d.mkdir(mode=0o700)

    def args(self, w: World, d: Path) -> list[str]:
        raise NotImplementedError

    def after_kill(self, w: World, d: Path, t: killpoints.Trial, tally: Tally) -> None:
        _loads(w, d / "cache", tally)
        _verify(w, d / "cache", tally)

    def after_run(self, w: World, d: Path, tally: Tally) -> None:
        _loads(w, d / "cache", tally, must_load=True)


class Publish(Kind):
    name, writer = "sealed publish", PUBLISH

    def start(self, w: World, d: Path) -> None:
        (d / "cache").mkdir(mode=0o700, parents=True)

    def args(self, w: World, d: Path) -> list[str]:
        return [str(d / "cache"), str(w.key), str(w.listing)]


class Lru(Publish):
    name, writer = "the sealed LRU", LRU

    def args(self, w: World, d: Path) -> list[str]:
        room = max(len(data) for _, data in w.entries) * 3 // 2  # about one entry
        return [*super().args(w, d), str(room)]

    def after_run(self, w: World, d: Path, tally: Tally) -> None:
        _loads(w, d / "cache", tally)  # the limit let only some stay: whole, signed, loaded
        if not any(p.name.endswith("-cache") for p in (d / "cache").iterdir()):
            tally.fail("the LRU kept no entry at all")


class Seal(Kind):
    name, writer = "seal", COMMAND

    def start(self, w: World, d: Path) -> None:
        (d / "cache").mkdir(mode=0o700, parents=True)
        for p in w.sealed.iterdir():  # the entries only: a directory CI just filled
            if p.name.endswith("-cache"):
                shutil.copy2(p, d / "cache" / p.name)

    def args(self, w: World, d: Path) -> list[str]:
        return ["seal", str(d / "cache"), "--signing-key", str(w.key)]

    def after_kill(self, w: World, d: Path, t: killpoints.Trial, tally: Tally) -> None:
        _loads(w, d / "cache", tally, unsigned_ok=True)
        _verify(w, d / "cache", tally)


class Cosign(Kind):
    name, writer = "seal --add-signature", COMMAND

    def start(self, w: World, d: Path) -> None:
        shutil.copytree(w.sealed, d / "cache")

    def args(self, w: World, d: Path) -> list[str]:
        return ["seal", str(d / "cache"), "--signing-key", str(w.key2), "--add-signature",
                "--trusted-key", w.pub, "--trusted-key", w.pub2]

    def after_kill(self, w: World, d: Path, t: killpoints.Trial, tally: Tally) -> None:
        _loads(w, d / "cache", tally, must_load=True)  # the first signer's: nothing lost
        _loads(w, d / "cache", tally, pub=w.pub2)  # the co-signer's: whole or a miss
        _verify(w, d / "cache", tally)

    def after_run(self, w: World, d: Path, tally: Tally) -> None:
        _loads(w, d / "cache", tally, must_load=True)
        _loads(w, d / "cache", tally, pub=w.pub2, must_load=True)


class Quarantine(Kind):
    """verify --quarantine of a sealed directory in which one entry was changed."""

    name, writer, ok_codes = "verify --quarantine", COMMAND, (0, 1)

    def start(self, w: World, d: Path) -> None:
        shutil.copytree(w.sealed, d / "cache")
        (d / "aside").mkdir(mode=0o700)
        bad = d / "cache" / f"{w.entries[0][0]}-cache"
        data = bytearray(bad.read_bytes())
        data[len(data) // 2] ^= 0xFF  # same size: only the digest tells
        bad.write_bytes(bytes(data))
        (d / "tampered").write_bytes(bytes(data))

    def args(self, w: World, d: Path) -> list[str]:
        return ["verify", str(d / "cache"), "--trusted-key", w.pub, "--quarantine",
                str(d / "aside")]

    def _kept(self, d: Path, tally: Tally) -> None:
        """The changed entry is moved, never deleted: its bytes are somewhere."""
        bad = (d / "tampered").read_bytes()
        if not any(p.is_file() and p.stat().st_size == len(bad) and p.read_bytes() == bad
                   for p in [*(d / "cache").iterdir(), *(d / "aside").rglob("*")]):
            tally.lost_lines += 1
            tally.fail("the quarantined entry is gone: moved aside means kept")

    def after_kill(self, w: World, d: Path, t: killpoints.Trial, tally: Tally) -> None:
        bad = frozenset({w.entries[0][0]})
        _loads(w, d / "cache", tally, tampered=bad)
        self._kept(d, tally)
        _verify(w, d / "cache", tally)

    def after_run(self, w: World, d: Path, tally: Tally) -> None:
        bad = frozenset({w.entries[0][0]})
        _loads(w, d / "cache", tally, tampered=bad, must_load=True)
        self._kept(d, tally)
        if (d / "cache" / f"{w.entries[0][0]}-cache").exists() and \
                (d / "cache" / f"{w.entries[0][0]}-cache").read_bytes() == \
                (d / "tampered").read_bytes():
            tally.fail("the changed entry is still in the cache after a complete run")


class Collect(Kind):
    name, writer = "gc of a sealed directory", COLLECT

    def start(self, w: World, d: Path) -> None:
        shutil.copytree(w.sealed, d / "cache")

    def args(self, w: World, d: Path) -> list[str]:
        return [str(d / "cache"), "0"]

    def after_run(self, w: World, d: Path, tally: Tally) -> None:
        _loads(w, d / "cache", tally)
        left = [p.name for p in (d / "cache").iterdir() if p.name.endswith("-cache")]
        if left:
            tally.fail(f"entries left after a complete gc to size 0: {left}")


class Prune(Kind):
    """records prune --keep 2 of a folder of six run records."""

    name, writer, cache = "records prune", COMMAND, False
    RECORDS, KEEP = 6, 2

    def start(self, w: World, d: Path) -> None:
        runs = d / "runs"
        runs.mkdir(mode=0o700, parents=True)
        d.chmod(0o700)
        for i in range(self.RECORDS):  # names as `jaxcache run` gives them, a second apart
            (runs / f"20261201T0000{i:02d}.000000000Z-{100 + i}.json").write_bytes(w.record)

    def args(self, w: World, d: Path) -> list[str]:
        return ["records", "prune", "--dir", str(d / "runs"), "--keep", str(self.KEEP)]

    def _records(self, d: Path, tally: Tally) -> list[str]:
        names = sorted(p.name for p in (d / "runs").iterdir())
        for n in names:
            try:
                json.loads((d / "runs" / n).read_bytes())
            except ValueError:
                tally.lost_lines += 1
                tally.fail(f"a record that no longer parses: {n}")
        return names

    def after_kill(self, w: World, d: Path, t: killpoints.Trial, tally: Tally) -> None:
        names = self._records(d, tally)
        newest = [f"20261201T0000{i:02d}.000000000Z-{100 + i}.json"
                  for i in range(self.RECORDS - self.KEEP, self.RECORDS)]
        if any(n not in names for n in newest):
            tally.lost_lines += 1
            tally.fail(f"a record prune was to keep is gone: {names}")

    def after_run(self, w: World, d: Path, tally: Tally) -> None:
        if len(self._records(d, tally)) != self.KEEP:
            tally.fail("the next prune did not leave the newest two")


class Witness(Kind):
    name, writer, cache = "the ledger's witness", WITNESS, False
    failed_codes = ()  # append answers False when it cannot write: it never raises
    LINES = 4

    def start(self, w: World, d: Path) -> None:
        d.mkdir(mode=0o700)

    def args(self, w: World, d: Path) -> list[str]:
        return [str(d / "state" / "origin.ledger"), str(self.LINES)]

    def after_kill(self, w: World, d: Path, t: killpoints.Trial, tally: Tally) -> None:
        from jaxcache.trust.provenance import ledger_file

        ledger = d / "state" / "origin.ledger"
        try:
            parsed = ledger_file.parse(ledger.read_bytes() if ledger.exists() else b"",
                                       str(ledger))
        except Exception as exc:  # a crash reading what a killed writer left is sought
            tally.internal_errors += 1
            tally.fail(f"reading the ledger: {exc!r}")
            return
        lost = [n for n in t.acknowledged if n not in parsed.by_name]
        tally.lost_lines += len(lost)
        if lost:
            tally.fail(f"acknowledged lines lost: {lost[:3]}")

    def after_run(self, w: World, d: Path, tally: Tally) -> None:
        pass  # trial() checks that the complete run acknowledged every line


class Record(Kind):
    """`jaxcache run` of a job that is not JAX (quick), killed at any step: its audit, its
    claim of the record (an empty placeholder), the record's write and rename."""

    name, writer, cache = "jaxcache run (its record)", COMMAND, False
    EARLIER = ("20261201T000000.000000000Z-100.json", "20261201T000001.000000000Z-101.json")

    def _runs(self, d: Path) -> Path:
        return d / "writer-state" / "jaxcache" / "runs"  # trial()'s state folder

    def start(self, w: World, d: Path) -> None:
        d.mkdir(mode=0o700)
        runs = self._runs(d)
        runs.mkdir(mode=0o700, parents=True)
        for name in self.EARLIER:  # records written before: never lost, always parsed
            (runs / name).write_bytes(w.record)

    def args(self, w: World, d: Path) -> list[str]:
        return ["run", "-q", "--cache-dir", str(d / "c"), "--", sys.executable, "-c", "pass"]

    def after_kill(self, w: World, d: Path, t: killpoints.Trial, tally: Tally) -> None:
        runs = self._runs(d)
        for name in self.EARLIER:
            try:
                json.loads((runs / name).read_bytes())
            except (OSError, ValueError):
                tally.lost_lines += 1
                tally.fail(f"a record written before the kill is lost or torn: {name}")
        proc = jaxcache("records", "list", "--dir", str(runs), "--format", "json")
        if proc.returncode != 0 or _internal(proc.stderr):
            tally.internal_errors += 1
            tally.fail(f"records list: rc {proc.returncode}: {proc.stderr[-400:]}")
            return
        doc = json.loads(proc.stdout)
        seen = {r["name"] for r in doc["records"]} | {
            s["name"] for s in doc.get("skipped", [])}
        for p in runs.iterdir():
            if p.name.endswith(".json") and not p.name.startswith(".") and p.name not in seen:
                tally.fail(f"records list neither lists nor names {p.name}")

    def after_run(self, w: World, d: Path, tally: Tally) -> None:
        fresh = [p for p in self._runs(d).iterdir() if p.name.endswith(".json") and
                 p.name not in self.EARLIER and p.stat().st_size]
        if not fresh:
            tally.fail("the next run wrote no record")


KINDS: dict[str, Kind] = {k.__name__.lower(): k() for k in
                          (Publish, Witness, Collect, Lru, Seal, Cosign, Quarantine, Prune,
                           Record)}


def steps(kind: Kind, w: World, work: Path) -> int:
    """How many steps a clean run of `kind` takes (a probe trial)."""
    d = work / f"probe-{type(kind).__name__}"
    kind.start(w, d)
    try:
        return killpoints.count(kind.writer, work, *kind.args(w, d),
                                env=fresh_state(d / "probe-state"), codes=kind.ok_codes)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def trial(kind: Kind, w: World, work: Path, kill_at: int | str, tally: Tally) -> Path:
    """`kind`'s writer killed (or its disk failing: tally.fault) before step `kill_at`, the
    state checked, then the next, complete run and its state checked. The trial's folder
    (removed by the caller)."""
    d = work / f"{type(kind).__name__}-{tally.fault}-{str(kill_at).replace(':', '-')}"
    kind.start(w, d)
    env = fresh_state(d / "writer-state")
    t = killpoints.run(kind.writer, kill_at, work, *kind.args(w, d), env=env, fault=tally.fault)
    ok = kind.ok_codes if tally.fault == "kill" else (*kind.ok_codes, *kind.failed_codes)
    tally.ran(t, kind.name, ok)
    if tally.fault != "kill" and t.returncode not in kind.ok_codes and not t.hung:
        said = [x for x in (t.stderr or t.stdout).splitlines() if x.strip()]  # or a verdict
        if not said or len(said[-1]) < 12:
            tally.fail(f"{kind.name} failed without saying why: {t.stderr[-300:]!r}")
    if not t.hung:
        kind.after_kill(w, d, t, tally)
    again = killpoints.run(kind.writer, 0, work, *kind.args(w, d), env=env)
    if again.returncode not in kind.ok_codes or _internal(again.stderr):
        tally.internal_errors += 1
        tally.fail(f"the next run of {kind.name}: rc {again.returncode}: "
                   f"{again.stderr[-500:]}")
    elif isinstance(kind, Witness) and len(again.acknowledged) != Witness.LINES:
        tally.fail(f"the next append acknowledged {len(again.acknowledged)} of "
                   f"{Witness.LINES} lines")
    kind.after_run(w, d, tally)
    return d


def points(steps: int, sample: int | None, seed: int, *, last: bool = True) -> list[int]:
    """Kill points: before every step (sample None), or a seeded sample that always holds
    the first step and (with `last`) the last."""
    every = list(range(1, steps + 1))
    if sample is None or sample >= steps:
        return every
    rng = random.Random(seed)
    ends = {1, steps} if last else {1}
    return sorted({*ends, *rng.sample(every[1:-1], sample - len(ends))})


def real_job_reads(cache: Path, pub: str, golden: dict) -> list[str]:
    """A real JAX job, a sealed reader of what the faults left: its numbers unchanged."""
    out = sealed_job(cache, pub)
    problems = []
    if out["results"] != golden:
        problems.append(f"the job's results changed: {out['results']} != {golden}")
    if any(_internal(x) for x in out["warnings"]):
        problems.append(f"internal error in the job: {out['warnings']}")
    return problems

