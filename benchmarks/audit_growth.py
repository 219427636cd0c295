"""Does `jaxcache run` cost more on a big cache than on an empty one, once it was audited?

Builds, in a private temporary folder, an empty private cache and one of --entries entries
(64-byte files named as JAX names them, 0644 in a 0700 directory), and times
`jaxcache run -q --cache-dir D -- python noop.py` on both, interleaved round by round (the order
alternating) so machine drift hits both alike, after two warm-up runs of each (the first
audits every entry and remembers the judgement in the state folder, trust/inputs/audit_memo.py).
Reports the median of each arm and the paired Hodges-Lehmann estimate of full - empty with its
exact 95 % interval (jaxcache.bench.estimates). Target: full - empty <= +50 ms.

--origin says who wrote the big cache's entries, as the audit finds them:
  yours    each entry has its line in the origin ledger, as the witness writes one when a job
           jaxcache watches makes JAX write it (sha256 and the file's identity): a cache that
           `jaxcache run` jobs filled. The acceptance case.
  unknown  no ledger lines (a restored or copied cache): the audit still skips every entry, but
           each is of unknown origin, and the run record names every one of them (its
           `origin.not_yours`), which costs what writing 100,000 names costs.

Both arms run with the same state folder and an empty policy file in XDG_CONFIG_HOME (so that
an older tree, whose `run` could start a small cache's job before its audit, is measured
auditing first too, as every run does now). After the rounds it says whether the big cache's
memo was rewritten meanwhile (it should not be: an unchanged directory's judgement stands as
remembered).

    .venv/bin/python benchmarks/audit_growth.py [--entries 100000] [--rounds 21]
        [--origin yours|unknown] [--json F]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from probe_overhead import timed  # beside this script: one process's wall, or exit saying why

from jaxcache.bench.estimates import paired_shift

_SCRIPT = Path(sys.executable).with_name("jaxcache")
JAXCACHE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "jaxcache"]
TARGET_MS = 50.0


def build(path: str, entries: int) -> list[tuple[str, bytes, os.stat_result]]:
    """A private cache of `entries` 64-byte entries: (name, bytes, status) of each."""
    os.mkdir(path, 0o700)
    made = []
    for i in range(entries):
        name = f"jit_fn_{i % 97}-{secrets.token_hex(32)}-cache"
        data = secrets.token_bytes(64)
        fd = os.open(os.path.join(path, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, data)
            made.append((name, data, os.fstat(fd)))
        finally:
            os.close(fd)
    return made


def ledger_for(path: str, made: list[tuple[str, bytes, os.stat_result]]) -> None:
    """The origin ledger a watched job leaves: one line per entry it made JAX write (the
    bytes' sha256 and the file's identity right after), by this build."""
    from jaxcache import fingerprint
    from jaxcache.fingerprint.boot import boot_id
    from jaxcache.trust.provenance import birth, ledger_file, ledger_place

    mine = fingerprint.current()
    ledger = ledger_place.ledger_path()
    os.makedirs(os.path.dirname(ledger), mode=0o700, exist_ok=True)
    fd = os.open(ledger, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        st = os.fstat(f.fileno())
        f.write(ledger_file.header(st.st_dev, st.st_ino, birth.of_fd(f.fileno())))
        f.write(ledger_file.fingerprint_line(mine))
        boot, now = boot_id(), time.time()
        for name, data, s in made:
            f.write(ledger_file.line(ledger_file.Written(
                name, hashlib.sha256(data).hexdigest(), len(data),
                (s.st_dev, s.st_ino, s.st_mtime_ns, s.st_ctime_ns), now, path, boot, mine.id)))


def memo_state(state: str) -> dict[str, int]:
    """Each memo file's mtime (ns), by name: what a rewrite would change."""
    folder = Path(state, "jaxcache", "audited")
    return {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} if folder.is_dir() else {}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--origin", choices=("yours", "unknown"), default="yours")
    ap.add_argument("--json", help="write the samples and figures here")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="jaxcache-growth-")
    try:
        state, config = os.path.join(work, "state"), os.path.join(work, "config")
        os.makedirs(os.path.join(state, "jaxcache"), mode=0o700)
        os.makedirs(os.path.join(config, "jaxcache"), mode=0o700)
        Path(config, "jaxcache", "policy.toml").write_text("")
        os.chmod(os.path.join(config, "jaxcache", "policy.toml"), 0o600)
        os.environ["XDG_STATE_HOME"] = state  # ledger_place.ledger_path() here
        empty, full = os.path.join(work, "empty"), os.path.join(work, "full")
        build(empty, 0)
        started = time.perf_counter()
        made = build(full, args.entries)
        if args.origin == "yours":
            ledger_for(full, made)
        built_s = time.perf_counter() - started
        del made
        noop = os.path.join(work, "noop.py")
        Path(noop).write_text("pass\n")
        env = {**os.environ, "XDG_STATE_HOME": state, "XDG_CONFIG_HOME": config}
        env.pop("PYTHONPATH", None)
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
        arms = {name: [*JAXCACHE, "run", "-q", "--cache-dir", d, "--record",
                       os.path.join(work, f"{name}.json"), "--", sys.executable, noop]
                for name, d in (("empty", empty), ("full", full))}
        time.sleep(2.5)  # the directories settle (shortcut.SETTLE_NS) before the first audit
        first = {name: timed(argv, env) for name, argv in arms.items()}
        for argv in arms.values():  # warm: the OS file cache, the .pyc files, the memos
            timed(argv, env)
        memos = memo_state(state)
        wall: dict[str, list[float]] = {k: [] for k in arms}
        names = list(arms)
        for i in range(args.rounds):
            for name in (names if i % 2 == 0 else names[::-1]):
                wall[name].append(timed(arms[name], env))
        rewritten = sum(1 for k, v in memo_state(state).items() if memos.get(k) != v)
        med = {k: statistics.median(v) * 1e3 for k, v in wall.items()}
        diff = paired_shift([f - e for f, e in zip(wall["full"], wall["empty"], strict=True)])
        extra = diff.estimate * 1e3
        print(f"entries: {args.entries} ({args.origin}); rounds: {args.rounds}; "
              f"cpus: {os.cpu_count()}; python {sys.version.split()[0]}; "
              f"built in {built_s:.1f} s")
        print(f"  first run (every entry judged): empty {first['empty'] * 1e3:.0f} ms, "
              f"full {first['full'] * 1e3:.0f} ms")
        for k in arms:
            print(f"  {k:5s} wall {med[k]:7.1f} ms [{min(wall[k]) * 1e3:.1f} - "
                  f"{max(wall[k]) * 1e3:.1f}]")
        print(f"  full - empty: median {med['full'] - med['empty']:+.1f} ms; paired "
              f"{extra:+.1f} ms [{diff.low * 1e3:+.1f}, {diff.high * 1e3:+.1f}] "
              f"({diff.confidence:.0%})")
        print(f"  memos rewritten during the rounds: {rewritten}")
        ok = diff.high * 1e3 <= TARGET_MS
        print(f"target: full - empty <= +{TARGET_MS:g} ms (the interval's upper end): "
              f"{'met' if ok else 'MISSED'}")
        if args.json:
            Path(args.json).write_text(json.dumps(
                {"entries": args.entries, "origin": args.origin, "rounds": args.rounds,
                 "first_s": first, "wall_s": wall,
                 "paired_ms": [extra, diff.low * 1e3, diff.high * 1e3],
                 "memos_rewritten": rewritten, "ok": ok}, indent=1))
        sys.exit(0 if ok else 1)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
