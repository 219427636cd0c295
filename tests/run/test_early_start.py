"""The job may start while the audit runs only when that is safe, and JAX waits for it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support import paths
from support.jobs import clean_env, jaxcache
from support.users import mkdir, needs_setfacl

from jaxcache.probe.launch import _lease as launch_lease
from jaxcache.run.early_start import allowed, loads_probe, looks_private

PY = sys.executable


@pytest.mark.parametrize("argv,expected", [
    ([PY, "train.py", "-S"], True),  # -S after the script is the script's
    ([PY, "-u", "-X", "dev", "train.py"], True),
    ([PY, "-Xdev", "-W", "ignore", "-c", "pass"], True),
    ([PY, "-m", "pkg", "-E"], True),
    ([PY, "-S", "train.py"], False),
    (["/usr/bin/python2.7", "train.py"], False),  # cannot parse the probe: never held
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
    # and never through the environment: a child without the probe gets no directory
    assert lines == ["before import: None", f"after import: {cache}", "env after: None"]


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


def _worker(tmp_path):
    """A Python worker that imports jax and says which cache directory JAX has."""
    worker = tmp_path / "worker.py"
    worker.write_text("import jax\nprint('worker:', jax.config.jax_compilation_cache_dir)\n")
    return worker


def test_workers_spawned_before_the_gate_wait_for_it_too(tmp_path):
    """A job that starts a Python worker before importing jax: the worker inherits the gate
    and gets the directory from it, like its parent."""
    pytest.importorskip("jax")
    cache = mkdir(tmp_path / "cache", 0o700)
    worker = _worker(tmp_path)
    job = (f"import subprocess, sys\np = subprocess.Popen([sys.executable, {str(worker)!r}])\n"
           "import jax\np.wait()\nprint('main:', jax.config.jax_compilation_cache_dir)\n")
    proc = jaxcache("run", "--quiet", "--cache-dir", str(cache), "--record",
                    str(tmp_path / "r.json"), "--", PY, "-c", job,
                    env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.splitlines()) == [f"main: {cache}", f"worker: {cache}"]


def test_a_job_that_never_imports_jax_is_never_audited(tmp_path):
    """The audit runs once a process of the job asks, at `import jax`: a job that never
    imports it is not held, not audited, and its record and summary say so, with no entry
    counts (nothing was listed)."""
    cache = mkdir(tmp_path / "cache", 0o700)
    (cache / "jit_f-0-cache").write_bytes(b"x")
    record = tmp_path / "r.json"
    proc = jaxcache("run", "--cache-dir", str(cache), "--record", str(record), "--", PY, "-c",
                    "print('no jax here')", env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "no jax here\n"
    assert f"cache {cache}: not audited: no process of the job asked for it" in proc.stderr
    part = json.loads(record.read_text())["cache_dir"]
    assert part["verdict"] == "NOT-AUDITED" and part["origin"] is None
    assert part["before"]["entries"] is None and part["after"]["entries"] is None


def test_a_refused_record_stops_an_early_job_before_its_program(tmp_path):
    """The record's target is claimed while the job's interpreter starts (the probe holds the
    program until then): a --record naming a file jaxcache may not replace stops the job
    before any of its program ran, as when the claim came before the start."""
    cache = mkdir(tmp_path / "cache", 0o700)
    assert allowed([PY, "-c", "1"], PY, str(cache), policy_in_use=False, sealed=False)
    precious, marker = tmp_path / "precious.txt", tmp_path / "ran"
    precious.write_text("do not lose me")
    proc = jaxcache("run", "--cache-dir", str(cache), "--record", str(precious), "--", PY, "-c",
                    f"open({str(marker)!r}, 'w')")
    assert proc.returncode == 2 and "refusing to overwrite" in proc.stderr, proc.stderr
    assert precious.read_text() == "do not lose me" and not marker.exists()
    assert "Traceback" not in proc.stderr


def test_a_worker_that_imports_jax_asks_for_the_audit(tmp_path):
    """The job's first process never imports jax; a worker it starts later (its descriptors
    closed, as subprocess does) does: the worker's ask starts the audit, and it gets the
    directory through the gate."""
    pytest.importorskip("jax")
    cache = mkdir(tmp_path / "cache", 0o700)
    worker = _worker(tmp_path)
    job = (f"import subprocess, sys\nsubprocess.run([sys.executable, {str(worker)!r}], "
           "check=True, close_fds=True)\n")
    record = tmp_path / "r.json"
    proc = jaxcache("run", "--quiet", "--cache-dir", str(cache), "--record", str(record),
                    "--", PY, "-c", job, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"worker: {cache}"]
    assert json.loads(record.read_text())["cache_dir"]["verdict"] == "PRIVATE"


def test_probe_directory_never_lives_where_others_could_swap_it(tmp_path):
    """TMPDIR writable by others (not sticky): whoever can rename the probe directory would
    choose the job's sitecustomize and forge the gate. jaxcache uses /tmp instead."""
    from jaxcache.probe import probe_folder

    open_dir = mkdir(tmp_path / "open", 0o777)
    private = mkdir(tmp_path / "mine", 0o700)
    saved = os.environ.get("TMPDIR")
    try:
        os.environ["TMPDIR"] = str(open_dir)
        assert probe_folder.tmp_root() != str(open_dir)
        os.environ["TMPDIR"] = str(private)
        assert probe_folder.tmp_root() in (str(private), os.environ.get("XDG_RUNTIME_DIR"))
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


@pytest.mark.parametrize("start, how", [
    ("early", "CI=true"), ("early", "--require-origin"),
    ("audited-first", "CI=true"), ("audited-first", "--require-origin"),
    ("audited-first", "--sealed")])
def test_jax_uses_what_jaxcache_sets_and_the_record_says_so(tmp_path, start, how):
    """Where entries of unknown origin are refused, and for a sealed reader, jaxcache turns
    XLA's sub-caches off (XLA loads them unjudged); it also sets the cache directory and the
    write threshold asked for. JAX read its environment at
    `import jax`, before an early start's gate opened: all of it must be in force anyway,
    and the record must say what JAX used, as the job sees it."""
    pytest.importorskip("jax")
    cache = mkdir(tmp_path / "cache", 0o700)
    job = [PY, str(paths.PROGRAMS / "cache_options.py")]
    if start == "audited-first" and how != "--sealed":
        job = ["/usr/bin/env", *job]  # not known to load the probe: audited, then started
    assert allowed(job, job[0], str(cache), policy_in_use=False,
                   sealed=how == "--sealed") is (start == "early")
    env = clean_env(XDG_STATE_HOME=str(tmp_path / "state"),
                    XDG_CONFIG_HOME=str(tmp_path / "config"))
    flags = [how] if how != "CI=true" else []
    if how == "CI=true":
        env["CI"] = "true"
    if how == "--sealed":
        pytest.importorskip("cryptography")
        key = tmp_path / "keys" / "ci.key"
        assert jaxcache("keygen", str(key), env=env).returncode == 0
        flags += ["--trusted-key", (tmp_path / "keys" / "ci.key.pub").read_text().strip()]
    record = tmp_path / "r.json"
    proc = jaxcache("run", "--quiet", *flags, "--min-compile-time", "0", "--cache-dir",
                    str(cache), "--record", str(record), "--", *job, env=env)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.splitlines()[0])
    assert seen["jax_persistent_cache_enable_xla_caches"] == "none", seen
    assert seen["jax_compilation_cache_dir"] == str(cache)
    assert seen["jax_persistent_cache_min_compile_time_secs"] == 0
    said = json.loads(record.read_text())["cache_options_at_first_compile"]
    assert {name: said[name] for name in seen} == seen


def test_a_granted_setting_jax_cannot_take_turns_the_cache_off(tmp_path):
    """The gate hands over a variable the probe cannot put into JAX's config after import:
    rather than a job whose JAX runs with less than jaxcache set, no persistent cache."""
    pytest.importorskip("jax")
    cache = mkdir(tmp_path / "cache", 0o700)
    probe_dir = mkdir(tmp_path / "probe", 0o700)
    site = paths.CHECKOUT / "src" / "jaxcache" / "probe" / "site.py"
    (probe_dir / "sitecustomize.py").write_bytes(site.read_bytes())
    lib = str(paths.SRC / "jaxcache")
    (probe_dir / "gate.json").write_text(json.dumps({"ok": True, "env": {
        "JAXCACHE_AUDITED": str(cache), "JAXCACHE_LIB": lib, "JAX_NO_SUCH_CACHE_OPTION": "1"}}))
    lease = probe_dir / "ask"  # held, as `jaxcache run` holds it while the job runs
    os.mkfifo(lease, 0o600)
    held = os.open(lease, os.O_RDONLY | os.O_NONBLOCK)
    env = clean_env(PYTHONPATH=str(probe_dir), JAXCACHE_PROBE_DIR=str(probe_dir),
                    JAXCACHE_GATE=str(probe_dir / "gate.json"),
                    JAXCACHE_GATE_PID=str(os.getpid()),
                    JAXCACHE_LEASE=launch_lease(str(lease)))
    job = ("import jax; print(jax.config.jax_compilation_cache_dir, "
           "jax.config.jax_enable_compilation_cache)")
    try:
        proc = subprocess.run([PY, "-c", job], env=env, capture_output=True, text=True,
                              timeout=300)
    finally:
        os.close(held)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["None", "False"]
    (doc,) = [json.loads(p.read_text()) for p in probe_dir.glob("probe-*.json")]
    assert "JAX_NO_SUCH_CACHE_OPTION" in doc["cache_guard"]["error"]


def test_names_are_read_as_the_patterns_they_replace():
    """is_python and is_local_disk (no compiled pattern on every start) say what these
    patterns say, over every name of up to four of these pieces and the usual ones."""
    import itertools
    import re

    from jaxcache.run.early_start import is_local_disk, is_python

    python = re.compile(r"python(\d+(\.\d+)*)?")
    disk = re.compile(r"(vd|sd|hd|xvd)[a-z]+\d*|nvme\d+n\d+(p\d+)?|mmcblk\d+(p\d+)?")
    pieces = ["vd", "sd", "hd", "xvd", "nvme", "mmcblk", "python", "p", "n", "a", "1", "0",
              ".", "Z", "\u0663"]
    names = ["vda1", "nvme0n1p2", "mmcblk0p1", "loop0", "dm-0", "python3.11", "python3."]
    for k in range(1, 5):
        names += ["".join(c) for c in itertools.product(pieces, repeat=k)]
    for name in names:
        assert is_python(name) == bool(python.fullmatch(name)), name
        assert is_local_disk(name) == bool(disk.fullmatch(name)), name
