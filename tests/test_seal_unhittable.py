"""`jaxcache seal` per entry (issue 16): entries made with XLA's sub-caches on are ones a
sealed reader never hits. Seal must say so for each, leave them unsigned and exit 1, unless
--allow-unhittable; verify names them too. Real JAX jobs fill the directories."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import jaxcache

from jaxcache.jaxcompat import versions
from jaxcache.seal import hittable

pytest.importorskip("cryptography")
pytest.importorskip("jax")
# jaxlib 0.11+ leaves the sub-cache path out of the key: there such entries are hit
OLD_KEYS = versions.path_in_key(hittable.local_jaxlib())
old_keys_only = pytest.mark.skipif(not OLD_KEYS, reason="jaxlib >= 0.11: the path is not in "
                                   "the key (test_new_jaxlib_signs_entries_made_with_subcaches_on)")

PROGRAM = """\
import sys
import jax, jax.numpy as jnp
jax.config.update("jax_compilation_cache_dir", sys.argv[1])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
print(jax.jit(lambda x: x * 2 + 1)(jnp.ones(3)))
"""


def fill(cache: Path, tmp: Path, subcaches: str) -> list[str]:
    """A private cache filled by a real job run with XLA's sub-caches `subcaches`."""
    cache.mkdir(mode=0o700)
    prog = tmp / "prog.py"
    prog.write_text(PROGRAM)
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES": subcaches}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    proc = subprocess.run([sys.executable, str(prog), str(cache)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = sorted(p.name for p in cache.iterdir() if p.name.endswith("-cache"))
    assert names
    return names


@pytest.fixture(scope="module")
def key(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("keys") / "ci.key"
    assert jaxcache("keygen", str(path)).returncode == 0
    return path


def seal(cache: Path, key: Path, *extra: str) -> tuple[int, dict, str]:
    js = jaxcache("seal", str(cache), "--signing-key", str(key), "--format", "json", *extra)
    return js.returncode, json.loads(js.stdout or "{}"), js.stderr


@old_keys_only
def test_entries_made_with_subcaches_on_are_reported_not_signed(tmp_path, key):
    cache = tmp_path / "plain"
    names = fill(cache, tmp_path, "all")
    text = jaxcache("seal", str(cache), "--signing-key", str(key))
    assert text.returncode == 1, text.stderr
    first = text.stdout.splitlines()[0]
    assert first.startswith("NOT SEALED: ") and f"{len(names)} of {len(names)}" in first
    assert "every entry verifies" not in text.stdout
    for name in names:  # per entry, with why
        line = next(x for x in text.stdout.splitlines() if name in x)
        assert line.lstrip().startswith("NEVER HIT") and "sub-caches on" in line
    assert f"{cache}/xla_gpu_per_fusion_autotune_cache_dir" in text.stdout  # why, once
    assert "--allow-unhittable" in text.stdout
    assert not [p for p in cache.iterdir() if ".sig" in p.name]  # nothing signed
    rc, doc, _ = seal(cache, key)  # still nothing signed: JSON says the same
    assert rc == 1 and doc["ok"] is False and doc["never_hit"] == len(names)
    assert doc["counts"]["never-hit"] == len(names) and doc["unhittable_allowed"] is False
    assert all(e["status"] == "never-hit" and e["never_hit"] for e in doc["entries"])
    _validate(doc)


@old_keys_only
def test_allow_unhittable_signs_them_and_verify_still_names_them(tmp_path, key):
    cache = tmp_path / "plain"
    names = fill(cache, tmp_path, "all")
    rc, doc, err = seal(cache, key, "--allow-unhittable")
    assert rc == 0, err
    assert doc["ok"] and doc["counts"]["signed-now"] == len(names)
    assert all(e["never_hit"] for e in doc["entries"]) and doc["unhittable_allowed"] is True
    _validate(doc)
    again = jaxcache("seal", str(cache), "--signing-key", str(key), "--allow-unhittable")
    assert again.returncode == 0 and "ALREADY SIGNED" in again.stdout
    verify = jaxcache("verify", str(cache), "--trusted-key", f"{key}.pub")
    assert verify.returncode == 0, verify.stderr
    assert verify.stdout.startswith("VALID: every entry verifies (")
    assert f"; {len(names)} of them a sealed reader never hits" in verify.stdout.splitlines()[0]


@pytest.mark.skipif(OLD_KEYS, reason="jaxlib <= 0.10: such entries are never hit")
def test_new_jaxlib_signs_entries_made_with_subcaches_on(tmp_path, key):
    """The same entry bytes name the sub-cache directory, but its key is the one a sealed
    reader computes: seal signs every entry, names none, exits 0."""
    cache = tmp_path / "plain"
    names = fill(cache, tmp_path, "all")
    rc, doc, err = seal(cache, key)
    assert rc == 0, (doc, err)
    assert doc["never_hit"] == 0
    assert all((cache / (n + ".sig")).exists() for n in names)


def test_the_jaxlib_that_made_an_entry_decides(tmp_path):
    """One entry made with the sub-caches on: never hit on jaxlib 0.10, hit on 0.11 and 0.12;
    with no jaxlib to tell, the stricter reading and how to override it."""
    cache = tmp_path / "plain"
    [name, *_] = fill(cache, tmp_path, "all")
    data = (cache / name).read_bytes()
    assert "jaxlib <= 0.10" in (hittable.why_never_hit(data, "0.10.2") or "")
    for newer in ("0.11.2", "0.12.0.1"):
        assert hittable.why_never_hit(data, newer) is None
    assert hittable.why_never_hit(b"not an entry", "0.10.2") is None


def test_entries_made_with_subcaches_off_are_signed_per_entry(tmp_path, key):
    cache = tmp_path / "off"
    names = fill(cache, tmp_path, "none")
    text = jaxcache("seal", str(cache), "--signing-key", str(key))
    assert text.returncode == 0, text.stdout + text.stderr
    assert text.stdout.startswith(f"SEALED: {len(names)} of {len(names)}")
    signed = [x for x in text.stdout.splitlines() if x.lstrip().startswith("SIGNED")]
    assert len(signed) == len(names) and "NEVER HIT" not in text.stdout
    rc, doc, _ = seal(cache, key)
    assert rc == 0 and doc["counts"]["valid"] == len(names) and doc["never_hit"] == 0


def _validate(doc: dict) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from jaxcache import schemas

    jsonschema.validate(doc, schemas.load("seal-scan"))
