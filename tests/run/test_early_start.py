"""The job may start while the audit runs only when that is safe, and JAX waits for it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from support import paths
from support.jobs import jaxcache
from support.users import mkdir, needs_setfacl

from jaxcache.run.early_start import allowed, loads_probe, looks_private

PY = sys.executable


@pytest.mark.parametrize("argv,expected", [
    ([PY, "train.py", "-S"], True),  # -S after the script is the script's
    ([PY, "-u", "-X", "dev", "train.py"], True),
    ([PY, "-Xdev", "-W", "ignore", "-c", "pass"], True),
    ([PY, "-m", "pkg", "-E"], True),
    ([PY, "-S", "train.py"], False),
    ([PY, "-I", "train.py"], False),
    ([PY, "-uE", "train.py"], False),
    ([PY, "-X", "S", "-E", "train.py"], False),  # -X's value is not a flag, -E is
    (["/bin/sh", "job.sh"], False),
    (["/usr/bin/env", "python3", "x.py"], False),
])
def test_only_pythons_that_load_the_probe(argv, expected):
    assert loads_probe(argv[0], argv[1:]) is expected


def test_looks_private(tmp_path):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    assert looks_private(str(private))
    assert not looks_private(str(tmp_path / "missing"))
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    (shared / "cache").mkdir(mode=0o700)
    assert not looks_private(str(shared / "cache"))  # a parent others can rename it in
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    (sticky / "cache").mkdir(mode=0o700)
    assert looks_private(str(sticky / "cache"))  # like /tmp: ours cannot be renamed
    (tmp_path / "link").symlink_to(private)
    assert not looks_private(str(tmp_path / "link"))
    group = tmp_path / "group"
    group.mkdir(mode=0o770)
    group.chmod(0o770)
    assert not looks_private(str(group))
    # entries the quick check can see: a symlink, a hard link, one writable by others
    for make in (lambda p: p.symlink_to("/etc/passwd"),
                 lambda p: (p.write_text("x"), os.link(p, tmp_path / "other-name")),
                 lambda p: (p.write_text("x"), p.chmod(0o666))):
        cache = tmp_path / f"cache{len(list(tmp_path.iterdir()))}"
        cache.mkdir(mode=0o700)
        make(cache / ("jit_f-" + "ab" * 32 + "-cache"))
        assert not looks_private(str(cache))
    assert not looks_private("/sys")  # root's and 0755, but sysfs: not a local filesystem


@needs_setfacl
def test_an_acl_is_not_private_looking(tmp_path):
    acl = tmp_path / "acl"
    acl.mkdir(mode=0o700)
    subprocess.run(["setfacl", "-m", "u:nobody:rwx", str(acl)], check=True)
    assert not looks_private(str(acl))


JOB = """
import os, sys
print("before import:", os.environ.get("JAX_COMPILATION_CACHE_DIR"), flush=True)
import jax
print("after import:", jax.config.jax_compilation_cache_dir, flush=True)
print("env after:", os.environ.get("JAX_COMPILATION_CACHE_DIR"), flush=True)
"""


def test_jax_gets_the_directory_only_through_the_gate(tmp_path):
    pytest.importorskip("jax")
    cache = mkdir(tmp_path / "cache", 0o700)
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_COMPILATION_CACHE_DIR": "/nonexistent"}
    proc = jaxcache("run", "--quiet", "--cache-dir", str(cache), "--record",
                    str(tmp_path / "r.json"), "--", PY, "-c", JOB, env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines == ["before import: None", f"after import: {cache}", f"env after: {cache}"]


@pytest.mark.skipif(os.geteuid() != 0, reason="chattr +i needs root")
def test_refused_after_an_early_start_stops_the_job_before_jax(tmp_path):
    """The quick check trusts permission bits; the full audit also asks the kernel. An
    immutable directory (chattr +i) looks private but the kernel disagrees with the model:
    UNVERIFIABLE, found after the job started. The job must not get past import jax."""
    pytest.importorskip("jax")
    cache = mkdir(tmp_path / "cache", 0o700)
    if subprocess.run(["chattr", "+i", str(cache)], capture_output=True).returncode != 0:
        pytest.skip("this filesystem has no immutable flag")
    try:
        assert allowed([PY, "-c", JOB], PY, str(cache), policy_in_use=False, sealed=False)
        proc = jaxcache("run", "--quiet", "--cache-dir", str(cache), "--record",
                        str(tmp_path / "r.json"), "--", PY, "-c", JOB,
                        env={**os.environ, "JAX_PLATFORMS": "cpu"})
    finally:
        subprocess.run(["chattr", "-i", str(cache)], check=True)
    assert proc.returncode == 1 and "refusing cache" in proc.stderr, proc.stderr
    assert "UNVERIFIABLE" in proc.stderr and "after import" not in proc.stdout
    assert list(cache.iterdir()) == [] and not (tmp_path / "r.json").exists()


def test_workers_spawned_before_the_gate_wait_for_it_too(tmp_path):
    """A job that starts a Python worker before importing jax: the worker inherits the gate
    and gets the directory from it, like its parent."""
    pytest.importorskip("jax")
    cache = mkdir(tmp_path / "cache", 0o700)
    worker = tmp_path / "worker.py"
    worker.write_text("import jax\nprint('worker:', jax.config.jax_compilation_cache_dir)\n")
    job = (f"import subprocess, sys\np = subprocess.Popen([sys.executable, {str(worker)!r}])\n"
           "import jax\np.wait()\nprint('main:', jax.config.jax_compilation_cache_dir)\n")
    proc = jaxcache("run", "--quiet", "--cache-dir", str(cache), "--record",
                    str(tmp_path / "r.json"), "--", PY, "-c", job,
                    env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.splitlines()) == [f"main: {cache}", f"worker: {cache}"]


def test_probe_directory_never_lives_where_others_could_swap_it(tmp_path):
    """TMPDIR writable by others (not sticky): whoever can rename the probe directory would
    choose the job's sitecustomize and forge the gate. jaxcache uses /tmp instead."""
    from jaxcache.probe import launch

    open_dir = mkdir(tmp_path / "open", 0o777)
    private = mkdir(tmp_path / "mine", 0o700)
    saved = os.environ.get("TMPDIR")
    try:
        os.environ["TMPDIR"] = str(open_dir)
        assert launch._tmp_root() != str(open_dir)
        os.environ["TMPDIR"] = str(private)
        assert launch._tmp_root() in (str(private), os.environ.get("XDG_RUNTIME_DIR"))
    finally:
        if saved is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved
    seen = tmp_path / "seen"
    job = f"import os; open({str(seen)!r}, 'w').write(os.environ['JAXCACHE_PROBE_DIR'])"
    proc = jaxcache("run", "--quiet", "--cache-dir", str(private), "--record",
                    str(tmp_path / "r.json"), "--", PY, "-c", job,
                    env={**os.environ, "TMPDIR": str(open_dir)})
    assert proc.returncode == 0, proc.stderr
    assert not seen.read_text().startswith(str(open_dir)) and list(open_dir.iterdir()) == []


def test_a_forged_gate_is_refused(tmp_path):
    """A gate file in a directory that is not jaxcache's private one stops the job."""
    pytest.importorskip("jax")
    fake = mkdir(tmp_path / "fake", 0o755)
    (fake / "gate.json").write_text('{"ok": true, "env": {"JAX_COMPILATION_CACHE_DIR": "/x"}}')
    probe_dir = mkdir(tmp_path / "probe", 0o700)
    site = paths.CHECKOUT / "src" / "jaxcache" / "probe" / "site.py"
    (probe_dir / "sitecustomize.py").write_bytes(site.read_bytes())
    env = {**os.environ, "PYTHONPATH": str(probe_dir), "JAXCACHE_PROBE_DIR": str(probe_dir),
           "JAXCACHE_GATE": str(fake / "gate.json"), "JAXCACHE_GATE_PID": str(os.getpid()),
           "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([PY, "-c", "import jax; print(jax.config.jax_compilation_cache_dir)"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "/x" not in proc.stdout
