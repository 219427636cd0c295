"""Class 3 and 7 of issue 12: trusted inputs from writable places, and inputs that are not files.

The attacker is a second real user (the `accounts` fixture, commands run through setpriv). She
can write a shared 0777 directory where someone keeps a public key, a policy, a run record or a
bench result, and swaps it for her own. jaxcache must refuse each with exit 2 and one line
naming the problem, before anything runs. A FIFO, a directory, a symlink or an oversized file
given where a file is expected is one line and exit 2, promptly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import paths
from support.jobs import jaxcache, no_state
from support.users import as_user_argv, mkdir, needs_root, needs_setfacl

pytest.importorskip("cryptography")

ENV = {**os.environ, "JAX_PLATFORMS": "cpu"}
ENV.pop("JAX_COMPILATION_CACHE_DIR", None)
RECORD = {"schema": "jaxcache.run/1", "modules": [], "process": {"wall_s": 1.0},
          "cache_dir": {"path": "/x"}, "probe": {"loaded": True}, "subprocesses": []}
AUDIT = {"schema": "jaxcache.audit/1", "verdict": "PRIVATE", "judged_for": {"user": "root"}}
BENCH = {"schema": "jaxcache.bench/1", "command": ["python", "job.py"],
         "summary": {"verdict": "saves", "phases": {}, "saving_s": {
             "estimate": 5.0, "low": 4.0, "high": 6.0},
             "wall": {"cold": {"median": 10.0}, "warm": {"median": 5.0}}},
         "samples": [{"kind": "warm", "hits": 1}], "comparable": {}}


def one_line(proc: subprocess.CompletedProcess, code: int = 2) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jaxcache:"), proc.stderr
    return lines[0]


def as_attacker(user: str, *argv: str, data: str | None = None) -> None:
    subprocess.run([*as_user_argv(user), *argv], input=data, text=True, check=True,
                   capture_output=True, cwd="/")


def swap(user: str, path: Path, content: str) -> None:
    """The attacker writes her own file beside the victim's and renames it over it."""
    as_attacker(user, "sh", "-c", 'cat > "$1.new" && mv -f "$1.new" "$1"', "sh", str(path),
                data=content)
    assert path.stat().st_uid != 0


def keygen(path: Path) -> str:
    proc = jaxcache("keygen", str(path))
    assert proc.returncode == 0, proc.stderr
    return (path.parent / (path.name + ".pub")).read_text().strip()


@pytest.fixture
def shared(base):
    """A shared directory anyone can write (no sticky bit), as found on many machines."""
    return mkdir(base / "shared", 0o777)


@pytest.fixture
def keys(tmp_path):
    """The victim's key and the attacker's, both made in private directories."""
    mine = keygen(tmp_path / "keys" / "ci.key")
    hers = keygen(tmp_path / "mallory" / "mallory.key")
    return {"mine": mine, "hers": hers, "key": tmp_path / "keys" / "ci.key"}


@needs_root
def test_public_key_in_a_shared_directory_is_refused_even_before_a_swap(shared, keys,
                                                                        base, accounts):
    pub = shared / "ci.pub"
    pub.write_text(keys["mine"] + "\n")
    pub.chmod(0o644)
    cache = mkdir(base / "cache", 0o700)
    line = one_line(jaxcache("verify", str(cache), "--trusted-key", str(pub)))
    assert f"public key {pub} sits in {shared}" in line and "everyone" in line
    swap(accounts.c, pub, keys["hers"] + "\n")
    line = one_line(jaxcache("audit", "--sealed", "--trusted-key", str(pub), str(cache)))
    assert f"owned by {accounts.c}" in line and "not by you or root" in line
    # the same key kept privately is accepted: the location was the problem, not the key
    private = mkdir(base / "private", 0o700)
    (private / "ci.pub").write_text(keys["mine"] + "\n")
    assert jaxcache("verify", str(cache), "--trusted-key",
                    str(private / "ci.pub")).returncode == 0


@needs_root
def test_sealed_run_with_a_swapped_key_is_refused_before_the_job(shared, keys, base,
                                                                 accounts, tmp_path):
    """The attack as found: a sealed reader trusting a .pub kept in a 0777 directory. The
    attacker swaps in her key; the job (real JAX) must not start."""
    pytest.importorskip("jax")
    pub = shared / "ci.pub"
    pub.write_text(keys["mine"] + "\n")
    swap(accounts.c, pub, keys["hers"] + "\n")
    cache = mkdir(base / "sealed-cache", 0o700)
    marker = tmp_path / "job-ran"
    job = [sys.executable, "-c",
           f"import jax, pathlib; pathlib.Path({str(marker)!r}).write_text('ran')"]
    proc = jaxcache("run", "--sealed", "--cache-dir", str(cache), "--record",
                    str(tmp_path / "r.json"), "--trusted-key", str(pub), "--", *job, env=ENV)
    line = one_line(proc)
    assert str(pub) in line and accounts.c in line
    assert not marker.exists() and not (tmp_path / "r.json").exists()
    # the victim's key kept privately: the same run goes ahead
    private = mkdir(base / "private", 0o700)
    (private / "ci.pub").write_text(keys["mine"] + "\n")
    proc = jaxcache("run", "--sealed", "--cache-dir", str(cache), "--record",
                    str(tmp_path / "r.json"), "--trusted-key", str(private / "ci.pub"),
                    "--", *job, env=ENV)
    assert proc.returncode == 0, proc.stderr
    assert marker.read_text() == "ran"


@needs_root
def test_sealed_reader_never_loads_entries_signed_by_a_swapped_key(shared, keys, base,
                                                                   accounts, tmp_path):
    """The attack end to end with real JAX: she plants entries signed with her own key in a
    shared sealed cache and swaps the reader's .pub for hers. The reader (jaxcache.enable,
    sealed) refuses the key file; her entries, which a reader trusting her key does load,
    are never loaded."""
    pytest.importorskip("jax")
    job = str(paths.PROGRAMS / "sealed_job.py")
    template = base / "hers"
    proc = subprocess.run([sys.executable, job, str(template), keys["hers"], "--key",
                           str(tmp_path / "mallory" / "mallory.key")], env=ENV,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    subprocess.run(["chmod", "-R", "a+rX", str(template)], check=True)
    cache = shared / "cache"
    as_attacker(accounts.c, "cp", "-r", str(template), str(cache))
    planted = {p.name: p.read_bytes() for p in cache.iterdir()}
    assert any(name.endswith("-cache") for name in planted)
    pub = shared / "ci.pub"
    pub.write_text(keys["mine"] + "\n")
    swap(accounts.c, pub, keys["hers"] + "\n")
    reader = subprocess.run([sys.executable, job, str(cache), str(pub)], env=ENV,
                            capture_output=True, text=True, timeout=300)
    assert reader.returncode != 0 and '"hits"' not in reader.stdout
    assert f"public key {pub}" in reader.stderr and accounts.c in reader.stderr
    assert {p.name: p.read_bytes() for p in cache.iterdir()} == planted
    # what the reader would have done with the key she put there: load her entries
    fooled = subprocess.run([sys.executable, job, str(cache), keys["hers"]], env=ENV,
                            capture_output=True, text=True, timeout=300)
    assert fooled.returncode == 0, fooled.stderr[-2000:]
    assert json.loads(fooled.stdout.strip().splitlines()[-1])["hits"] >= 2


@needs_root
def test_policy_record_bench_and_audit_swapped_in_a_shared_directory(shared, base,
                                                                     accounts, tmp_path):
    cache = mkdir(base / "cache", 0o700)
    planted = {
        "policy.toml": f'trusted_users = ["{accounts.c}"]\n',
        "record.json": json.dumps(RECORD),
        "bench.json": json.dumps(BENCH),
        "audit.json": json.dumps(AUDIT),
    }
    for name, content in planted.items():
        (shared / name).write_text(content)
        swap(accounts.c, shared / name, content)
    private = mkdir(base / "private", 0o700)
    good_audit = private / "audit.json"
    good_audit.write_text(json.dumps(AUDIT))
    cases = {
        "policy": ["audit", "--policy", str(shared / "policy.toml"), str(cache)],
        "record": ["explain", str(shared / "record.json")],
        "bench result": ["decide", "--audit", str(good_audit), "--bench",
                         str(shared / "bench.json")],
        "audit": ["decide", "--audit", str(shared / "audit.json")],
    }
    for kind, argv in cases.items():
        line = one_line(jaxcache(*argv))
        assert f"{kind} {shared}/" in line and f"owned by {accounts.c}" in line, line
    # the very same documents, kept where only their owner can change them, are read
    for name, content in planted.items():
        (private / name).write_text(content)
    assert jaxcache("audit", "--policy", str(private / "policy.toml"),
                    str(cache)).returncode == 0
    assert jaxcache("explain", str(private / "record.json")).returncode == 0
    proc = jaxcache("decide", "--audit", str(good_audit), "--bench", str(private / "bench.json"))
    assert proc.returncode == 0, proc.stderr


@needs_root
def test_own_file_in_a_writable_directory_is_refused_but_sticky_protects_it(base, accounts):
    """A 0777 directory lets anyone rename our file away; a sticky one (like /tmp) does not,
    but a file another user owns there is hers to change."""
    cache = mkdir(base / "cache", 0o700)
    for mode, ok in ((0o777, False), (0o1777, True)):
        where = mkdir(base / f"d{mode:o}", mode)
        record = where / "record.json"
        record.write_text(json.dumps(RECORD))
        proc = jaxcache("explain", str(record))
        if ok:
            assert proc.returncode == 0, proc.stderr
        else:
            assert "which others can modify or replace (everyone)" in one_line(proc)
    sticky = base / "d1777"
    as_attacker(accounts.c, "sh", "-c", 'cat > "$1"', "sh", str(sticky / "hers.toml"),
                data="")
    assert "not by you or root" in one_line(
        jaxcache("audit", "--policy", str(sticky / "hers.toml"), str(cache)))


@needs_root
@needs_setfacl
def test_acl_write_grant_on_a_key_is_refused(base, keys, accounts):
    private = mkdir(base / "private", 0o700)
    pub = private / "ci.pub"
    pub.write_text(keys["mine"] + "\n")
    pub.chmod(0o600)
    subprocess.run(["setfacl", "-m", f"u:{accounts.c}:rw", str(pub)], check=True)
    cache = mkdir(base / "cache", 0o700)
    line = one_line(jaxcache("verify", str(cache), "--trusted-key", str(pub)))
    assert f"writable by {accounts.c} through its ACL" in line


def _fifo_cases(tmp_path: Path, cache: Path, fifo: Path, audit: Path) -> dict[str, list[str]]:
    return {
        "policy": ["audit", "--policy", str(fifo), str(cache)],
        "public key": ["verify", str(cache), "--trusted-key", str(fifo)],
        "signing key": ["seal", str(cache), "--signing-key", str(fifo)],
        "record": ["explain", str(fifo)],
        "bench result": ["decide", "--audit", str(audit), "--bench", str(fifo)],
        "audit": ["decide", "--audit", str(fifo)],
    }


def test_fifo_anywhere_a_file_is_read_is_refused_promptly(tmp_path):
    cache = mkdir(tmp_path / "cache", 0o700)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo, 0o600)
    audit = tmp_path / "audit.json"
    audit.write_text(json.dumps(AUDIT))
    for kind, argv in _fifo_cases(tmp_path, cache, fifo, audit).items():
        proc = subprocess.run([sys.executable, "-m", "jaxcache", *argv], capture_output=True,
                              text=True, timeout=30)  # a hang fails the test
        assert f"{kind} {fifo} is a FIFO (named pipe), not a regular file" in one_line(proc)


def test_directory_symlink_device_and_oversized_inputs(tmp_path, keys):
    cache = mkdir(tmp_path / "cache", 0o700)
    line = one_line(jaxcache("audit", "--policy", str(tmp_path), str(cache)))
    assert f"policy {tmp_path} is a directory, not a regular file" in line
    assert "Is a directory" not in line
    real = tmp_path / "real.toml"
    real.write_text("")
    (tmp_path / "link.toml").symlink_to(real)
    line = one_line(jaxcache("audit", "--policy", str(tmp_path / "link.toml"), str(cache)))
    assert "is a symbolic link (to" in line
    line = one_line(jaxcache("explain", "/dev/null"))
    assert "record /dev/null is a character device, not a regular file" in line
    big = tmp_path / "big.pub"
    big.write_text(keys["mine"] + "\n" + " " * 8192)
    line = one_line(jaxcache("verify", str(cache), "--trusted-key", str(big)))
    assert "larger than the 4096 bytes a public key may have" in line
    line = one_line(jaxcache("explain", str(tmp_path / "missing.json")))
    assert "no such record" in line


def test_signing_key_readable_by_others_is_refused(keys):
    key = keys["key"]
    key.chmod(0o644)
    try:
        line = one_line(jaxcache("seal", str(key.parent), "--signing-key", str(key)))
        assert "must be yours and mode 0600" in line
    finally:
        key.chmod(0o600)


def test_decide_on_a_sealed_audit_document_asks_for_the_saving(tmp_path):
    """A SEALED audit passes the writers test: decide needs a bench (INCONCLUSIVE without
    one, exit 1), it does not crash."""
    audit = tmp_path / "sealed.json"
    audit.write_text(json.dumps({**AUDIT, "verdict": "SEALED"}))
    proc = jaxcache("decide", "--audit", str(audit), env=no_state(tmp_path))
    assert proc.returncode == 1 and "INCONCLUSIVE" in proc.stdout and "--bench" in proc.stdout
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps(BENCH))
    proc = jaxcache("decide", "--format", "json", "--audit", str(audit), "--bench", str(bench))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["verdict"] == "SHARE"


@needs_root
def test_key_held_open_for_writing_by_another_user_is_refused(base, keys, accounts):
    """The .pub was writable while c opened it; the owner then made it 0644 in a 0700
    directory. c's descriptor still rewrites it: the key decides what a sealed reader loads."""
    from attacks.handles import Holder

    private = mkdir(base / "keys", 0o755)
    pub = private / "ci.pub"
    pub.write_text(keys["mine"] + "\n")
    pub.chmod(0o666)
    holder = Holder(accounts.c, "write", pub)
    try:
        pub.chmod(0o644)
        private.chmod(0o700)
        cache = mkdir(base / "cache", 0o700)
        line = one_line(jaxcache("verify", str(cache), "--trusted-key", str(pub)))
        assert accounts.c in line and f"process {holder.pid}" in line
    finally:
        holder.close()
    assert jaxcache("verify", str(cache), "--trusted-key", str(pub)).returncode == 0
