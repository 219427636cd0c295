"""Attacks on the storage below the mount (issue 12, class 1), played as a second real user.

Real overlay, loop and bind mounts inside a private mount namespace (`unshare -m`): the audit
must name whoever can write a layer, an image, a device node or a bind source, and say PRIVATE
again once those are private (so the checks are not just always failing). One end-to-end run
with real JAX shows the attack works without jaxcache and that `jaxcache run` refuses it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from support import paths
from support.jobs import codes, untrusted
from support.users import as_user_argv, mkdir, needs_root, user_runtime

pytestmark = needs_root

PROGRAMS = paths.PROGRAMS
DRIVER = str(PROGRAMS / "in_namespace.py")
JOB = str(PROGRAMS / "storage_job.py")
JAXCACHE = [sys.executable, "-m", "jaxcache"]


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-m", "--propagation", "private", "true"],
                          capture_output=True).returncode == 0


needs_ns = pytest.mark.skipif(not _unshare_works(), reason="unshare -m is refused here")


def in_namespace(steps: list[dict], tmp: Path) -> list[dict]:
    plan = tmp / "steps.json"
    plan.write_text(json.dumps(steps))
    proc = subprocess.run(["unshare", "-m", "--propagation", "private", "--", sys.executable,
                           DRIVER, str(plan)], capture_output=True, text=True, timeout=900)
    if proc.returncode and "mount failed" in proc.stderr and (
            "not permitted" in proc.stderr or "permission denied" in proc.stderr.lower()):
        pytest.skip(f"the kernel refused a mount: {proc.stderr.strip()[-300:]}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def audit_step(path: Path, *extra: str) -> dict:
    return {"run": [*JAXCACHE, "audit", "--format", "json", "--no-processes", *extra,
                    str(path)]}


def audit_doc(result: dict) -> dict:
    assert result["rc"] in (0, 1), result["stderr"]
    return json.loads(result["stdout"])


def overlay(base: Path, lower: Path, upper: Path | None = None) -> dict:
    opts = f"lowerdir={lower}"
    if upper is not None:
        opts += f",upperdir={upper},workdir={mkdir(base / 'work', 0o755)}"
    else:  # a read-only overlay needs two lower layers
        opts += f":{mkdir(base / 'lower2', 0o755)}"
    return {"mount": ["mount", "-t", "overlay", "overlay", "-o", opts,
                      str(mkdir(base / "merged", 0o755))]}


def private_state(doc: dict) -> None:
    assert doc["verdict"] == "PRIVATE", doc["findings"]
    assert not untrusted(doc)


# ---- overlay ---------------------------------------------------------------------------------
@needs_ns
@pytest.mark.parametrize("layer", ["lower", "upper"])
def test_overlay_layer_writable_by_another_user(layer, base, accounts, tmp_path):
    lower = mkdir(base / "lower", 0o755, accounts.c if layer == "lower" else None)
    upper = mkdir(base / "upper", 0o755, accounts.c if layer == "upper" else None)
    mkdir(upper / "cache", 0o700)  # the merged cache looks private: root's, 0700
    cache = base / "merged" / "cache"
    res = in_namespace([
        overlay(base, lower, upper),
        audit_step(cache),
        # the attacker really can put a file where the merged directory shows it
        {"run": [*as_user_argv(accounts.c), "touch", str(base / layer / "planted")]},
        {"run": ["test", "-e", str(base / "merged" / "planted")]},
    ], tmp_path)
    assert res[2]["rc"] == 0 and res[3]["rc"] == 0, res
    doc = audit_doc(res[1])
    assert doc["verdict"] == "UNSAFE"
    assert accounts.c in untrusted(doc)
    (finding,) = [f for f in doc["findings"] if f["code"] == "storage.overlay-layer"]
    assert accounts.c in finding["message"] and str(base / layer) in finding["message"]
    chains = [w for w in doc["writers"] if w["principal"] == accounts.c]
    assert any(str(base / layer) in w["target"] for w in chains)
    assert all(c["mode"] == "0700" for c in doc["components"] if c["path"] == str(cache))


@needs_ns
def test_overlay_audited_by_an_unprivileged_user(base, accounts, tmp_path):
    """Layers, /dev and sysfs read as the user who runs the audit, not as root."""
    runtime = user_runtime()
    lower = mkdir(base / "lower", 0o755, accounts.c)
    upper = mkdir(base / "upper", 0o755, accounts.a)
    mkdir(upper / "cache", 0o700, accounts.a)
    res = in_namespace([overlay(base, lower, upper), {
        "run": [*as_user_argv(accounts.a), runtime.python, "-m", "jaxcache", "audit",
                "--format", "json", "--no-processes", str(base / "merged" / "cache")],
        "env": runtime.env()}], tmp_path)
    doc = audit_doc(res[1])
    assert doc["judged_for"]["user"] == accounts.a
    assert doc["verdict"] == "UNSAFE" and untrusted(doc) == {accounts.c}
    assert "storage.overlay-layer" in codes(doc)


@needs_ns
def test_overlay_plant_is_visible_in_the_merged_directory(base, accounts, tmp_path):
    """The premise of the attack: what a lower-layer writer adds shows in the mount."""
    lower = mkdir(base / "lower", 0o755, accounts.c)
    res = in_namespace([
        overlay(base, lower),
        {"run": [*as_user_argv(accounts.c), "sh", "-c", f"echo x > {lower}/planted"]},
        {"run": ["cat", str(base / "merged" / "planted")]},
    ], tmp_path)
    assert res[1]["rc"] == 0, res[1]["stderr"]
    assert res[2] == {"rc": 0, "stdout": "x\n", "stderr": ""}


@needs_ns
def test_overlay_with_private_layers_is_private(base, tmp_path):
    lower = mkdir(base / "lower", 0o755)
    upper = mkdir(base / "upper", 0o755)
    mkdir(upper / "cache", 0o700)
    mkdir(lower / "cache", 0o700)
    res = in_namespace([overlay(base, lower, upper), audit_step(base / "merged" / "cache")],
                       tmp_path)
    doc = audit_doc(res[1])
    private_state(doc)
    assert not {c for c in codes(doc) if c.startswith("storage.")}


@needs_ns
def test_overlay_deeper_layer_dir_writable(base, accounts, tmp_path):
    """Not only the layer root: the directory inside the layer that merges into the cache."""
    lower = mkdir(base / "lower", 0o755)
    mkdir(lower / "cache", 0o755, accounts.c)
    upper = mkdir(base / "upper", 0o755)
    mkdir(upper / "cache", 0o700)
    res = in_namespace([overlay(base, lower, upper), audit_step(base / "merged" / "cache")],
                       tmp_path)
    doc = audit_doc(res[1])
    assert doc["verdict"] == "UNSAFE" and accounts.c in untrusted(doc)
    assert "storage.overlay-layer" in codes(doc)


# ---- loop images and device nodes ------------------------------------------------------------
def _image(base: Path, owner: str | None = None, mode: int = 0o600) -> Path:
    img = base / "fs.img"
    with open(img, "wb") as f:
        f.truncate(16 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(img)], check=True, capture_output=True)
    if owner:
        shutil.chown(img, owner)
    img.chmod(mode)
    return img


def _loop_steps(base: Path, img: Path) -> list[dict]:
    point = mkdir(base / "mnt", 0o755)
    return [{"mount": ["mount", "-o", "loop", str(img), str(point)]},
            {"run": ["sh", "-c", f"mkdir -m 0700 {point}/cache"]}]


@pytest.fixture
def loop_nodes():
    """Put every /dev/loop* node back as it was, whatever a test did to it."""
    saved = {}
    for name in os.listdir("/dev"):
        if name.startswith("loop"):
            st = os.lstat(f"/dev/{name}")
            saved[name] = (st.st_uid, st.st_gid, st.st_mode & 0o7777)
    yield
    for name, (uid, gid, mode) in saved.items():
        try:
            os.chown(f"/dev/{name}", uid, gid)
            os.chmod(f"/dev/{name}", mode)
        except FileNotFoundError:
            pass


needs_mkfs = pytest.mark.skipif(shutil.which("mkfs.ext4") is None, reason="mkfs.ext4 missing")


@needs_ns
@needs_mkfs
def test_loop_image_writable_by_another_user(base, accounts, tmp_path, loop_nodes):
    img = _image(base, accounts.c, 0o600)
    res = in_namespace([*_loop_steps(base, img), audit_step(base / "mnt" / "cache")], tmp_path)
    doc = audit_doc(res[2])
    assert doc["verdict"] == "UNSAFE"
    assert untrusted(doc) == {accounts.c}
    (finding,) = [f for f in doc["findings"] if f["code"] == "storage.loop-backing"]
    assert accounts.c in finding["message"] and str(img) in finding["message"]
    assert any(w["target"] == str(img) and w["action"] == "write-storage"
               for w in doc["writers"] if w["principal"] == accounts.c)


@needs_ns
@needs_mkfs
def test_loop_image_replaceable_through_its_directory(base, accounts, tmp_path, loop_nodes):
    shared = mkdir(base / "images", 0o777)
    img = _image(shared, None, 0o600)
    res = in_namespace([*_loop_steps(base, img), audit_step(base / "mnt" / "cache")], tmp_path)
    doc = audit_doc(res[2])
    assert doc["verdict"] == "UNSAFE" and "everyone" in untrusted(doc)
    assert "storage.loop-backing" in codes(doc)


@needs_ns
@needs_mkfs
def test_loop_private_image_is_private(base, tmp_path, loop_nodes):
    img = _image(base)
    res = in_namespace([*_loop_steps(base, img), audit_step(base / "mnt" / "cache")], tmp_path)
    private_state(audit_doc(res[2]))


@needs_ns
@needs_mkfs
def test_loop_device_node_group_writable(base, accounts, tmp_path, loop_nodes):
    img = _image(base)
    before = {n: os.stat(f"/dev/{n}") for n in os.listdir("/dev") if n.startswith("loop")}
    res = in_namespace([
        *_loop_steps(base, img),
        {"node_perm": str(base / "mnt"), "group": accounts.group, "mode": "0660"},
        audit_step(base / "mnt" / "cache"),
    ], tmp_path)
    node = res[2]["node"]
    was, now = before[os.path.basename(node)], os.stat(node)
    assert (now.st_gid, now.st_mode) == (was.st_gid, was.st_mode)  # the driver put it back
    doc = audit_doc(res[3])
    assert doc["verdict"] == "UNSAFE"
    assert untrusted(doc) == {accounts.a, accounts.b}  # the group's members, not c
    (finding,) = [f for f in doc["findings"] if f["code"] == "storage.device"]
    assert node in finding["message"]
    assert {w["target"] for w in doc["writers"] if w["trust"] == "untrusted"} == {node}


@needs_ns
@needs_mkfs
def test_device_group_without_members_is_a_note(base, tmp_path, loop_nodes):
    """Debian's root:disk 0660 with nobody in disk: nobody can write it yet."""
    group = f"jxe{os.getpid() % 100000}"
    subprocess.run(["groupadd", group], check=True, capture_output=True)
    try:
        img = _image(base)
        res = in_namespace([
            *_loop_steps(base, img),
            {"node_perm": str(base / "mnt"), "group": group, "mode": "0660"},
            audit_step(base / "mnt" / "cache"),
        ], tmp_path)
    finally:
        subprocess.run(["groupdel", group], capture_output=True)
    doc = audit_doc(res[3])
    private_state(doc)
    (note,) = [f for f in doc["findings"] if f["code"] == "storage.device-group"]
    assert note["effect"] == "note" and group in note["message"]
    assert "no member" in note["message"]


def _partitioned_image(base: Path, owner: str) -> Path:
    """An image with an MBR and one Linux partition from sector 2048 (no sfdisk needed)."""
    img = base / "disk.img"
    sectors = (24 << 20) // 512
    mbr = bytearray(512)
    mbr[446:462] = bytes([0, 0, 0, 0, 0x83, 0, 0, 0]) + (2048).to_bytes(4, "little") + (
        sectors - 2048).to_bytes(4, "little")
    mbr[510:512] = b"\x55\xaa"
    with open(img, "wb") as f:
        f.write(mbr)
        f.truncate(sectors * 512)
    shutil.chown(img, owner)
    img.chmod(0o600)
    return img


@needs_ns
@needs_mkfs
def test_partition_of_a_loop_image(base, accounts, tmp_path, loop_nodes):
    """A partition leads to its whole disk, and that disk to its image file."""
    img = _partitioned_image(base, accounts.c)
    point = mkdir(base / "mnt", 0o755)
    probe = in_namespace([{"losetup": str(img)}, {"run": ["test", "-b", "{loop}p1"]}], tmp_path)
    if probe[1]["rc"]:
        pytest.skip("this kernel makes no partition device for a partitioned loop image "
                    "(no MBR partition support?)")
    res = in_namespace([
        {"losetup": str(img)},
        {"run": ["mkfs.ext4", "-q", "-F", "{loop}p1"]},
        {"mount": ["mount", "{loop}p1", str(point)]},
        {"run": ["mkdir", "-m", "0700", str(point / "cache")]},
        audit_step(point / "cache"),
    ], tmp_path)
    assert res[1]["rc"] == 0, res[1]["stderr"]
    doc = audit_doc(res[4])
    assert doc["verdict"] == "UNSAFE" and untrusted(doc) == {accounts.c}
    (finding,) = [f for f in doc["findings"] if f["code"] == "storage.loop-backing"]
    assert str(img) in finding["message"]


@needs_ns
@needs_mkfs
def test_image_path_covered_by_another_file(base, tmp_path, loop_nodes):
    """The image's path now leads to another file (a mount covers its directory): the file
    judged must be the one attached, checked by device and inode, else UNVERIFIABLE."""
    imgdir = mkdir(base / "imgdir", 0o755)
    img = _image(imgdir)
    decoy = mkdir(base / "decoy", 0o755)
    (decoy / img.name).write_bytes(b"")  # a private file of the same name, elsewhere
    (decoy / img.name).chmod(0o600)
    res = in_namespace([*_loop_steps(base, img),
                        audit_step(base / "mnt" / "cache"),
                        {"mount": ["mount", "--bind", str(decoy), str(imgdir)]},
                        audit_step(base / "mnt" / "cache")], tmp_path)
    private_state(audit_doc(res[2]))
    doc = audit_doc(res[4])
    assert doc["verdict"] == "UNVERIFIABLE"
    (finding,) = [f for f in doc["findings"] if f["code"] == "storage.unknown"]
    assert "another file" in finding["message"]


@needs_ns
@needs_mkfs
def test_deleted_loop_image_is_unverifiable(base, tmp_path, loop_nodes):
    img = _image(base)
    res = in_namespace([*_loop_steps(base, img), {"run": ["rm", str(img)]},
                        audit_step(base / "mnt" / "cache")], tmp_path)
    doc = audit_doc(res[3])
    assert doc["verdict"] == "UNVERIFIABLE"
    (finding,) = [f for f in doc["findings"] if f["code"] == "storage.unknown"]
    assert "deleted" in finding["message"]


# ---- bind mounts -----------------------------------------------------------------------------
@needs_ns
@pytest.mark.parametrize("parent_mode", [0o777, 0o755])
def test_bind_source_parent(parent_mode, base, tmp_path):
    src = mkdir(mkdir(base / "pub", parent_mode) / "src", 0o755)
    mkdir(src / "cache", 0o700)
    point = mkdir(base / "bound", 0o755)
    res = in_namespace([{"mount": ["mount", "--bind", str(src), str(point)]},
                        audit_step(point / "cache")], tmp_path)
    doc = audit_doc(res[1])
    if parent_mode == 0o755:
        private_state(doc)
        return
    assert doc["verdict"] == "UNSAFE" and "everyone" in untrusted(doc)
    (finding,) = [f for f in doc["findings"] if f["code"] == "storage.bind-source"]
    assert str(src) in finding["message"]


@needs_ns
def test_bind_of_a_directory_onto_itself_is_private(base, tmp_path):
    """`mount --bind X X` (making X a mount point) is no storage of its own."""
    x = mkdir(base / "x", 0o755)
    mkdir(x / "cache", 0o700)
    res = in_namespace([{"mount": ["mount", "--bind", str(x), str(x)]},
                        audit_step(x / "cache")], tmp_path)
    private_state(audit_doc(res[1]))


def _hidden_bind(base: Path) -> list[dict]:
    """A bind mount whose source is then covered by another mount: not reachable here."""
    tdir = mkdir(base / "t", 0o755)
    point = mkdir(base / "bound", 0o755)
    return [{"mount": ["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", str(tdir)]},
            {"run": ["sh", "-c", f"mkdir -m 0755 {tdir}/src && mkdir -m 0700 {tdir}/src/cache"]},
            {"mount": ["mount", "--bind", str(tdir / "src"), str(point)]},
            {"mount": ["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", str(tdir)]}]


@needs_ns
def test_bind_source_not_visible_is_unverifiable_unless_accepted(base, tmp_path):
    policy = base / "policy.toml"
    policy.write_text(f'[[cache]]\npath = "{base / "bound" / "cache"}"\n'
                      f'accepted_storage = ["{base / "bound"}"]\n')
    policy.chmod(0o644)
    res = in_namespace([*_hidden_bind(base), audit_step(base / "bound" / "cache"),
                        audit_step(base / "bound" / "cache", "--policy", str(policy)),
                        {"run": [*JAXCACHE, "audit", "--no-processes", "--policy", str(policy),
                                 str(base / "bound" / "cache")]}], tmp_path)
    doc = audit_doc(res[4])
    assert doc["verdict"] == "UNVERIFIABLE"
    (finding,) = [f for f in doc["findings"] if f["code"] == "storage.unknown"]
    assert "not reachable as a directory" in finding["message"]
    assert "accepted_storage" in finding["remedy"]
    accepted = audit_doc(res[5])
    assert accepted["verdict"] == "PRIVATE", accepted["findings"]
    assert "storage.accepted" in codes(accepted)
    shown = " ".join(res[6]["stdout"].split())  # prose wraps to the width
    assert res[6]["rc"] == 0 and "vouched for by the policy" in shown


# ---- end to end: real JAX loads what the layer's writer planted; jaxcache run refuses -------
@pytest.fixture(scope="module")
def compiled():
    """Entries for programs f and g, compiled once (keys do not depend on the directory)."""
    pytest.importorskip("jax")
    scratch = Path(tempfile.mkdtemp(prefix="jaxcache-storage-"))
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    try:
        out = {}
        for fun in ("f", "g"):
            proc = subprocess.run([sys.executable, JOB, fun, str(scratch / "c")], env=env,
                                  capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, proc.stderr[-2000:]
            out[fun] = json.loads(proc.stdout.strip().splitlines()[-1])["result"]
            (entry,) = [p for p in (scratch / "c").iterdir()
                        if p.name.startswith(f"jit_{fun}-") and p.name.endswith("-cache")]
            out[f"{fun}_name"], out[f"{fun}_bytes"] = entry.name, entry.read_bytes()
        assert out["f"] != out["g"]
        yield out
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@needs_ns
def test_planted_entry_through_a_lower_layer(compiled, base, accounts, tmp_path):
    lower = mkdir(base / "lower", 0o755)
    mkdir(lower / "cache", 0o755, accounts.c)  # the attacker's directory inside the layer
    upper = mkdir(base / "upper", 0o755)
    mkdir(upper / "cache", 0o700)  # the merged cache: root's, 0700, empty
    drop = mkdir(base / "drop", 0o755)
    (drop / "g.bin").write_bytes(compiled["g_bytes"])  # the attacker's own compiled program
    (drop / "g.bin").chmod(0o644)
    cache = base / "merged" / "cache"
    marker = base / "job-started"
    env = {"JAX_PLATFORMS": "cpu", "STORAGE_JOB_MARKER": str(marker)}
    res = in_namespace([
        overlay(base, lower, upper),
        audit_step(cache),
        {"run": [*JAXCACHE, "run", "--cache-dir", str(cache), "--record",
                 str(tmp_path / "record.json"), "--", sys.executable, JOB, "f"], "env": env},
        # the attacker copies their entry over the victim's key, through the layer
        {"run": [*as_user_argv(accounts.c), "cp", str(drop / "g.bin"),
                 str(lower / "cache" / compiled["f_name"])]},
        # control, without jaxcache: JAX silently runs the attacker's program
        {"run": [sys.executable, JOB, "f", str(cache)], "env": {"JAX_PLATFORMS": "cpu"}},
    ], tmp_path)
    doc = audit_doc(res[1])
    assert doc["verdict"] == "UNSAFE" and accounts.c in untrusted(doc)
    assert "storage.overlay-layer" in codes(doc)
    refused = res[2]
    assert refused["rc"] == 1, refused
    assert accounts.c in refused["stderr"] + refused["stdout"]
    assert not marker.exists()  # the job never started, so it never loaded anything
    assert res[3]["rc"] == 0, res[3]["stderr"]
    control = json.loads(res[4]["stdout"].strip().splitlines()[-1])
    assert control["hits"] == 1
    assert control["result"] == compiled["g"] != compiled["f"]
