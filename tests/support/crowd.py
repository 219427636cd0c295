"""Many writers and readers at once on one sealed directory or one bucket prefix (issue 42):
8 real processes started together: 3 sealed publishers of the same entries, 3 sealed readers,
a publisher whose LRU limit holds about one entry and which puts every entry again each round
(its evictions churn the directory), and `verify` in a loop. Each runs a fixed number of
rounds, not a time (a reader first polls until an entry is there, bounded by a count), and
checks each load against the entry's bytes. Afterwards every process must have ended 0
without a traceback, no load may have been wrong, peak RSS stays bounded, and a last, lone
publisher completes the cache.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

from support import bucket_faults, faults, paths
from support.jobs import jaxcache

READER = r"""
import json, sys, time, warnings
from jaxcache.trust.inputs.public_keys import load_public
where, pub, listing, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if "://" in where:
    from jaxcache.seal.objects import store_for_url as objects
    from jaxcache.seal.stores.bucket_backend import BucketSealedCache
    from jaxcache.trust.rules import target
    cache = BucketSealedCache(objects.open_store(target.parse_bucket(where)),
                              trusted=[load_public(pub)])
else:
    from jaxcache.seal.stores.sealed_cache import SealedCache
    cache = SealedCache(where, trusted=[load_public(pub)])
entries = [(k, bytes.fromhex(h)) for k, h in json.load(open(listing))]
wrong = loaded = 0
warnings.simplefilter("ignore")  # a rejection warns; the counts below are what is checked
def read_all():
    global wrong, loaded
    for key, data in entries:
        got = cache.get(key)
        if got is not None:
            wrong += got != data
            loaded += got == data
for _ in range(300000):  # first, until a publisher's first entry is there (polling, bounded)
    read_all()
    if loaded or wrong:
        break
    time.sleep(0.001)
for _ in range(rounds):  # then the rounds, while the others go on writing
    read_all()
if not rounds:  # the last, lone check: say why any entry missed (the failure's evidence)
    for r in getattr(cache, "rejections", []):
        print("rejected:", r.describe(), file=sys.stderr)
    for m in getattr(cache, "misses", []):
        print("missed:", m, file=sys.stderr)
print(json.dumps({"wrong": wrong, "loaded": loaded}))
"""

# the sealed LRU churning: a limit of about one entry, every entry put `rounds` times, so each
# put evicts another publisher's entry while the readers read
CHURN = r"""
import json, sys
from jaxcache.trust.inputs import signing_keys as keys
from jaxcache.seal.stores.sealed_cache import SealedCache
shared, keyfile, listing, limit, rounds = sys.argv[1:6]
signer = keys.load_signing(keyfile)
cache = SealedCache(shared, trusted=[signer.public], signer=signer,
                    max_size=lambda: int(limit))
for _ in range(int(rounds)):
    for key, hexdata in json.load(open(listing)):
        cache.put(key, bytes.fromhex(hexdata))
"""

VERIFY_LOOP = r"""
import subprocess, sys
where, pub, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
for _ in range(rounds):
    p = subprocess.run([sys.executable, "-m", "jaxcache", "verify", where, "--trusted-key", pub,
                        "--format", "json"], capture_output=True, text=True)
    if p.returncode not in (0, 1) or "Traceback" in p.stderr:
        sys.exit(f"verify rc {p.returncode}: {p.stderr[-400:]}")
"""

RSS_LIMIT = 1 << 30  # bytes: a light writer or reader is some 60-120 MB here


def crowd(w: faults.World, where: str, env: dict[str, str], rounds: int,
          tally: faults.Tally) -> None:
    """The 8 processes on `where` (a sealed directory, or a bucket URL reached through
    `env`), `rounds` rounds each; the results into `tally`."""
    bucket = "://" in where
    room = str(max(len(d) for _, d in w.entries) * 3 // 2)
    publish = bucket_faults.PUBLISHER if bucket else faults.PUBLISH
    argvs = [[sys.executable, "-c", publish, where, str(w.key), str(w.listing)]
             for _ in range(3)]
    argvs += [[sys.executable, "-c", READER, where, w.pub, str(w.listing), str(rounds)]
              for _ in range(3)]
    if not bucket:  # the sealed directory's LRU (a bucket has gc instead: cli gc, not here)
        argvs.append([sys.executable, "-c", CHURN, where, str(w.key), str(w.listing),
                      room, str(rounds)])
    else:
        argvs.append([sys.executable, "-c", READER, where, w.pub, str(w.listing),
                      str(rounds)])
    argvs.append([sys.executable, "-c", VERIFY_LOOP, where, w.pub, str(max(1, rounds // 4))])
    full_env = {**env, "PYTHONPATH": str(paths.SRC)}
    procs = [subprocess.Popen(a, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for a in argvs]
    for proc in procs:
        tally.trials += 1
        try:
            out, err = proc.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            tally.hangs += 1
            tally.fail(f"{proc.args[2][:40]!r}... hung")
            continue
        if proc.returncode != 0 or faults._internal(err):
            tally.internal_errors += 1
            tally.fail(f"rc {proc.returncode}: {err[-500:]}")
        if proc.args[2] is READER and proc.returncode == 0:
            counts = json.loads(out.strip().splitlines()[-1])
            tally.wrong_loads += counts["wrong"]
            tally.faults += counts["loaded"]  # loads checked while the others wrote
            if counts["wrong"]:
                tally.fail(f"{counts['wrong']} wrong loads")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    if peak > RSS_LIMIT:
        tally.fail(f"peak RSS of a process {peak >> 20} MB")


def settle(w: faults.World, where: str, env: dict[str, str], tally: faults.Tally) -> None:
    """After the crowd: verify judges it, a lone publisher completes it, every entry loads."""
    proc = jaxcache("verify", where, "--trusted-key", w.pub, "--format", "json", env=env)
    if proc.returncode not in (0, 1) or faults._internal(proc.stderr):
        tally.internal_errors += 1
        tally.fail(f"verify after the crowd: rc {proc.returncode}: {proc.stderr[-400:]}")
    publish = bucket_faults.PUBLISHER if "://" in where else faults.PUBLISH
    last = subprocess.run([sys.executable, "-c", publish, where, str(w.key), str(w.listing)],
                          env={**env, "PYTHONPATH": str(paths.SRC)}, capture_output=True,
                          text=True, timeout=600)
    if last.returncode != 0:
        tally.fail(f"the lone publisher: {last.stderr[-400:]}")
    check = subprocess.run([sys.executable, "-c", READER, where, w.pub, str(w.listing), "0"],
                           env={**env, "PYTHONPATH": str(paths.SRC)}, capture_output=True,
                           text=True, timeout=600)
    counts = json.loads(check.stdout.strip().splitlines()[-1]) if check.returncode == 0 \
        else {"wrong": 0, "loaded": -1}
    if counts != {"wrong": 0, "loaded": len(w.entries)}:
        tally.fail(f"after the lone publisher: {counts} {check.stderr[-1500:]} "
                   f"lone publisher: {last.stdout[-600:]} {last.stderr[-400:]} "
                   f"{_listing(where)}")


def _listing(where: str) -> str:
    """What a directory holds (name, size, links, age), for a failure's message."""
    if "://" in where:
        return ""
    import os
    import time

    rows = []
    for name in sorted(os.listdir(where)):
        st = os.lstat(os.path.join(where, name))
        rows.append(f"{name} {st.st_size}B n{st.st_nlink} {time.time() - st.st_mtime:.1f}s")
    return "listing: " + "; ".join(rows)


def directory(w: faults.World, root: Path, rounds: int, tally: faults.Tally) -> None:
    cache = root / "crowded"
    cache.mkdir(mode=0o700)
    env = faults.fresh_state(root / "crowd-state")
    crowd(w, str(cache), env, rounds, tally)
    settle(w, str(cache), env, tally)
