"""A record written with `run --record FILE` is kept in the state dir too, so `jaxcache
records`, decide and gc see every run, wherever its record was asked to go."""

from __future__ import annotations

import os

from support.jobs import jaxcache


def _env(tmp_path, state) -> dict:
    return {**os.environ, "XDG_STATE_HOME": str(state), "NO_COLOR": "1"}


def _run(tmp_path, env, record, *, code=0):
    cache = tmp_path / "c"
    cache.mkdir(mode=0o700, exist_ok=True)
    proc = jaxcache("run", "-q", "--cache-dir", str(cache), "--record", str(record), "--",
                    "/bin/true", env=env)
    assert proc.returncode == code, proc.stderr
    return proc


def _kept(state) -> list:
    runs = state / "jaxcache" / "runs"
    return sorted(runs.iterdir()) if runs.exists() else []


def test_a_record_written_elsewhere_is_kept_in_the_state_dir_too(tmp_path):
    state, asked = tmp_path / "state", tmp_path / "cold.json"
    env = _env(tmp_path, state)
    _run(tmp_path, env, asked)
    kept = _kept(state)
    assert len(kept) == 1 and kept[0].read_bytes() == asked.read_bytes()
    listed = jaxcache("records", "list", env=env)
    assert listed.returncode == 0 and listed.stdout.startswith("1 run record in "), listed.stdout


def test_a_record_asked_for_in_the_state_dir_under_a_records_name_is_not_copied(tmp_path):
    state = tmp_path / "state"
    runs = state / "jaxcache" / "runs"
    runs.mkdir(parents=True, mode=0o700)
    env = _env(tmp_path, state)
    _run(tmp_path, env, runs / "20261207T000000.000000000Z-1.json")
    assert [p.name for p in _kept(state)] == ["20261207T000000.000000000Z-1.json"]
    _run(tmp_path, env, runs / "mine.json")  # a name `records` does not read: copied
    assert len(_kept(state)) == 3


def test_a_kept_copy_that_cannot_be_written_is_a_warning_and_the_run_stands(tmp_path):
    state = tmp_path / "not-a-folder"
    state.write_text("")
    asked = tmp_path / "r.json"
    proc = _run(tmp_path, _env(tmp_path, state), asked)
    assert asked.stat().st_size > 0
    warnings = [line for line in proc.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "will not see this run" in warnings[0], proc.stderr
    assert state.read_text() == ""  # nothing made or changed where it could not keep it
