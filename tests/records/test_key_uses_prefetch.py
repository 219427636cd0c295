"""Which keys a sealed bucket reader fetches ahead (records/key_uses.py, issue 45): the
newest record of the same command and cache, its hits in the order they were asked for; a
record of another job or another cache is passed over; hostile names are never planned; a
record of 1,000 keys is capped where it is used; at most RECORDS_READ records are read."""

from __future__ import annotations

import json
import os

from jaxcache.documents import kinds
from jaxcache.records import key_uses as prefetch_keys
from jaxcache.records import record_dir as store
from jaxcache.seal.stores.prefetch_plan import MAX_KEYS, plan_keys

URL = "gs://bucket/cache"


def _key(i: int) -> str:
    return f"jit_m{i}-{i:064x}"


def _write(directory, argv, cache, keys, when: str, outcome: str = "hit") -> str:
    doc = {"schema": kinds.schema("run"), "argv": list(argv), "cache_dir": {"path": cache},
           "process": {}, "probe": {"loaded": True}, "subprocesses": [],
           "modules": [{"name": str(k)[:20], "outcome": outcome, "cache_key": k,
                        "entry_bytes": 10} for k in keys]}
    name = f"{when}.000000001Z-{os.getpid()}.json"
    path = directory / name
    path.write_text(json.dumps(doc))
    path.chmod(0o600)
    return str(path)


def _dir(tmp_path):
    d = tmp_path / "runs"
    d.mkdir(mode=0o700)
    return d


def test_the_newest_record_of_the_same_command_and_cache(tmp_path):
    d = _dir(tmp_path)
    argv = ["python", "train.py"]
    _write(d, argv, URL, [_key(1)], "20261201T000000")
    mine = _write(d, argv, URL, [_key(2), _key(3), _key(2)], "20261202T000000")
    _write(d, ["python", "other.py"], URL, [_key(4)], "20261203T000000")  # another job
    _write(d, argv, "gs://bucket/elsewhere", [_key(5)], "20261204T000000")  # another cache
    _write(d, argv, URL, [_key(6)], "20261205T000000", outcome="miss")  # hit nothing
    found = prefetch_keys.newest_for(argv, URL, str(d))
    assert found is not None and found.record == mine
    assert found.keys == (_key(2), _key(3))  # in order, once each
    assert prefetch_keys.newest_for(["python", "new.py"], URL, str(d)) is None


def test_only_the_newest_few_records_are_read(tmp_path):
    d = _dir(tmp_path)
    argv = ["python", "train.py"]
    _write(d, argv, URL, [_key(1)], "20260101T000000")
    for day in range(1, prefetch_keys.PREFETCH_RECORDS + 1):
        _write(d, ["python", "other.py"], URL, [_key(2)], f"202611{day:02d}T000000")
    assert prefetch_keys.newest_for(argv, URL, str(d)) is None


def test_hostile_names_and_a_thousand_keys(tmp_path):
    d = _dir(tmp_path)
    hostile = ["../../x-" + "0" * 64, "a" * 300 + "-" + "0" * 64, "k\n-" + "0" * 64,
               "jit_f-" + "0" * 64 + "/../y", None]
    many = [_key(i) for i in range(1000)]
    path = _write(d, ["python", "t.py"], URL, [*hostile, *many], "20261201T000000")
    found = prefetch_keys.from_file(path)
    planned = plan_keys(found.keys)
    assert len(planned) == MAX_KEYS and planned == tuple(many[:MAX_KEYS])


def test_a_record_someone_else_can_write_is_not_read(tmp_path):
    d = _dir(tmp_path)
    _write(d, ["python", "t.py"], URL, [_key(1)], "20261201T000000")
    d.chmod(0o777)
    assert prefetch_keys.newest_for(["python", "t.py"], URL, str(d)) is None
    d.chmod(0o700)
    assert store.open_dir(str(d)) is not None
