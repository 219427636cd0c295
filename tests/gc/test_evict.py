"""Deleting a plan with more than one thread (gc/evict.py, DELETERS): every unit is
handed over once, what went comes back in the plan's order, a deadline or an error stops all
threads; and on a real directory of many units each unit goes whole (entry, `-atime` file,
`.used` marker, signature) and nothing else does."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from support import paths

from jaxcache.gc import collect
from jaxcache.gc import evict as evictmod
from jaxcache.gc.units import Unit
from jaxcache.trust.kernel.entries import Entry

DAY_S = 86_400


def _units(n: int) -> tuple[Unit, ...]:
    out = []
    for i in range(n):
        e = Entry(f"m{i}-{i:064x}-cache", "cache", f"m{i}", f"{i:064x}", "file", 1, 0, "me",
                  0o600, 0.0, 1, False, (), (), (1, i, i, i))
        out.append(Unit(e, (), i))
    return tuple(out)


def test_each_unit_once_and_the_result_in_the_plans_order():
    plan = _units(500)
    seen: list[str] = []
    threads: set[int] = set()

    def gone(u: Unit) -> bool:
        seen.append(u.name)
        threads.add(threading.get_ident())
        time.sleep(0)  # let the other thread take a turn
        return u.last_used_ns % 3 != 0  # these were changed meanwhile: left

    done, stopped = evictmod.evict(plan, None, gone, workers=2)
    assert sorted(seen) == sorted(u.name for u in plan)  # each once
    assert [u.name for u in done] == [u.name for u in plan if u.last_used_ns % 3 != 0]
    assert not stopped
    assert evictmod.evict(plan, None, lambda u: True, workers=1)[0] == list(plan)


def test_a_passed_deadline_stops_every_thread_before_any_delete():
    seen: list[Unit] = []
    done, stopped = evictmod.evict(_units(100), time.monotonic_ns() - 1, seen.append,  # type: ignore[arg-type]
                                  workers=2)
    assert (done, stopped, seen) == ([], True, [])


def test_an_error_stops_the_threads_and_is_raised():
    plan = _units(1000)
    seen: list[str] = []

    def gone(u: Unit) -> bool:
        seen.append(u.name)
        if u.last_used_ns == 40:
            raise PermissionError(13, "Permission denied", u.name)
        return True

    with pytest.raises(PermissionError):
        evictmod.evict(plan, None, gone, workers=2)
    # the other thread finishes at most the batch it holds
    assert len(seen) <= 41 + 2 * evictmod._BATCH


def _write(path: Path, size: int, age_s: float) -> None:
    path.write_bytes(b"x" * size)
    then = time.time() - age_s
    os.utime(path, (then, then))


def test_a_directory_of_many_units_loses_whole_old_units_only(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    old, new = [], []
    for i in range(120):
        stem = f"jit_f{i}-{i:064x}"
        aged = i % 2 == 0
        _write(cache / f"{stem}-cache", 100 + i, 40 * DAY_S if aged else 0)
        if i % 3 == 0:  # JAX's atime file, as old as its entry
            _write(cache / f"{stem}-atime", 8, 40 * DAY_S if aged else 0)
        if i % 5 == 0:  # a sealed entry: its signature and jaxcache's marker
            _write(cache / f"{stem}-cache.sig", 64, 40 * DAY_S if aged else 0)
            _write(cache / f"{stem}-cache.used", 0, 40 * DAY_S if aged else 0)
        (old if aged else new).append(stem)
    # used two days ago by its atime file: stays, though its entry is old
    _write(cache / f"jit_f1000-{1000:064x}-cache", 5, 40 * DAY_S)
    _write(cache / f"jit_f1000-{1000:064x}-atime", 8, 2 * DAY_S)
    sizes = {p.name: p.stat().st_size for p in cache.iterdir()}
    before = set(sizes)
    result = collect.collect(str(cache), max_age_s=30 * DAY_S)
    after = {p.name for p in cache.iterdir()}
    assert {u.name for u in result.evicted} == {f"{s}-cache" for s in old}
    assert not any(n.startswith(tuple(f"{s}-" for s in old)) for n in after)
    assert before - after == {n for n in before if n.startswith(tuple(f"{s}-" for s in old))}
    assert {f"{s}-cache" for s in new} <= after and f"jit_f1000-{1000:064x}-cache" in after
    used = [u.last_used_ns for u in result.evicted]
    assert used == sorted(used)  # in the plan's order: least recently used first
    assert result.freed_bytes == sum(sizes[n] for n in before - after) > 0
    assert result.after_bytes == sum(sizes[n] for n in after)
    assert result.changed == () and result.left == ()


def test_deleting_from_an_atexit_handler_where_no_thread_may_start(tmp_path):
    """`enable(max_size=...)` collects from an atexit handler, where Python 3.12 refuses to
    start a thread (gh-113964: RuntimeError). gc then deletes in the calling thread alone.
    Run by a real Python 3.12 where this machine has one (pyenv), and always by refusing the
    start the way 3.12 does."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    for i in range(10):
        _write(cache / f"jit_f{i}-{i:064x}-cache", 10, 40 * DAY_S)
    refused = []

    def start(self):  # what Python 3.12 does in an atexit handler
        refused.append(self.name)
        raise RuntimeError("can't create new thread at interpreter shutdown")

    original = threading.Thread.start
    threading.Thread.start = start  # type: ignore[method-assign]
    try:
        result = collect.collect(str(cache), max_age_s=30 * DAY_S)
    finally:
        threading.Thread.start = original  # type: ignore[method-assign]
    assert refused and len(result.evicted) == 10 and list(cache.iterdir()) == []


def _python_3_12() -> str | None:
    """A Python 3.12 that runs here (a pyenv shim may name one it cannot start)."""
    for candidate in ("/root/.pyenv/versions/3.12.1/bin/python3", shutil.which("python3.12")):
        if candidate and os.path.exists(candidate):
            ran = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2])"],
                                 capture_output=True, text=True, timeout=60)
            if ran.returncode == 0 and ran.stdout.strip() == "(3, 12)":
                return candidate
    return None


PY312 = _python_3_12()


@pytest.mark.skipif(PY312 is None, reason="no Python 3.12 on this machine")
def test_a_real_python_3_12_collects_at_exit(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    for i in range(10):
        _write(cache / f"jit_f{i}-{i:064x}-cache", 10, 40 * DAY_S)
    script = ("import atexit, sys\n"
              "from jaxcache.gc import collect\n"
              "def at_exit():\n"
              "    r = collect.collect(sys.argv[1], max_age_s=30 * 86400)\n"
              "    print(len(r.evicted), flush=True)\n"
              "atexit.register(at_exit)\n")
    env = {**os.environ, "PYTHONPATH": str(paths.SRC), "XDG_STATE_HOME": str(tmp_path / "s")}
    assert PY312 is not None
    proc = subprocess.run([PY312, "-c", script, str(cache)], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 0 and proc.stdout == "10\n", proc.stderr[-2000:]
    assert list(cache.iterdir()) == []
