"""Parity: the sealed backend behaves as JAX's own cache wherever it does not deliberately
differ (docs/reference/sealed-cache.md, "Same as JAX's cache, and where it deliberately
differs").

Every scenario of tests/programs/parity_job.py runs once on JAX's cache and once on the
sealed backend, in real processes with real JAX on the CPU; the test compares what a user
can observe, and also checks the expected values, so both sides being wrong fails too.
JAX's cache needs the `filelock` package for a size limit: the test extras install it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import paths
from support.jobs import jaxcache
from support.users import as_user_argv, mkdir, needs_root, user_runtime

pytest.importorskip("cryptography")
pytest.importorskip("jax")

JOB = str(paths.PROGRAMS / "parity_job.py")
IN_PROCESS = ("cross_write", "thresholds", "max_size_before", "max_size_after",
              "max_size_after_first_compile", "reset", "names", "values",
              "disabled_then_enabled", "check_contents", "dir_in_place_warns",
              "dir_in_place_raises", "socket_in_place_warns", "socket_in_place_raises",
              "rejected_raising")


def _env() -> dict[str, str]:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    return env


def _job(mode: str, base: Path, key: Path, *scenarios: str) -> dict:
    proc = subprocess.run([sys.executable, JOB, mode, str(base), str(key), *scenarios],
                          env=_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    base = tmp_path_factory.mktemp("parity")
    base.chmod(0o700)
    key = base / "keys" / "ci.key"
    assert jaxcache("keygen", str(key)).returncode == 0
    out = {}
    for mode in ("jax", "sealed"):
        first = _job(mode, base, key, *IN_PROCESS)
        second = _job(mode, base, key, "cross_read")  # another process, same directory
        out[mode] = {**first, **second}
    out["base"] = base
    out["pub"] = (key.parent / "ci.key.pub").read_text().strip()
    return out


def same(sides, scenario: str):
    jax_side, sealed = sides["jax"][scenario], sides["sealed"][scenario]
    assert jax_side == sealed, (scenario, jax_side, sealed)
    return jax_side


def test_hits_and_misses_across_processes(sides):
    assert same(sides, "cross_write") == {"hits": [0, 0], "disk": ["jit_cross_a", "jit_cross_b"]}
    assert same(sides, "cross_read") == {"hits": [1, 1, 0], "disk": [
        "jit_cross_a", "jit_cross_b", "jit_cross_new"]}


def test_both_thresholds(sides):
    assert same(sides, "thresholds") == {"disk": ["jit_written"]}


@pytest.mark.parametrize("when", ["max_size_before", "max_size_after"])
def test_max_size_evicts_the_least_recently_used(sides, when):
    """Room for two entries: a is used again, so c's write evicts b; b's rewrite evicts a."""
    assert same(sides, when) == {"hit_a": 1, "after_c": ["jit_lru_a", "jit_lru_c"],
                                 "hit_b": 0, "disk": ["jit_lru_b", "jit_lru_c"]}


def test_max_size_set_after_the_first_compile_is_a_documented_difference(sides):
    """JAX reads the limit when it creates its cache object; the sealed store at each write."""
    assert sides["jax"]["max_size_after_first_compile"] == {"disk": ["jit_late_a", "jit_late_b"]}
    assert sides["sealed"]["max_size_after_first_compile"] == {"disk": ["jit_late_a"]}


def test_reset_cache(sides):
    assert same(sides, "reset") == {"hits": [0, 1], "disk": ["jit_reset_a"]}


def test_module_names_up_to_jaxs_limit(sides):
    """NAME_MAX 255 = module + '-' + 64 hex + '-cache': 184 characters; longer ones fail to
    write (JAX warns) and the job goes on."""
    got = same(sides, "names")
    assert got["written"] == [150, 156, 157, 160, 161, 180, 181, 184]
    assert set(got["hits"].values()) == {1} and got["write_errors"] == 2


def test_every_sealed_entry_has_its_signature(sides):
    assert sides["sealed"]["unsigned"] == []
    names = sides["base"] / "sealed" / "names"
    proc = jaxcache("verify", str(names), "--trusted-key", sides["pub"], "--format", "json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0 and len(doc["entries"]) == 8 and doc["leftovers"] == [], doc


def test_empty_values_and_first_writer_wins(sides):
    assert same(sides, "values") == {"empty": "", "first": "first", "missing": None}


def test_a_cache_disabled_then_enabled(sides):
    assert same(sides, "disabled_then_enabled") == {"while_disabled": [],
                                                    "disk": ["jit_toggle_b"]}


def test_check_contents(sides):
    """First sight of a key recompiles; a verified key hits; an entry whose executable
    differs (for the sealed side: signed by the trusted key) raises JAX's error."""
    assert same(sides, "check_contents") == {
        "hits": [0, 1], "mismatch": "Persistent compilation cache inconsistency"}


def test_an_io_error_reading_an_entry_goes_to_jax(sides):
    """A directory in an entry's place: JAX's read fails (IsADirectoryError), and so does the
    sealed reader's (its signature is valid): JAX warns and compiles, or raises with
    jax_raise_persistent_cache_errors."""
    assert same(sides, "dir_in_place_warns") == {
        "hits": 0, "raised": None, "read_errors": ["IsADirectoryError"], "rejected": 0}
    assert same(sides, "dir_in_place_raises") == {
        "hits": None, "raised": "IsADirectoryError", "read_errors": [], "rejected": 0}


def test_an_entry_that_cannot_be_opened_goes_to_jax(sides):
    """A socket in an entry's place, which nobody can open for reading, not even root (a
    file this user may not read goes the same way): OSError to JAX, which warns or raises."""
    assert same(sides, "socket_in_place_warns") == {
        "hits": 0, "raised": None, "read_errors": ["OSError"], "rejected": 0}
    assert same(sides, "socket_in_place_raises") == {
        "hits": None, "raised": "OSError", "read_errors": [], "rejected": 0}


def test_a_rejected_entry_stays_a_reported_miss_when_errors_raise(sides):
    """A signature that fails is no I/O error: a miss, reported, also when JAX raises cache
    errors (which JAX does here on the bytes it loads: a deliberate difference)."""
    assert sides["sealed"]["rejected_raising"] == {
        "hits": 0, "raised": None, "read_errors": [], "rejected": 1}
    assert sides["jax"]["rejected_raising"]["raised"] is not None


_GET_AS_USER = """
import sys
from jaxcache.seal.stores.sealed_cache import SealedCache
from jaxcache.trust.inputs.public_keys import load_public
cache = SealedCache(sys.argv[1], trusted=[load_public(sys.argv[2])])
try:
    print(cache.get(sys.argv[3]))
except OSError as exc:
    print(type(exc).__name__, exc.filename)
"""


@needs_root
def test_an_entry_this_user_may_not_read_is_an_os_error_to_jax(base, accounts):
    """JAX's read_bytes() raises PermissionError on an entry it may not open, and so does
    the sealed reader's get() (run as a user: root opens anything), whose signature is
    valid and readable; JAX then warns or raises as for its own cache."""
    from jaxcache.seal.publishing import tier_names as names
    from jaxcache.seal.signing import signature_file as sigfile
    from jaxcache.trust.inputs import signing_keys as keys

    shared = mkdir(base / "sealed", 0o755)
    signer = keys.generate("ci")
    key = "jit_f-" + "ab" * 32
    name = names.entry(key)
    (shared / name).write_bytes(b"entry")
    (shared / name).chmod(0o600)  # root's: user a may not read it
    signature = shared / names.sidecar(name, names.SIGNATURE)
    signature.write_bytes(sigfile.sign(key, b"entry", signer))
    signature.chmod(0o644)
    runtime = user_runtime()
    proc = subprocess.run([*as_user_argv(accounts.a), runtime.python, "-c", _GET_AS_USER,
                           str(shared), signer.public.text, key], env=runtime.env(), cwd="/",
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["PermissionError", str(shared / name)]
