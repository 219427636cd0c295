"""The kill campaign (issue 42): writers killed before each of their steps, and what every
reader must find afterwards. Used by tests/faults/ (a fixed, seeded sample inside `make test`)
and scripts/soak.py (every step, many rounds: `make soak`).

Each kind is a writer (a light process driving jaxcache's own code, killed by
support/killpoints.py) with the invariants the state it leaves must keep:
- sealed publish into a directory (SealedCache.put of real entries, signed): a file under an
  entry's final name is whole, its signature is there, and a reader loads exactly the bytes
  published; anything else is a miss. `verify` names every leftover and never fails inside.
  The next publisher completes, and then every entry loads;
- the origin ledger's witness (witness.append): every line acknowledged before the kill is
  in the ledger and parses; a torn last line is skipped and counted, never a crash; the next
  append works;
- gc of a sealed directory: an entry never stays without its signature, whatever stays loads
  exactly; the next gc completes.
A counter per kind adds up what the soak table shows: trials, kills, wrong loads, lost lines,
internal errors.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from support import killpoints
from support.jobs import jaxcache

PUBLISH = r"""
import json, sys
from jaxcache.seal import keys
from jaxcache.seal.store import SealedCache
shared, keyfile, entries = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3]))
signer = keys.load_signing(keyfile)
cache = SealedCache(shared, trusted=[signer.public], signer=signer)
for key, hexdata in entries:
    cache.put(key, bytes.fromhex(hexdata))
    print("published", key, flush=True)
"""

WITNESS = r"""
import os, sys, time
from jaxcache.lifecycle import witness
from jaxcache.trust import ledger_file
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
from jaxcache.gc import collect
r = collect.collect(sys.argv[1], max_size=int(sys.argv[2]))
print(len(r.evicted), flush=True)
"""


@dataclass
class Tally:
    """What one kind of fault did, for the soak table."""

    kind: str
    trials: int = 0
    kills: int = 0
    wrong_loads: int = 0
    lost_lines: int = 0
    hangs: int = 0
    internal_errors: int = 0
    failures: list[str] = field(default_factory=list)

    def fail(self, what: str) -> None:
        self.failures.append(what)

    def ran(self, t: killpoints.Trial, who: str) -> None:
        """Count one trial of the writer: killed, hung, or ended (cleanly, or not)."""
        self.trials += 1
        if t.killed:
            self.kills += 1
        elif t.hung:
            self.hangs += 1
            self.fail(f"{who} hung")
        elif t.returncode != 0 or _internal(t.stderr):
            self.internal_errors += 1
            self.fail(f"{who} rc {t.returncode}: {t.stderr[-500:]}")


@dataclass
class World:
    """What every trial starts from: real entries of a real JAX job and a signing key."""

    root: Path
    key: Path
    pub: str
    entries: list[tuple[str, bytes]]  # (cache key, the entry's bytes), as JAX wrote them
    sealed: Path  # a sealed directory holding all of them (gc's starting point)


def world(root: Path, job: Callable[..., dict]) -> World:
    """Real entries: the sealed job (tests/programs/sealed_job.py) run once with the key."""
    keydir = root / "keys"
    proc = jaxcache("keygen", str(keydir / "ci.key"))
    assert proc.returncode == 0, proc.stderr
    pub = (keydir / "ci.key.pub").read_text().strip()
    sealed = root / "sealed"
    sealed.mkdir(mode=0o700)
    job(sealed, pub, "--key", str(keydir / "ci.key"))
    entries = sorted((p.name[:-len("-cache")], p.read_bytes()) for p in sealed.iterdir()
                     if p.name.endswith("-cache"))
    assert entries, "the job wrote no entry"
    return World(root, keydir / "ci.key", pub, entries, sealed)


def fresh_state(path: Path) -> dict[str, str]:
    """The environment of a writer with a state folder of its own, new: every trial of a
    kind then takes the same steps (a memo written by one is not found by the next)."""
    return {**os.environ, "XDG_STATE_HOME": str(path)}


def _internal(text: str) -> bool:
    return "Traceback" in text or "internal error" in text.lower()


def _reader_check(w: World, cache: Path, tally: Tally, *, all_whole: bool = False) -> None:
    """Every entry present is whole, signed and loads exactly; absent ones are misses."""
    from jaxcache.seal.store import SealedCache
    from jaxcache.trust.keys import load_public

    reader = SealedCache(str(cache), trusted=[load_public(w.pub)])
    try:
        for key, data in w.entries:
            path = cache / f"{key}-cache"
            got = reader.get(key)
            if got is not None and got != data:
                tally.wrong_loads += 1
                tally.fail(f"{key}: loaded bytes that are not the entry's")
            if path.exists():
                if path.read_bytes() != data:
                    tally.wrong_loads += 1
                    tally.fail(f"{path.name}: a partial or other file under the final name")
                if not (cache / f"{key}-cache.sig").exists():
                    tally.fail(f"{path.name}: an entry without its signature")
                elif got != data:
                    tally.fail(f"{path.name}: whole and signed, yet not loaded")
            elif all_whole:
                tally.fail(f"{path.name}: missing after a complete run")
    finally:
        reader.close()


def _verify(w: World, cache: Path, tally: Tally) -> None:
    """`verify` judges the state without failing inside and names every leftover."""
    proc = jaxcache("verify", str(cache), "--trusted-key", w.pub, "--format", "json")
    if _internal(proc.stderr) or proc.returncode not in (0, 1):
        tally.internal_errors += 1
        tally.fail(f"verify: rc {proc.returncode}: {proc.stderr[-500:]}")
        return
    doc = json.loads(proc.stdout)
    named = json.dumps(doc)
    for p in cache.iterdir():
        if p.name.startswith(".jaxcache-") and p.name.endswith(".tmp") and p.name not in named:
            tally.fail(f"verify does not name the leftover {p.name}")


def publish_trial(w: World, work: Path, kill_at: int, tally: Tally) -> None:
    """A sealed publisher killed before step `kill_at`, then checked; then the next one."""
    cache = work / f"pub-{kill_at}"
    cache.mkdir(mode=0o700)
    listing = work / "entries.json"
    if not listing.exists():
        listing.write_text(json.dumps([(k, d.hex()) for k, d in w.entries]))
    env = fresh_state(work / f"pub-state-{kill_at}")
    t = killpoints.run(PUBLISH, kill_at, work, str(cache), str(w.key), str(listing), env=env)
    tally.ran(t, "the publisher")
    _reader_check(w, cache, tally)
    _verify(w, cache, tally)
    again = killpoints.run(PUBLISH, 0, work, str(cache), str(w.key), str(listing), env=env)
    if again.returncode != 0:
        tally.internal_errors += 1
        tally.fail(f"the next publisher: rc {again.returncode}: {again.stderr[-500:]}")
    _reader_check(w, cache, tally, all_whole=True)
    shutil.rmtree(cache)
    shutil.rmtree(env["XDG_STATE_HOME"], ignore_errors=True)


def witness_trial(work: Path, kill_at: int, lines: int, tally: Tally) -> None:
    """The ledger's witness killed before step `kill_at`: every acknowledged line stays."""
    from jaxcache.trust import ledger_file

    ledger = work / f"ledger-{kill_at}" / "origin.ledger"
    t = killpoints.run(WITNESS, kill_at, work, str(ledger), str(lines))
    tally.ran(t, "the witness")
    acked = t.acknowledged
    try:
        data = ledger.read_bytes() if ledger.exists() else b""
        parsed = ledger_file.parse(data, str(ledger))
    except Exception as exc:  # a crash reading what a killed writer left is the bug sought
        tally.internal_errors += 1
        tally.fail(f"reading the ledger: {exc!r}")
        return
    lost = [n for n in acked if n not in parsed.by_name]
    tally.lost_lines += len(lost)
    if lost:
        tally.fail(f"acknowledged lines lost: {lost[:3]}")
    again = killpoints.run(WITNESS, 0, work, str(ledger), "1")
    if again.returncode != 0 or not again.acknowledged:
        tally.internal_errors += 1
        tally.fail(f"the next append: rc {again.returncode}: {again.stderr[-500:]}")
    shutil.rmtree(ledger.parent)


def gc_trial(w: World, work: Path, kill_at: int, tally: Tally) -> None:
    """gc of a sealed directory killed before step `kill_at`: whole units or nothing."""
    cache = work / f"gc-{kill_at}"
    shutil.copytree(w.sealed, cache)
    cache.chmod(0o700)
    env = fresh_state(work / f"gc-state-{kill_at}")
    t = killpoints.run(COLLECT, kill_at, work, str(cache), "0", env=env)
    tally.ran(t, "gc")
    _reader_check(w, cache, tally)
    _verify(w, cache, tally)
    again = killpoints.run(COLLECT, 0, work, str(cache), "0", env=env)
    if again.returncode != 0:
        tally.internal_errors += 1
        tally.fail(f"the next gc: rc {again.returncode}: {again.stderr[-500:]}")
    left = [p.name for p in cache.iterdir() if p.name.endswith("-cache")]
    if left:
        tally.fail(f"entries left after a complete gc to size 0: {left}")
    shutil.rmtree(cache)
    shutil.rmtree(env["XDG_STATE_HOME"], ignore_errors=True)


def points(steps: int, sample: int | None, seed: int) -> list[int]:
    """Kill points: before every step (sample None), or a seeded sample that always holds
    the first and last steps."""
    every = list(range(1, steps + 1))
    if sample is None or sample >= steps:
        return every
    rng = random.Random(seed)
    return sorted({1, steps, *rng.sample(every, sample - 2)})


def real_job_reads(job: Callable[..., dict], cache: Path, pub: str,
                   golden: dict) -> list[str]:
    """A real JAX job, a sealed reader of what the faults left: its numbers unchanged."""
    out = job(cache, pub)
    problems = []
    if out["results"] != golden:
        problems.append(f"the job's results changed: {out['results']} != {golden}")
    if any(_internal(x) for x in out["warnings"]):
        problems.append(f"internal error in the job: {out['warnings']}")
    return problems

