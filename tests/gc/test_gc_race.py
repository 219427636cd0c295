"""gc while a reader reads, in real processes, 200 rounds: a read is the whole entry or a miss,
never part of one, and no signature is removed while its entry is still there.

Each round copies a cache of 24 entries (each with its `.sig` and `.used` marker, all made
long ago) to a fresh directory, starts a reader process over it, then collects it down to a
few entries. The reader, over and over until it is told to stop: for each entry, whether its
signature exists, then reads the entry whole (or finds it gone), compares the bytes with the
digest it was given, and whether a signature was gone before its entry was. That race is
narrow, so the order gc deletes in is also recorded (os.unlink, wrapped: the files are really
deleted): each entry before its signature, its signature before its marker.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from jaxcache.gc import collect

ROUNDS = 200
ENTRIES = 24
READER = r"""
import hashlib, json, os, sys
d, want, stop = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
bad, reads, misses = [], 0, 0
while True:
    last = os.path.exists(stop)
    for name, digest in want.items():
        signed = os.path.exists(os.path.join(d, name + ".sig"))
        try:  # O_NOATIME: these reads are no use gc should count (the order is the mtimes')
            fd = os.open(os.path.join(d, name), os.O_RDONLY | os.O_NOATIME)
            with open(fd, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            misses += 1
            continue
        reads += 1
        if hashlib.sha256(data).hexdigest() != digest:
            bad.append(f"{name}: {len(data)} bytes, not the entry")
        if not signed:
            bad.append(f"{name}: its signature went before it")
    if last:
        break
print(json.dumps({"bad": bad, "reads": reads, "misses": misses}))
"""


def _template(root: Path) -> tuple[Path, dict[str, str]]:
    t = root / "template"
    t.mkdir(mode=0o700)
    want = {}
    old = time.time() - 86_400
    for i in range(ENTRIES):
        name = f"jit_f{i}-{i:064x}-cache"
        data = os.urandom(4096 + 512 * i)
        (t / name).write_bytes(data)
        (t / f"{name}.sig").write_bytes(b"s" * 300)
        (t / f"{name}.used").write_bytes(b"jaxcache.used/1\n")
        for p in (t / name, t / f"{name}.sig", t / f"{name}.used"):
            os.utime(p, (old + i, old + i))  # an order of last use
        want[name] = hashlib.sha256(data).hexdigest()
    return t, want


def test_gc_while_a_reader_reads(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    template, want = _template(tmp_path)
    keep_bytes = sum(p.stat().st_size for p in template.iterdir()) // 6
    seen = {"reads": 0, "misses": 0}
    order: list[str] = []
    real_unlink = os.unlink

    def unlink(name, *args, **kw):  # what gc deletes, in order (the files are really deleted)
        order.append(str(name))
        return real_unlink(name, *args, **kw)

    monkeypatch.setattr(os, "unlink", unlink)
    for r in range(ROUNDS):
        d = tmp_path / f"round-{r}"
        shutil.copytree(template, d)  # copy2: the mtimes come along
        for f in d.iterdir():  # and the read times as the template has them (copying read it)
            st = f.stat()
            os.utime(f, ns=(st.st_mtime_ns, st.st_mtime_ns))
        stop = tmp_path / f"stop-{r}"
        order.clear()
        reader = subprocess.Popen([sys.executable, "-c", READER, str(d), json.dumps(want),
                                   str(stop)], stdout=subprocess.PIPE, text=True)
        result = collect.collect(str(d), max_size=keep_bytes)
        stop.touch()
        out, _ = reader.communicate(timeout=120)
        doc = json.loads(out)
        assert doc["bad"] == [], (r, doc["bad"][:5])
        seen["reads"] += doc["reads"]
        seen["misses"] += doc["misses"]
        kept = sorted(p.name for p in d.iterdir() if p.name.endswith("-cache"))
        gone = [u.entry.name for u in result.evicted]
        assert gone and kept == sorted(set(want) - set(gone))
        # the least recently used went: all used after the last one to go stay (an older one
        # stays too where it fits back under the limit)
        newest = max(map(list(want).index, gone))
        assert set(list(want)[newest + 1:]) <= set(kept)
        assert all((d / f"{n}.sig").exists() for n in kept)
        assert not any(p.name.endswith(".sig") and p.name[:-4] not in kept for p in d.iterdir())
        for name in want:  # each entry went before its signature and its marker
            if name in order:
                assert order.index(name) < order.index(f"{name}.sig") < \
                    order.index(f"{name}.used"), order
        monkeypatch.setattr(os, "unlink", real_unlink)
        shutil.rmtree(d)
        monkeypatch.setattr(os, "unlink", unlink)
    # the reader saw both sides: whole entries and entries gone (the race was run)
    assert seen["reads"] > 0 and seen["misses"] > 0
