"""Rootless podman (issue 39, class 8): the audit, `run` and `run --sealed` inside a real
container, as a user with a user namespace of their own, from an image made with `podman import`
of the Debian 13 root (scripts/debian-root.sh; no registry), with host directories bind-mounted
in as volumes. Both kinds of container root are tried: overlay (podman's default: layers on the
host, hidden) and vfs (the root is a bind mount of a directory, hidden).

Expected, for the same layouts: the host's verdicts, or a named UNVERIFIABLE for what the
namespace hides (a volume's host side; an owner outside the user namespace's map), which
`accepted_storage` vouches for.

Slow-ish and needs podman, runc, newuidmap and the Debian 13 root: not part of `make test`;
scripts/podman-check.sh runs it (.ci/run calls it after the matrix), with JAXCACHE_PODMAN=1 and
JAXCACHE_PODMAN_VENV naming a Debian 13 venv with JAX (the matrix's .venv-jax/debian13-*).
"""

from __future__ import annotations

import json
import os
import resource
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from support import paths
from support.users import IS_ROOT, mkdir

pytestmark = [
    pytest.mark.podman,
    pytest.mark.skipif(os.environ.get("JAXCACHE_PODMAN") != "1",
                       reason="rootless podman runs in scripts/podman-check.sh (.ci/run), not in "
                              "make test: set JAXCACHE_PODMAN=1 (and JAXCACHE_PODMAN_VENV)"),
    pytest.mark.skipif(not IS_ROOT, reason="needs root to make the rootless user and its image"),
]

DEBIAN_ROOT = os.environ.get("JAXCACHE_DEBIAN_ROOT", "/var/cache/jaxcache/debian13")
DRIVERS = ("overlay", "vfs")
JC = "/opt/jaxcache"  # where the container finds jaxcache, the driver and the job
PY = "/opt/venv/bin/python"


def _missing() -> str | None:
    for tool in ("podman", "newuidmap", "newgidmap", "useradd"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/system-deps.sh podman installs it)"
    if not os.path.isfile(f"{DEBIAN_ROOT}/.jaxcache-stamp"):
        return f"no Debian 13 root at {DEBIAN_ROOT} (sh scripts/debian-root.sh builds it)"
    venv = os.environ.get("JAXCACHE_PODMAN_VENV", "")
    if not os.path.isfile(os.path.join(venv, "bin", "python")):
        return (f"no Debian 13 venv with JAX at {venv or '(JAXCACHE_PODMAN_VENV unset)'} "
                "(scripts/podman-check.sh makes it)")
    return None


class Pod:
    """A rootless user with one imported image per storage driver, and a shared folder."""

    def __init__(self, user: str, home: Path, share: Path, runtime: list[str]) -> None:
        self.user, self.home, self.share, self.runtime = user, home, share, runtime
        self.cleanup: list[Path] = []  # the volumes' host folders, removed with the user
        self.uid = int(subprocess.check_output(["id", "-u", user]))

    def podman(self, driver: str, *args: str, stdin: bytes | None = None,
               timeout: int = 300) -> subprocess.CompletedProcess:
        store = self.home / f"storage-{driver}"
        argv = ["podman", "--root", str(store), "--runroot", str(store) + "-run",
                "--storage-driver", driver, *args]
        cmd = " ".join(shlex.quote(a) for a in argv)
        return subprocess.run(["su", "-", self.user, "-s", "/bin/sh", "-c", cmd], input=stdin,
                              capture_output=True, timeout=timeout)

    def steps(self, driver: str, steps: list[dict], volumes: list[tuple[Path, str]]) -> list:
        """Run tests/programs/in_namespace.py's steps in one fresh container."""
        plan = self.share / f"steps-{secrets.token_hex(4)}.json"
        plan.write_text(json.dumps(steps))
        plan.chmod(0o644)
        vols = [f"-v={self.share}:{JC}:ro", f"-v={self.share / 'venv'}:/opt/venv:ro"]
        vols += [f"-v={host}:{inside}" for host, inside in volumes]
        proc = self.podman(driver, "run", "--rm", "--network=none", *self.runtime, *vols,
                           "-e", f"PYTHONPATH={JC}/src", "-e", "JAX_PLATFORMS=cpu",
                           "-e", "XDG_STATE_HOME=/tmp/state", "-e", "HOME=/root",
                           "jaxcache-test:debian13", PY, f"{JC}/in_namespace.py",
                           f"{JC}/{plan.name}", timeout=900)
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
        return json.loads(proc.stdout.decode().strip().splitlines()[-1])


@pytest.fixture(scope="module")
def pod():
    why = _missing()
    if why:
        pytest.skip(why)
    user = f"jxpod{secrets.token_hex(2)}"
    subprocess.run(["useradd", "-m", "-s", "/bin/sh", user], check=True, capture_output=True)
    share = Path(tempfile.mkdtemp(prefix="jaxcache-podman-", dir="/var/tmp"))
    home = Path(f"/home/{user}")
    try:
        subuid = Path("/etc/subuid").read_text() if Path("/etc/subuid").exists() else ""
        if not any(line.startswith(user + ":") for line in subuid.splitlines()):
            pytest.skip(f"useradd gave {user} no subordinate uids (/etc/subuid): no rootless "
                        "user namespace")
        share.chmod(0o755)
        shutil.copytree(paths.SRC / "jaxcache", share / "src" / "jaxcache")
        for name in ("in_namespace.py", "two_jits.py"):
            shutil.copy(paths.PROGRAMS / name, share / name)
        shutil.copytree(os.environ["JAXCACHE_PODMAN_VENV"], share / "venv", symlinks=True)
        subprocess.run(["chmod", "-R", "a+rX", str(share)], check=True)
        # crun refuses hybrid cgroups (v1 with a v2 mount), as on this project's machines
        runtime = ["--runtime=runc"] if shutil.which("runc") else []
        p = Pod(user, home, share, runtime)
        tar = subprocess.run(["tar", "-C", DEBIAN_ROOT, "--exclude=./proc", "--exclude=./sys",
                              "--exclude=./dev", "-c", "."], capture_output=True, check=True)
        for driver in DRIVERS:
            made = p.podman(driver, "import", "-", "jaxcache-test:debian13", stdin=tar.stdout)
            if made.returncode:
                pytest.skip(f"podman import with the {driver} driver failed here: "
                            f"{made.stderr.decode(errors='replace')[-400:]}")
        probe = p.podman(DRIVERS[0], "run", "--rm", "--network=none", *runtime,
                         "jaxcache-test:debian13", "true")
        if probe.returncode:
            pytest.skip("this kernel cannot run a rootless container: "
                        f"{probe.stderr.decode(errors='replace')[-400:]}")
        yield p
        for folder in p.cleanup:
            shutil.rmtree(folder, ignore_errors=True)
    finally:
        # stop the user's pause process (it holds the user namespace), then remove the user
        subprocess.run(["su", "-", user, "-s", "/bin/sh", "-c", "podman system migrate"],
                       capture_output=True, timeout=120)
        _stop_pause(user)
        subprocess.run(["userdel", "-r", "-f", user], capture_output=True)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(share, ignore_errors=True)


def _stop_pause(user: str) -> None:
    """The rootless pause process podman started for this user (by its pid file)."""
    uid = subprocess.run(["id", "-u", user], capture_output=True, text=True).stdout.strip()
    for run in (f"/run/user/{uid}", f"/tmp/podman-run-{uid}"):
        pidfile = Path(run) / "libpod" / "tmp" / "pause.pid"
        try:
            pid = int(pidfile.read_text().strip())
        except (OSError, ValueError):
            continue
        try:  # only that user's: a stale file could name anyone's pid
            status = Path(f"/proc/{pid}/status").read_text()
            uids = next(line.split()[1:] for line in status.splitlines()
                        if line.startswith("Uid:"))
            if uids and all(u == uid for u in uids):
                os.kill(pid, 9)
        except (OSError, StopIteration):
            continue
    shutil.rmtree(f"/tmp/podman-run-{uid}", ignore_errors=True)


def _jc(*args: str) -> dict:
    return {"run": [PY, "-m", "jaxcache", *args]}


def _audit(path: str, *extra: str) -> dict:
    return _jc("audit", "--format", "json", "--no-processes", *extra, path)


def _doc(result: dict) -> dict:
    assert result["rc"] in (0, 1), result["stderr"][-2000:]
    return json.loads(result["stdout"])


def _codes(doc: dict, effect: str | None = None) -> set[str]:
    return {f["code"] for f in doc["findings"] if effect is None or f["effect"] == effect}


def _host_audit(path: Path, *extra: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "jaxcache", "audit", "--format", "json",
                          "--no-processes", *extra, str(path)], capture_output=True, text=True,
                         timeout=300)
    return _doc({"rc": out.returncode, "stdout": out.stdout, "stderr": out.stderr})


POLICY = ('[[cache]]\npath = "/vol/cache"\naccepted_storage = ["/vol"]\n'
          '[[cache]]\npath = "/theirs/cache"\naccepted_storage = ["/theirs"]\n')


def _prepare(*dirs: str) -> dict:
    """Inside the container, as its root: private folders on the image's root, the policy."""
    code = (f"import os\nfor d in {list(dirs)!r}: os.mkdir(d, 0o700)\n"
            f"open('/policy.toml', 'w').write({POLICY!r})\nos.chmod('/policy.toml', 0o644)\n"
            "print(open('/proc/self/uid_map').read())")
    return {"run": [PY, "-c", code]}


def _volumes(pod: Pod, accounts) -> dict[str, Path]:
    """Host folders for the volumes: the rootless user's own (its root inside), one 0777, and
    one another user of the host owns (outside the container's map)."""
    host = Path(tempfile.mkdtemp(prefix="jaxcache-volumes-", dir="/var/tmp"))  # not shared
    host.chmod(0o755)
    pod.cleanup.append(host)
    vols = {}
    for name, mode, owner in (("vol", 0o755, pod.user), ("pub", 0o777, pod.user),
                              ("theirs", 0o755, accounts.c)):
        d = mkdir(host / name, mode, owner)
        mkdir(d / "cache", 0o700, pod.user)
        vols[name] = d
    return vols


@pytest.mark.parametrize("driver", DRIVERS)
def test_audit_in_rootless_podman(driver, pod, accounts):
    vols = _volumes(pod, accounts)
    res = pod.steps(driver, [
        _prepare("/jc"),
        _audit("/jc"), _audit("/pub/cache"), _audit("/vol/cache"),
        _audit("/vol/cache", "--policy", "/policy.toml"), _audit("/theirs/cache"),
        _audit("/theirs/cache", "--policy", "/policy.toml"),
    ], [(vols[n], f"/{n}") for n in vols])
    assert res[0]["rc"] == 0 and res[0]["stdout"].split()[:3] == ["0", str(pod.uid), "1"], res[0]
    image, pub, vol, vol_ok, theirs, theirs_ok = (_doc(r) for r in res[1:])
    # the container's own root: what the namespace hides of it is the container host's
    assert image["verdict"] == "PRIVATE", image["findings"]
    assert "storage.container-root" in _codes(image)
    # what it shows is judged as on the host: a 0777 folder is anyone's, here as there
    host_pub = _host_audit(vols["pub"] / "cache", "--user", pod.user)
    assert pub["verdict"] == host_pub["verdict"] == "UNSAFE"
    assert "everyone" in pub["untrusted_writers"]
    # a volume: its host side is hidden, named, UNVERIFIABLE unless the policy vouches
    assert _host_audit(vols["vol"] / "cache", "--user", pod.user)["verdict"] == "PRIVATE"
    assert vol["verdict"] == "UNVERIFIABLE", vol["findings"]
    assert any("the host side of /vol is not visible" in f["message"]
               for f in vol["findings"] if f["effect"] == "unverifiable"), vol["findings"]
    assert vol_ok["verdict"] == "PRIVATE", vol_ok["findings"]
    # another host user's folder: outside the map, unknown; vouched: shared by policy
    assert theirs["verdict"] == "UNVERIFIABLE" and "writer.unmapped" in _codes(theirs)
    assert not _codes(theirs, "unsafe"), theirs["findings"]
    assert theirs_ok["verdict"] == "SHARED-BY-POLICY", theirs_ok["findings"]


def test_run_and_run_sealed_in_rootless_podman(pod, accounts):
    vols = _volumes(pod, accounts)
    job = [PY, f"{JC}/two_jits.py"]
    res = pod.steps(DRIVERS[0], [
        _prepare("/jc", "/keys"),
        _jc("run", "--cache-dir", "/jc", "--", *job),
        {"run": ["sh", "-c", "ls /jc | grep -c -- '-cache$'"]},
        _jc("run", "--cache-dir", "/vol/cache", "--", *job),
        {"run": ["ls", "-A", "/vol/cache"]},
        _jc("run", "--policy", "/policy.toml", "--cache-dir", "/vol/cache", "--", *job),
        _jc("keygen", "/keys/ci.key"),
        _jc("run", "--sealed", "--signing-key", "/keys/ci.key", "--cache-dir", "/theirs/cache",
            "--", *job),
    ], [(vols[n], f"/{n}") for n in vols])
    ran, count, refused, listed, vouched, keygen, sealed = res[1:]
    assert ran["rc"] == 0, ran["stderr"][-2000:]
    assert int(count["stdout"]) > 0
    assert refused["rc"] != 0
    assert "host side of /vol" in " ".join(refused["stderr"].split()), refused["stderr"][-1500:]
    assert listed["stdout"] == ""  # refused: the job never saw the directory
    assert vouched["rc"] == 0, vouched["stderr"][-2000:]
    assert any(n.endswith("-cache") for n in os.listdir(vols["vol"] / "cache"))
    assert keygen["rc"] == 0, keygen["stderr"]
    # a sealed publisher: what the namespace hides cannot choose the code a sealed reader runs
    assert sealed["rc"] == 0, sealed["stderr"][-2000:]
    assert any(n.endswith(".sig") for n in os.listdir(vols["theirs"] / "cache"))


def test_audit_in_a_fuse_overlayfs_root(pod, tmp_path):
    """podman with fuse-overlayfs (its overlay when the kernel's cannot be used): the root is a
    FUSE filesystem, which the container host's daemon serves from the image's layers. Run as
    root here: a rootless user needs /dev/fuse, which many machines (this project's) keep 0600."""
    if shutil.which("fuse-overlayfs") is None or not os.path.exists("/dev/fuse"):
        pytest.skip("no fuse-overlayfs or /dev/fuse (apt-get install fuse-overlayfs)")
    store = Path(tempfile.mkdtemp(prefix="jaxcache-fuse-store-", dir="/var/tmp"))
    host = Path(tempfile.mkdtemp(prefix="jaxcache-volumes-", dir="/var/tmp"))
    host.chmod(0o755)
    mkdir(mkdir(host / "vol", 0o755) / "cache", 0o700)
    base = ["podman", "--root", str(store / "root"), "--runroot", str(store / "run"),
            "--storage-driver", "overlay", "--storage-opt",
            f"overlay.mount_program={shutil.which('fuse-overlayfs')}"]
    plan = pod.share / f"steps-{secrets.token_hex(4)}.json"
    plan.write_text(json.dumps([_prepare("/jc"), _audit("/jc"), _audit("/vol/cache"),
                                _audit("/vol/cache", "--policy", "/policy.toml")]))
    plan.chmod(0o644)
    try:
        tar = subprocess.run(["tar", "-C", DEBIAN_ROOT, "--exclude=./proc", "--exclude=./sys",
                              "--exclude=./dev", "-c", "."], capture_output=True, check=True)
        made = subprocess.run([*base, "import", "-", "jaxcache-test:debian13"],
                              input=tar.stdout, capture_output=True, timeout=300)
        assert made.returncode == 0, made.stderr[-2000:]
        # rootful podman raises open files and processes past this machine's hard limits
        # (runc then fails): ask for the open-files hard limit and a modest process count
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        limits = ["--ulimit=nproc=4096:4096"]
        if nofile != resource.RLIM_INFINITY:
            limits.append(f"--ulimit=nofile={nofile}:{nofile}")
        proc = subprocess.run([*base, "run", "--rm", "--network=none", *pod.runtime, *limits,
                               f"-v={pod.share}:{JC}:ro", f"-v={pod.share / 'venv'}:/opt/venv:ro",
                               f"-v={host / 'vol'}:/vol", "-e", f"PYTHONPATH={JC}/src",
                               "-e", "XDG_STATE_HOME=/tmp/state", "jaxcache-test:debian13",
                               PY, f"{JC}/in_namespace.py", f"{JC}/{plan.name}"],
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        res = json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        subprocess.run([*base, "system", "reset", "-f"], capture_output=True, timeout=120)
        shutil.rmtree(store, ignore_errors=True)
        shutil.rmtree(host, ignore_errors=True)
    image, vol, vol_ok = (_doc(r) for r in res[1:])
    assert image["verdict"] == "PRIVATE", image["findings"]
    roots = [f for f in image["findings"] if f["code"] == "storage.container-root"]
    assert any("fuse.fuse-overlayfs" in f["message"] for f in roots), image["findings"]
    assert vol["verdict"] == "UNVERIFIABLE" and any(
        "the host side of /vol is not visible" in f["message"] for f in vol["findings"])
    assert vol_ok["verdict"] == "PRIVATE", vol_ok["findings"]
