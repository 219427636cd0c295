"""`bench --until-decided` (the demo's bench, issue 28 point 6): trials are added only while the
verdict is undecided, so a loaded machine gets the trials it needs and a quiet one no more.
Which way a real bench goes depends on the machine; what is checked is that it stopped for the
reason it gives, and that the reason agrees with the verdict."""

from __future__ import annotations

import json
import sys

import pytest
from support import paths
from support.jobs import jaxcache

pytest.importorskip("jax")


def test_stops_as_soon_as_the_verdict_is_decided(tmp_path):
    out = tmp_path / "b.json"
    proc = jaxcache("bench", "-t", "4", "-k", "1", "--no-prime", "--until-decided",
                    "--max-trials", "5", "--min-compile-time", "0", "--json", str(out), "--",
                    sys.executable, str(paths.PROGRAMS / "quick_compiles.py"), "2")
    doc = json.loads(out.read_text())
    summary = doc["summary"]
    trials = max(s["trial"] for s in doc["samples"])
    assert doc["config"]["until_decided"] is True
    if summary["stop_reason"] == "decided":  # after the 4 trials asked for, or the 5th
        assert summary["verdict"] not in ("inconclusive", "no-data") and trials in (4, 5)
    else:  # undecided after every trial it was allowed
        assert summary["verdict"] == "inconclusive" and trials == 5, summary
    assert proc.returncode == (0 if summary["verdict"] == "saves" else 1)


def test_max_trials_names_every_way_to_stop():
    proc = jaxcache("bench", "-t", "2", "--max-trials", "4", "--", sys.executable, "-c", "1")
    assert proc.returncode == 2
    assert "--until-width, --until-decided or --time-budget" in proc.stderr
