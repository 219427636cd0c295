"""The probe's part of the fingerprint (issue 40): what it spells itself (it imports no jaxcache)
agrees with jaxcache's own, and what the record makes of each probe document (records/
fingerprints.py): the fingerprint handed to the job, or why it is not known."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest
from support import paths

from jaxcache import fingerprint, jobenv
from jaxcache.fingerprint import binaries
from jaxcache.records import fingerprints
from jaxcache.records.probe_output import ProbeOutput


def _document():
    spec = importlib.util.spec_from_file_location(
        "probe_document", paths.SRC / "jaxcache" / "probe" / "document.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_probe_spells_the_packages_and_the_variable_as_jaxcache_does():
    doc = _document()
    assert doc._BUILD_PACKAGES == binaries.PACKAGES
    assert doc._FINGERPRINT_ENV == jobenv.FINGERPRINT


def test_the_probe_reads_the_accelerator_as_jaxcompat_does():
    jax = pytest.importorskip("jax")
    from jaxcache.jaxcompat import hardware

    jax.jit(lambda x: x + 1)(1.0)

    class State:
        modules = [{}]  # something compiled: the backend may be asked

    found = _document().accelerator(State())
    want = hardware.accelerator()
    assert want is not None and found == want.to_json()

    class Nothing:
        modules: list[dict] = []

    assert _document().accelerator(Nothing()) is None  # never creates a backend early


def _probe(given, host: str | None = None, roots=None) -> dict:
    return {"identity": {"host": host or os.uname().nodename},
            "fingerprint": {"given": given, "roots": roots or [], "accelerator": {
                "platform": "cpu", "platform_version": "cpu", "device_kind": "cpu",
                "compute_capability": ""}}}


def test_the_handed_fingerprint_is_recorded_with_the_accelerator():
    pytest.importorskip("jaxlib")
    mine = fingerprint.current()
    given = json.loads(fingerprint.to_env(mine))
    given.pop("roots")
    doc, why = fingerprints.of_probe(ProbeOutput.from_json(_probe(given)))
    assert why is None and doc is not None
    assert doc["id"] == mine.id and doc["accelerator"]["platform"] == "cpu"


@pytest.mark.parametrize(("probe", "said"), [
    ({"identity": {"host": "x"}}, "no final probe document"),
    (_probe({"build": None}, host="elsewhere.example"), "ran on host elsewhere.example"),
    (_probe({"build": {"digest": "nope"}, "machine": "x", "cpu": {}}), "malformed"),
    (_probe(None, roots=[["jax_plugins", "/nowhere"]]), "loaded no jaxlib"),
])
def test_what_is_not_known_says_why(probe, said):
    doc, why = fingerprints.of_probe(ProbeOutput.from_json(probe))
    assert doc is None and why is not None and said in why, why
