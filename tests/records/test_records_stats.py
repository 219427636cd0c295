"""`jaxcache records stats CACHE` (issue 44): `ccache -s` for one cache directory, over the
records real `jaxcache run`s wrote (in the state dir, where a record written with `run --record
FILE` is kept too, and files named with --record: another host's), and `--zero` to count afresh
without deleting a record."""

from __future__ import annotations

import json
import os
import sys

import pytest
from support import paths
from support.jobs import jaxcache

from jaxcache.documents import schemas

TWO_JITS = str(paths.PROGRAMS / "two_jits.py")


def run(world, cache: str, *extra: str) -> None:
    proc = jaxcache("run", "--cache-dir", str(world["tmp"] / cache), *extra, "--",
                    sys.executable, TWO_JITS, env=world["env"])
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Cache a: a cold run recorded in the state dir, a warm one recorded with --record
    elsewhere (and kept in the state dir), a warm one of another host's (another state dir,
    its record only named); cache b: one cold run in the state dir."""
    pytest.importorskip("jax")
    tmp = tmp_path_factory.mktemp("stats")
    env = {**os.environ, "XDG_STATE_HOME": str(tmp / "state"), "JAX_PLATFORMS": "cpu",
           "NO_COLOR": "1"}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    world = {"tmp": tmp, "env": env, "elsewhere": tmp / "kept" / "warm-a.json",
             "foreign": tmp / "kept" / "other-host.json"}
    world["elsewhere"].parent.mkdir(mode=0o700)
    run(world, "a")
    run(world, "a", "--record", str(world["elsewhere"]))
    run({**world, "env": {**env, "XDG_STATE_HOME": str(tmp / "other-host")}}, "a",
        "--record", str(world["foreign"]))
    run(world, "b")
    return world


def stats(world, *args: str) -> dict:
    proc = jaxcache("records", "stats", *args, "--format", "json", env=world["env"])
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    pytest.importorskip("jsonschema").validate(doc, schemas.load("records-stats"))
    return doc


def test_stats_of_one_cache_count_only_its_runs_with_those_kept_elsewhere(world):
    a, b = str(world["tmp"] / "a"), str(world["tmp"] / "b")
    every = stats(world)
    assert every["records"] == 3 and every["cache"] is None  # a cold, a warm (kept), b cold
    only_b = stats(world, b)
    assert only_b["records"] == 1 and only_b["cache"] == b and only_b["hits"] == 0
    assert only_b["entries"] >= 2 and only_b["bytes"] > 0  # what the cold run left in b
    only_a = stats(world, a)
    assert only_a["records"] == 2 and only_a["written"] >= 2
    assert only_a["hits"] >= 2 and only_a["hits_estimated"] == only_a["hits"]
    assert only_a["saved_s"] > 0
    # the --record FILE of a run kept here too counts once, named or not
    named = stats(world, a, "--record", str(world["elsewhere"]))
    assert named["records"] == 2 and named["record_files"] == [str(world["elsewhere"])]
    assert named["hits"] == only_a["hits"]
    both_a = stats(world, a, "--record", str(world["foreign"]))  # another host's run counts
    assert both_a["records"] == 3 and both_a["record_files"] == [str(world["foreign"])]
    assert both_a["hits"] > only_a["hits"]
    text = jaxcache("records", "stats", a, "--record", str(world["foreign"]),
                    env=world["env"]).stdout
    assert text.startswith(f"3 runs that used {a} from ")
    words = " ".join(text.split())  # lines wrap where the terminal (or 100 columns) ends
    assert "counted from: records in " in words
    assert "\n  and 1 file named with --record\n" in text
    assert "cache entries" in text


def test_zero_starts_counting_afresh_and_deletes_nothing(world):
    a, b = str(world["tmp"] / "a"), str(world["tmp"] / "b")
    runs = world["tmp"] / "state" / "jaxcache" / "runs"
    before = sorted(p.name for p in runs.iterdir())
    zeroed = jaxcache("records", "stats", a, "--zero", env=world["env"])
    assert zeroed.returncode == 0, zeroed.stderr
    assert "0 runs that used" in zeroed.stdout and "(zeroed)" in zeroed.stdout
    assert sorted(p.name for p in runs.iterdir()) == before  # no record deleted
    now = stats(world, a, "--record", str(world["elsewhere"]))
    assert now["records"] == 0 and now["since"] is not None
    assert stats(world, b)["records"] == 1  # another cache's count is its own
    run(world, "a")  # a run after the mark counts
    after = stats(world, a)
    assert after["records"] == 1 and after["hits"] >= 2 and after["since"] == now["since"]
    text = jaxcache("records", "stats", a, env=world["env"]).stdout
    assert text.startswith(f"1 run that used {a}, since {now['since']} (zeroed)")


def test_bad_input_is_one_line_and_exit_2(world, tmp_path):
    a = str(world["tmp"] / "a")
    not_record = tmp_path / "x.json"
    not_record.write_text('{"schema": "jaxcache.bench/1"}')
    marks = world["tmp"] / "state" / "jaxcache" / "stats-zero"
    before = sorted(p.name for p in marks.iterdir()) if marks.exists() else []
    for args in (("stats", a, "--record", str(not_record)),
                 ("stats", a, "--record", str(tmp_path / "missing.json")),
                 ("stats", "--zero"), ("list", "--zero"), ("list", a),
                 ("stats", a, "--zero", "--record", str(world["elsewhere"]))):
        proc = jaxcache("records", *args, env=world["env"])
        assert proc.returncode == 2 and proc.stdout == "", (args, proc.stderr)
        assert len(proc.stderr.splitlines()) == 1 and "Traceback" not in proc.stderr, args
    after = sorted(p.name for p in marks.iterdir()) if marks.exists() else []
    assert after == before
