"""The audit, `run` and `run --sealed` inside a chroot whose root is a bind mount of a directory
(as container runtimes and scripts/in-debian-root.sh make it), or a plain chroot (no mount at
its root at all), built for real in a private mount namespace: same verdicts as on the host for
the same layouts, and a named UNVERIFIABLE for what the namespace hides (a volume's host side).

The chroot gets this machine's /usr, /etc, the interpreter's prefixes and the checkout, each
bound read-only at its own path, and a /dev of its own (a tmpfs with null, zero, random and
urandom, as a container's: the host's disks are not in it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from attacks.storage import in_namespace, needs_ns
from support import paths
from support.users import isolation, mkdir, needs_root

pytestmark = [needs_root, needs_ns]

JOB = str(paths.PROGRAMS / "two_jits.py")
_DEV = ("null", "zero", "random", "urandom")  # a container's /dev: no disks


def _bound() -> list[str]:
    """What the chroot needs of this machine to run this interpreter, jaxcache and JAX."""
    dirs = {"/usr", "/etc", os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix),
            os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))),
            str(paths.CHECKOUT)}
    dirs |= {os.path.realpath(p) for p in sys.path if p.startswith("/") and os.path.isdir(p)}
    for top in ("/bin", "/lib", "/lib64", "/sbin"):
        if os.path.isdir(top) and not os.path.islink(top):
            dirs.add(top)
    # a directory inside another bound one comes with it
    keep = sorted(d for d in dirs if d != "/" and not any(
        o != d and d.startswith(o.rstrip("/") + "/") for o in dirs))
    return keep


def _chroot(base: Path, *, bind_root: bool) -> tuple[Path, list[dict]]:
    """The root directory and the steps that mount it (in the namespace) and its parts."""
    root = mkdir(base / "root", 0o755)
    steps: list[dict] = []
    if bind_root:
        steps.append({"mount": ["mount", "--bind", str(root), str(root)]})
    for top in ("/bin", "/lib", "/lib64", "/sbin"):
        if os.path.islink(top):
            os.symlink(os.readlink(top), root / top.lstrip("/"))
    for d, mode in (("proc", 0o555), ("sys", 0o555), ("dev", 0o755), ("tmp", 0o1777)):
        mkdir(root / d, mode)
    # the container's /tmp first: a checkout under /tmp (a CI clone) is bound inside it after
    steps.append({"mount": ["mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs",
                            str(root / "tmp")]})
    for d in _bound():
        inside = root / d.lstrip("/")
        if d == "/tmp" or d.startswith("/tmp/"):
            steps.append({"run": ["mkdir", "-p", str(inside)]})  # on the tmpfs just mounted
        else:
            inside.mkdir(parents=True, exist_ok=True)
        steps += [{"mount": ["mount", "--bind", d, str(inside)]},
                  {"mount": ["mount", "-o", "remount,bind,ro", str(inside)]}]
    steps += [{"mount": ["mount", "-t", "proc", "proc", str(root / "proc")]},
              {"mount": ["mount", "--rbind", "/sys", str(root / "sys")]},
              {"mount": ["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", str(root / "dev")]},
              *({"run": ["touch", str(root / "dev" / name)]} for name in _DEV),
              *({"mount": ["mount", "--bind", f"/dev/{name}", str(root / "dev" / name)]}
                for name in _DEV)]
    return root, steps


def _inside(root: Path, *argv: str) -> dict:
    env = {**isolation(), "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp",
           "XDG_STATE_HOME": "/tmp/state",
           "XDG_CONFIG_HOME": "/tmp/config", "JAX_PLATFORMS": "cpu", "LANG": "C.UTF-8",
           "PYTHONPATH": str(paths.SRC)}
    return {"run": ["chroot", str(root), "/usr/bin/env", "-i", *(f"{k}={v}" for k, v in
                                                                  env.items()), *argv]}


def _audit(root: Path, path: str, *extra: str) -> dict:
    return _inside(root, sys.executable, "-m", "jaxcache", "audit", "--format", "json",
                   "--no-processes", *extra, path)


def _doc(result: dict) -> dict:
    assert result["rc"] in (0, 1), result["stderr"][-2000:]
    return json.loads(result["stdout"])


def _codes(doc: dict, effect: str | None = None) -> set[str]:
    return {f["code"] for f in doc["findings"] if effect is None or f["effect"] == effect}


def _layouts(base: Path, root: Path) -> dict[str, Path]:
    """On the chroot's own root: a private cache, one under a 0777 parent; outside it, the
    source of a volume bound in at /vol."""
    mkdir(root / "cache", 0o700)
    mkdir(mkdir(root / "pub", 0o777) / "cache", 0o700)
    vsrc = mkdir(mkdir(base / "host-side", 0o755) / "vol", 0o755)
    mkdir(vsrc / "cache", 0o700)
    mkdir(root / "vol", 0o755)
    (root / "policy.toml").write_text('[[cache]]\npath = "/vol/cache"\n'
                                      'accepted_storage = ["/vol"]\n')
    (root / "policy.toml").chmod(0o644)
    return {"cache": root / "cache", "pub": root / "pub" / "cache", "vol": vsrc / "cache",
            "vsrc": vsrc}


@pytest.mark.parametrize("bind_root", [True, False], ids=["bind-root", "plain-chroot"])
def test_audit_in_a_chroot_judges_as_on_the_host(bind_root, base, tmp_path):
    root, steps = _chroot(base, bind_root=bind_root)
    host = _layouts(base, root)
    res = in_namespace([
        *steps,
        {"mount": ["mount", "--bind", str(host["vsrc"]), str(root / "vol")]},
        _audit(root, "/cache"), _audit(root, "/pub/cache"), _audit(root, "/vol/cache"),
        _audit(root, "/vol/cache", "--policy", "/policy.toml"),
    ], tmp_path)
    inside = [_doc(r) for r in res[-4:]]
    on_host = {name: _doc(_audit_host(host[name])) for name in ("cache", "pub", "vol")}
    # the chroot's own root: its host side is hidden, and trusted as the container host's
    cache = inside[0]
    assert cache["verdict"] == on_host["cache"]["verdict"] == "PRIVATE", cache["findings"]
    assert "storage.container-root" in _codes(cache)
    # what the namespace shows is judged as everywhere
    assert inside[1]["verdict"] == on_host["pub"]["verdict"] == "UNSAFE"
    assert inside[1]["untrusted_writers"] == on_host["pub"]["untrusted_writers"] == ["everyone"]
    # a volume's host side is hidden: named, fail closed, unless the policy vouches for it
    vol = inside[2]
    assert on_host["vol"]["verdict"] == "PRIVATE"
    assert vol["verdict"] == "UNVERIFIABLE", vol["findings"]
    hidden = [f for f in vol["findings"] if f["effect"] == "unverifiable"]
    assert hidden and all(f["code"] == "storage.unknown" for f in hidden), hidden
    assert any("the host side of /vol is not visible" in f["message"] for f in hidden)
    assert not any("leads back to itself" in f["message"] for f in vol["findings"])
    assert inside[3]["verdict"] == "PRIVATE", inside[3]["findings"]
    assert "storage.accepted" in _codes(inside[3])


def _audit_host(path: Path) -> dict:
    proc = subprocess.run([sys.executable, "-m", "jaxcache", "audit", "--format", "json",
                           "--no-processes", str(path)], capture_output=True, text=True,
                          timeout=300)
    return {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}


def test_a_source_seen_through_nested_binds_is_no_cycle(base, tmp_path):
    """The chroot's root is visible through a bind of its parent, itself visible through a bind
    of the next parent (whose own source is hidden): judging them passes through / again, which
    is being judged already, not "the storage of / leads back to itself"."""
    root, steps = _chroot(base, bind_root=True)
    mkdir(root / "cache", 0o700)
    for d in ("up", "up2"):
        mkdir(root / d, 0o755)
    res = in_namespace([
        *steps,
        {"mount": ["mount", "--bind", str(base), str(root / "up")]},
        {"mount": ["mount", "--bind", str(base.parent), str(root / "up2")]},
        _audit(root, "/cache"),
    ], tmp_path)
    doc = _doc(res[-1])
    assert not any("leads back to itself" in f["message"] for f in doc["findings"])
    assert doc["verdict"] == "PRIVATE", doc["findings"]


def test_run_and_run_sealed_in_a_chroot(base, tmp_path):
    """Real jobs: `run` uses the chroot's private cache and refuses the hidden volume; a sealed
    publisher run is not refused for what the namespace hides (a sealed reader loads only what
    a trusted key signed), as on the host."""
    pytest.importorskip("jax")
    root, steps = _chroot(base, bind_root=True)
    host = _layouts(base, root)
    keys = mkdir(root / "keys", 0o700)
    jaxcache = (sys.executable, "-m", "jaxcache")
    res = in_namespace([
        *steps,
        {"mount": ["mount", "--bind", str(host["vsrc"]), str(root / "vol")]},
        _inside(root, *jaxcache, "run", "--cache-dir", "/cache", "--", sys.executable, JOB),
        _inside(root, *jaxcache, "run", "--cache-dir", "/vol/cache", "--", sys.executable, JOB),
        {"run": ["ls", "-A", str(host["vol"])]},
        _inside(root, *jaxcache, "keygen", "/keys/ci.key"),
        _inside(root, *jaxcache, "run", "--sealed", "--signing-key", "/keys/ci.key",
                "--cache-dir", "/vol/cache", "--", sys.executable, JOB),
    ], tmp_path)
    ran, refused, listed, keygen, sealed = res[-5:]
    assert ran["rc"] == 0, ran["stderr"][-2000:]
    assert any(n.endswith("-cache") for n in os.listdir(host["cache"]))
    assert refused["rc"] != 0 and "host side of /vol" in " ".join(refused["stderr"].split())
    assert listed == {"rc": 0, "stdout": "", "stderr": ""}  # the refused job wrote nothing
    assert keygen["rc"] == 0, keygen["stderr"]
    assert sealed["rc"] == 0, sealed["stderr"][-2000:]
    assert any(n.endswith(".sig") for n in os.listdir(host["vol"])), os.listdir(host["vol"])
    assert keys.stat().st_mode & 0o777 == 0o700


# ---- user namespaces: owners outside the map -------------------------------------------------
def _userns_works() -> bool:
    import shutil

    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-U", "-r", "-m", "--propagation", "private", "true"],
                          capture_output=True).returncode == 0


needs_userns = pytest.mark.skipif(not _userns_works(),
                                  reason="this kernel refuses a user namespace (unshare -U -r)")


def in_userns(steps: list[dict], tmp: Path) -> list[dict]:
    """The steps in a new user namespace that maps only root (as `unshare -U -r` does: every
    other owner of this machine shows as the overflow id) with a mount namespace of its own."""
    plan = tmp / "userns-steps.json"
    plan.write_text(json.dumps(steps))
    proc = subprocess.run(["unshare", "-U", "-r", "-m", "--propagation", "private", "--",
                           sys.executable, str(paths.PROGRAMS / "in_namespace.py"), str(plan)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _plain_audit(path: Path, *extra: str) -> dict:
    return {"run": [sys.executable, "-m", "jaxcache", "audit", "--format", "json",
                    "--no-processes", *extra, str(path)]}


@needs_userns
def test_an_owner_outside_the_user_namespace_is_unknown(base, accounts, tmp_path):
    """Another user's directory above the cache: UNSAFE on the host (that user can replace the
    cache); in a user namespace that does not map them it shows as the overflow id, which is
    nobody known: UNVERIFIABLE, and no policy trusting the local `nobody` trusts it."""
    theirs = mkdir(base / "theirs", 0o755, accounts.c)
    cache = mkdir(theirs / "cache", 0o700)
    policy = base / "policy.toml"
    policy.write_text('trusted_users = ["nobody"]\n')
    policy.chmod(0o644)
    host = _doc(_audit_host(cache))
    assert host["verdict"] == "UNSAFE" and host["untrusted_writers"] == [accounts.c]
    inside = [_doc(r) for r in in_userns([_plain_audit(cache),
                                          _plain_audit(cache, "--policy", str(policy))],
                                         tmp_path)]
    for doc in inside:
        assert doc["verdict"] == "UNVERIFIABLE", doc["findings"]
        assert "writer.unmapped" in _codes(doc, "unverifiable")
        assert not _codes(doc, "unsafe"), doc["findings"]
        # the kernel does not let the namespace's root override an unmapped owner's bits
        assert "kernel.disagrees" not in _codes(doc)
        (who,) = doc["untrusted_writers"]
        assert who.startswith("someone outside this user namespace")
        comp = next(c for c in doc["components"] if c["path"] == str(theirs))
        assert comp["owner"] != accounts.c


@needs_userns
def test_a_volume_owned_outside_the_namespace_is_vouched_for_by_accepted_storage(base, accounts,
                                                                                 tmp_path):
    """The cache's directory is a bind mount of a directory another host user owns: unknown
    from inside, until the policy vouches for that mount's storage; then shared by policy."""
    vol = mkdir(mkdir(base / "host-side", 0o755) / "vol", 0o755, accounts.c)
    mkdir(vol / "cache", 0o700)
    point = mkdir(base / "vol", 0o755)
    policy = base / "policy.toml"
    policy.write_text(f'[[cache]]\npath = "{point / "cache"}"\n'
                      f'accepted_storage = ["{point}"]\n')
    policy.chmod(0o644)
    res = in_userns([{"mount": ["mount", "--bind", str(vol), str(point)]},
                     _plain_audit(point / "cache"),
                     _plain_audit(point / "cache", "--policy", str(policy))], tmp_path)
    plain, vouched = _doc(res[1]), _doc(res[2])
    assert plain["verdict"] == "UNVERIFIABLE" and "writer.unmapped" in _codes(plain)
    assert vouched["verdict"] == "SHARED-BY-POLICY", vouched["findings"]
    assert not _codes(vouched, "unverifiable") and not _codes(vouched, "unsafe")
    assert {w["trust"] for w in vouched["writers"]
            if w["principal"].startswith("someone outside")} == {"policy"}
