"""Class 2 of issue 12: writers that already hold a handle.

A second real user opens a cache file while the directory is shared; the owner then tightens
the permissions (0700 directory, 0644 entries), and the attacker's process keeps its handle.
Permissions are checked only at open, so that process can still rewrite what JAX loads: the
audit must say UNSAFE naming it, and `jaxcache run` / `jaxcache.enable()` must refuse. A
read-only or O_PATH handle is not a writer (the check must not always fail).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import paths
from support.jobs import audit_json, codes, jaxcache, untrusted
from support.users import PeerProcess, started, user_runtime

PROGRAMS = paths.PROGRAMS
JOB = str(PROGRAMS / "two_jits.py")
ENTRY = "jit_f-" + "ab" * 32 + "-cache"
ENV = {**os.environ, "JAX_PLATFORMS": "cpu"}
ENV.pop("JAX_COMPILATION_CACHE_DIR", None)


class Holder(PeerProcess):
    """The attacker's process, started as another user; it says "ready" once it holds."""

    what = "holder"

    def __init__(self, user: str, mode: str, path: Path, source: Path | None = None) -> None:
        runtime = user_runtime()  # the checkout may be out of that user's reach
        super().__init__(user, runtime.python, runtime.program("holder.py"), mode, str(path),
                         *([str(source)] if source is not None else []))

    def write(self) -> None:
        self.say("write")


@pytest.fixture
def holders():
    yield from started(Holder)


def shared_cache(base: Path) -> tuple[Path, Path]:
    """A cache as a team shares it: directory 0777, entry 0666, both the owner's (root)."""
    cache = base / "cache"
    cache.mkdir()
    cache.chmod(0o777)
    entry = cache / ENTRY
    entry.write_bytes(b"\x00" * 4096)
    entry.chmod(0o666)
    return cache, entry


def tighten(cache: Path) -> None:
    """What an owner does on learning the cache was shared: 0700 directory, 0644 entries."""
    cache.chmod(0o700)
    for p in cache.iterdir():
        p.chmod(0o644)


def handle_findings(doc: dict, code: str) -> list[dict]:
    return [f for f in doc["findings"] if f["code"] == code]


def test_open_write_descriptor_is_an_untrusted_writer(accounts, base, holders):
    cache, entry = shared_cache(base)
    holder = holders(accounts.c, "write", entry)
    tighten(cache)
    rc, doc = audit_json(cache)
    assert rc == 1 and doc["verdict"] == "UNSAFE", doc["findings"]
    assert untrusted(doc) == {accounts.c}
    (found,) = handle_findings(doc, "handle.write")
    assert found["effect"] == "unsafe"
    assert f"process {holder.pid} " in found["message"] and accounts.c in found["message"]
    (w,) = [w for w in doc["writers"] if w["action"] == "hold-handle"]
    assert w["principal"] == accounts.c and w["target"] == str(entry)
    (held,) = doc["handles"]["held"]
    assert (held["pid"], held["user"], held["kind"]) == (holder.pid, accounts.c, "write")
    # the finding goes with the process: closing the handle makes the cache private again
    holder.close()
    rc, doc = audit_json(cache)
    assert rc == 0 and doc["verdict"] == "PRIVATE", doc["findings"]


def test_non_dumpable_holder_is_judged_by_its_uids_not_by_proc_ownership(accounts, base,
                                                                          holders):
    """A non-dumpable process's /proc/PID files belong to root: not a reason to trust it."""
    cache, entry = shared_cache(base)
    holder = holders(accounts.c, "hidden", entry)
    assert os.stat(f"/proc/{holder.pid}/fd").st_uid == 0  # the disguise this test is about
    tighten(cache)
    rc, doc = audit_json(cache)
    assert rc == 1 and doc["verdict"] == "UNSAFE", doc["findings"]
    (found,) = handle_findings(doc, "handle.write")
    assert f"process {holder.pid} " in found["message"] and accounts.c in found["message"]


def test_hard_link_to_an_entry_is_the_same_inode(accounts, base, holders):
    """The attacker holds the entry through a name outside the cache: matched by inode."""
    cache, entry = shared_cache(base)
    elsewhere = base / "public"
    elsewhere.mkdir()
    alias = elsewhere / "innocent.bin"
    os.link(entry, alias)
    holder = holders(accounts.c, "write", alias)
    os.unlink(alias)  # gone from every directory but the cache: nothing says "cache" in its name
    tighten(cache)
    rc, doc = audit_json(cache)
    assert rc == 1 and doc["verdict"] == "UNSAFE", doc["findings"]
    (found,) = handle_findings(doc, "handle.write")
    assert f"process {holder.pid} " in found["message"]


def test_writable_shared_mapping_without_a_descriptor(accounts, base, holders):
    cache, entry = shared_cache(base)
    holder = holders(accounts.c, "map", entry)
    tighten(cache)
    rc, doc = audit_json(cache)
    assert rc == 1 and doc["verdict"] == "UNSAFE", doc["findings"]
    assert codes(doc) >= {"handle.shared-map"} and "handle.write" not in codes(doc)
    (found,) = handle_findings(doc, "handle.shared-map")
    assert f"process {holder.pid} " in found["message"] and "rw-s" in found["message"]
    assert untrusted(doc) == {accounts.c}


def test_read_only_shared_mapping_that_may_write_again(accounts, base, holders):
    """Mapped r--s from a descriptor opened O_RDWR: mprotect makes it writable without any
    permission check, so it counts (smaps VmFlags `mw`)."""
    cache, entry = shared_cache(base)
    holder = holders(accounts.c, "map-ro", entry)
    tighten(cache)
    rc, doc = audit_json(cache)
    assert rc == 1 and doc["verdict"] == "UNSAFE", doc["findings"]
    (found,) = handle_findings(doc, "handle.shared-map")
    assert f"process {holder.pid} " in found["message"] and "may write" in found["message"]


def test_descriptor_in_a_threads_own_table(accounts, base, holders):
    """A thread that unshared its descriptor table holds the fd: /proc/PID/fd does not list
    it, /proc/PID/task/TID/fd does."""
    cache, entry = shared_cache(base)
    holder = holders(accounts.c, "thread", entry)
    listed = {os.readlink(f"/proc/{holder.pid}/fd/{n}")
              for n in os.listdir(f"/proc/{holder.pid}/fd")}
    assert str(entry) not in listed  # the layout this test is about
    tighten(cache)
    rc, doc = audit_json(cache)
    assert rc == 1 and doc["verdict"] == "UNSAFE", doc["findings"]
    (found,) = handle_findings(doc, "handle.write")
    assert f"process {holder.pid} " in found["message"]


@pytest.mark.parametrize("mode", ["read", "path", "map-rdonly"])
def test_read_only_and_o_path_handles_are_not_writers(accounts, base, holders, mode):
    cache, entry = shared_cache(base)
    holder = holders(accounts.c, mode, entry)
    tighten(cache)
    rc, doc = audit_json(cache)
    assert rc == 0 and doc["verdict"] == "PRIVATE", doc["findings"]
    assert not {c for c in codes(doc) if c.startswith("handle.")}
    assert untrusted(doc) == set()
    if mode != "map-rdonly":  # a mapping alone is not a use procs.py lists
        uses = [u for u in doc["processes"]["uses"] if u["pid"] == holder.pid]
        assert uses and uses[0]["user"] == accounts.c  # still listed, as a use (a warning)
        assert "users.process" in codes(doc)
    else:
        assert holder.proc.poll() is None


def test_user_declared_in_the_policy_is_trusted_with_its_handle(accounts, base, holders):
    cache, entry = shared_cache(base)
    holders(accounts.c, "write", entry)
    tighten(cache)
    conf = base / "conf"  # not beside the cache: c's handle is in base's tree
    conf.mkdir(mode=0o755)
    policy = conf / "policy.toml"
    policy.write_text(f'[[cache]]\npath = "{cache}"\ntrusted_users = ["{accounts.c}"]\n')
    policy.chmod(0o644)
    rc, doc = audit_json(cache, "--policy", str(policy))
    assert doc["verdict"] == "SHARED-BY-POLICY" and rc == 0, doc["findings"]
    (found,) = handle_findings(doc, "handle.write")
    assert found["effect"] == "note"
    assert [w["trust"] for w in doc["writers"] if w["action"] == "hold-handle"] == ["policy"]


def test_a_user_who_cannot_inspect_the_holder_is_told_so(accounts, base, holders):
    """a owns the cache and audits it; c's process is invisible to a: never PRIVATE unsaid."""
    cache, entry = shared_cache(base)
    os.chown(cache, *_ids(accounts.a))
    os.chown(entry, *_ids(accounts.a))
    holder = holders(accounts.c, "write", entry)
    tighten(cache)
    home = {**os.environ, "HOME": "/nonexistent", "XDG_CONFIG_HOME": "/nonexistent",
            "XDG_STATE_HOME": "/nonexistent"}
    rc, doc = audit_json(cache, user=accounts.a, env=home, cwd="/")
    assert rc == 0 and doc["verdict"] == "PRIVATE"  # a warning: see docs/reference/audit.md
    (found,) = handle_findings(doc, "handle.uninspected")
    assert found["effect"] == "warning" and accounts.c in found["message"]
    assert "root" in found["remedy"]
    assert str(holder.pid) not in json.dumps(doc["findings"])  # not guessed either
    assert {"user": accounts.c, "processes": 1} in doc["handles"]["uninspected"]
    # root sees the holder and judges it for a
    rc, doc = audit_json(cache, "--user", accounts.a)
    assert rc == 1 and doc["verdict"] == "UNSAFE"
    assert handle_findings(doc, "handle.write")


def test_sealed_reader_is_told_but_not_refused(accounts, base, holders):
    """A sealed reader loads only signed entries: the holder can make jobs recompile, not choose
    their code, so the finding stays, as a warning, and the verdict is SEALED."""
    pytest.importorskip("cryptography")
    cache, entry = shared_cache(base)
    holders(accounts.c, "write", entry)
    tighten(cache)
    keys = base / "keys"
    keys.mkdir(mode=0o700)
    made = jaxcache("keygen", str(keys / "ci.key"))
    assert made.returncode == 0, made.stderr
    rc, doc = audit_json(cache, "--sealed", "--trusted-key", str(keys / "ci.key.pub"))
    assert rc == 0 and doc["verdict"] == "SEALED", doc["findings"]
    (found,) = handle_findings(doc, "handle.write")
    assert found["effect"] == "warning"
    assert untrusted(doc) == {accounts.c}


def test_no_processes_says_the_handles_were_not_checked(accounts, base, holders):
    cache, entry = shared_cache(base)
    holders(accounts.c, "write", entry)
    tighten(cache)
    rc, doc = audit_json(cache, "--no-processes")
    assert "handle.unchecked" in codes(doc)


def _ids(user: str) -> tuple[int, int]:
    import pwd

    pw = pwd.getpwnam(user)
    return pw.pw_uid, pw.pw_gid


# -- end to end, real JAX: the attacker swaps g's compiled code for f's through the held fd

def _job(cache: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, JOB, *args], capture_output=True, text=True,
                          env={**ENV, "JAX_COMPILATION_CACHE_DIR": str(cache)}, timeout=300)


def _result(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _entry(cache: Path, fun: str) -> Path:
    (found,) = [p for p in cache.iterdir()
                if p.name.startswith(f"jit_{fun}-") and p.name.endswith("-cache")]
    return found


@pytest.fixture
def held_plant(accounts, base, holders):
    """A cache whose g entry holds f's code, written by c through a handle kept after
    the owner tightened the directory; returns the cache, f's and g's true results."""
    pytest.importorskip("jax")
    cache = base / "cache"
    cache.mkdir()
    cache.chmod(0o777)
    golden = _result(_job(cache))["results"]
    assert golden["f"] != golden["g"]
    for p in cache.iterdir():
        p.chmod(0o666)
    holder = holders(accounts.c, "write", _entry(cache, "g"), source=_entry(cache, "f"))
    tighten(cache)
    holder.write()  # after the tightening: permissions no longer allow c to open it
    return cache, golden


def test_without_jaxcache_jax_runs_the_planted_code(held_plant):
    cache, golden = held_plant
    out = _result(_job(cache))
    assert out["hits"] >= 2  # f, g (and the small ops building x)
    assert out["results"]["g"] == golden["f"]  # asked for g, ran f


def test_jaxcache_run_refuses_and_the_job_never_gets_the_cache(held_plant, accounts, base):
    cache, _ = held_plant
    marker = base / "marker"
    proc = jaxcache("run", "--cache-dir", str(cache), "--record", str(base / "rec.json"),
                    "--", sys.executable, JOB, "--marker", str(marker), env=ENV)
    assert proc.returncode == 1, proc.stderr
    assert "UNSAFE" in proc.stderr and accounts.c in proc.stderr
    assert "open for writing" in proc.stderr or "descriptor" in proc.stderr
    assert not marker.exists()  # refused before the job started
    assert '"results"' not in proc.stdout


def test_jaxcache_run_refuses_before_a_non_python_job_starts(accounts, base, holders):
    """Not a Python job: the audit, handles included, comes first all the same."""
    cache, entry = shared_cache(base)
    holders(accounts.c, "write", entry)
    tighten(cache)
    marker = base / "marker"
    proc = jaxcache("run", "--cache-dir", str(cache), "--record", str(base / "rec.json"),
                    "--", "/bin/sh", "-c", f"echo ran > {marker}", env=ENV)
    assert proc.returncode == 1 and accounts.c in proc.stderr, proc.stderr
    assert not marker.exists()


def test_enable_raises_untrusted_cache_error(held_plant, accounts):
    cache, _ = held_plant
    proc = subprocess.run([sys.executable, JOB, "--enable", str(cache)], capture_output=True,
                          text=True, env=ENV, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    refused = json.loads(proc.stdout.strip().splitlines()[-1])["refused"]
    assert "UNSAFE" in refused and accounts.c in refused


# -- handles on what stores the cache: an overlay's upper layer file, a loop image

def _namespace_audit(steps: list[dict], tmp: Path) -> dict:
    from attacks.storage import _unshare_works, audit_doc, in_namespace

    if not _unshare_works():
        pytest.skip("unshare -m is refused here")
    res = in_namespace(steps, tmp)
    return audit_doc(res[-1])


def test_write_descriptor_on_an_overlay_upper_layer_file(accounts, base, holders, tmp_path):
    """c opened the entry in the upper layer (the same inode number as the merged file, on
    another device) while the layer was shared; the layer is private now. Writing through
    that descriptor changes what the merged cache directory shows."""
    from support.users import mkdir

    lower, upper = mkdir(base / "lower", 0o755), mkdir(base / "upper", 0o755)
    cache, entry = shared_cache(upper)
    holder = holders(accounts.c, "write", entry)
    tighten(cache)
    merged = mkdir(base / "merged", 0o755)
    opts = f"lowerdir={lower},upperdir={upper},workdir={mkdir(base / 'work', 0o755)}"
    doc = _namespace_audit([
        {"mount": ["mount", "-t", "overlay", "overlay", "-o", opts, str(merged)]},
        {"run": [sys.executable, "-m", "jaxcache", "audit", "--format", "json",
                 str(merged / "cache")]},
    ], tmp_path)
    assert doc["verdict"] == "UNSAFE", doc["findings"]
    assert accounts.c in untrusted(doc)
    (found,) = handle_findings(doc, "handle.write")
    assert f"process {holder.pid} " in found["message"] and str(entry) in found["message"]


def test_write_descriptor_on_a_loop_image(accounts, base, holders, tmp_path):
    """c opened the filesystem image while it was writable to her; it is root's 0600 now and
    loop-mounted as the cache's filesystem: her descriptor writes its blocks."""
    import shutil

    from attacks.storage import _image, _loop_steps

    if not Path("/dev/loop-control").exists() or shutil.which("mkfs.ext4") is None:
        pytest.skip("no loop devices or mkfs.ext4 here")
    img = _image(base, mode=0o666)
    holder = holders(accounts.c, "write", img)
    img.chmod(0o600)
    steps = _loop_steps(base, img)
    doc = _namespace_audit([*steps, {"run": [sys.executable, "-m", "jaxcache", "audit",
                                             "--format", "json", str(base / "mnt" / "cache")]}],
                           tmp_path)
    assert doc["verdict"] == "UNSAFE", doc["findings"]
    assert accounts.c in untrusted(doc)
    (found,) = handle_findings(doc, "handle.write")
    assert f"process {holder.pid} " in found["message"] and str(img) in found["message"]
