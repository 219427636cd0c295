"""Data loss: a user's files sit where jaxcache writes. jaxcache never deletes or overwrites a
file it did not create, and proves every output target before the first trial or the job.

The bench jobs here are tiny (no JAX) and write a marker line each time they run, so "failed
before the first trial" is observed, not assumed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import paths
from support.jobs import jaxcache
from support.users import as_user_argv, mkdir, needs_root

JOB = 'echo ran >> "$0"'  # a job any user can run, leaving one line per run
CHECKOUT = paths.CHECKOUT


def job(marker: Path) -> list[str]:
    return ["--", "/bin/sh", "-c", JOB, str(marker)]


def bench(*args: str, marker: Path, **kw) -> subprocess.CompletedProcess:
    return jaxcache("bench", "-t", "1", "-k", "1", "--no-prime", *args, *job(marker), **kw)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tree(path: Path) -> dict[str, str]:
    """Every file under path with its content's hash: what must survive byte for byte."""
    return {str(p.relative_to(path)): digest(p) for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("flag,name", [("--json", "b.json"), ("--report", "r.md"),
                                       ("--plot", "c.png")])
def test_an_existing_file_is_never_overwritten_and_no_trial_runs(tmp_path, flag, name):
    pytest.importorskip("matplotlib")
    mine = tmp_path / name
    mine.write_bytes(b"the user's own work\n")
    marker = tmp_path / "ran"
    proc = bench(flag, str(mine), marker=marker)
    assert proc.returncode == 2, proc.stderr
    assert f"refusing to overwrite {mine}" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert mine.read_bytes() == b"the user's own work\n"
    assert not marker.exists()  # failed before the first trial


def test_other_outputs_claimed_first_are_released_when_one_is_refused(tmp_path):
    mine = tmp_path / "r.md"
    mine.write_text("notes")
    marker = tmp_path / "ran"
    proc = bench("--json", str(tmp_path / "new.json"), "--report", str(mine), marker=marker)
    assert proc.returncode == 2 and "refusing to overwrite" in proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["r.md"] and mine.read_text() == "notes"


def test_out_dir_with_the_users_report_is_refused_before_any_trial(tmp_path):
    out = mkdir(tmp_path / "out", 0o700)
    (out / "report.md").write_text("my report, not jaxcache's")
    (out / "runs").mkdir(mode=0o700)
    (out / "runs" / "keep.txt").write_text("mine")
    before = tree(out)
    marker = tmp_path / "ran"
    proc = bench("--out", str(out), marker=marker)
    assert proc.returncode == 2 and "refusing to overwrite" in proc.stderr
    assert tree(out) == before and not marker.exists()
    assert sorted(os.listdir(out)) == ["report.md", "runs"]  # no placeholder left behind


def test_a_symlink_planted_by_another_user_is_not_followed(base, accounts):
    """A shared sticky directory: another user plants out.json -> the victim's file."""
    shared = mkdir(base / "shared", 0o1777)
    victim = mkdir(base / "victim", 0o700)
    precious = victim / "thesis.tex"
    precious.write_text("years of work")
    subprocess.run([*as_user_argv(accounts.a), "ln", "-s", str(precious),
                    str(shared / "out.json")], check=True)
    # and a file of hers that looks exactly like a jaxcache bench result
    doc = json.dumps({"schema": "jaxcache.bench/1", "samples": []})
    subprocess.run([*as_user_argv(accounts.a), "sh", "-c", f"printf '%s' '{doc}' > $0",
                    str(shared / "hers.json")], check=True)
    marker = victim / "ran"
    proc = bench("--json", str(shared / "out.json"), marker=marker)
    assert proc.returncode == 2 and "symbolic link" in proc.stderr
    assert precious.read_text() == "years of work" and not marker.exists()
    proc = bench("--json", str(shared / "hers.json"), marker=marker)
    assert proc.returncode == 2 and "is not yours" in proc.stderr
    assert (shared / "hers.json").read_text() == doc and not marker.exists()


@pytest.fixture
def read_only_dir(base):
    """A directory on a read-only bind mount, seen inside a private mount namespace: root's
    access() still says it is writable."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare not installed")
    ro = mkdir(base / "ro", 0o755)
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                            f"mount --bind {ro} {ro} && mount -o remount,bind,ro {ro}"],
                           capture_output=True, text=True)
    if probe.returncode:
        pytest.skip(f"the kernel refused a read-only bind mount: {probe.stderr.strip()}")
    return ro


def in_read_only(ro: Path, *argv: str) -> subprocess.CompletedProcess:
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script,
                           str(ro), sys.executable, "-m", "jaxcache", *argv],
                          capture_output=True, text=True, cwd=str(CHECKOUT))


@needs_root
def test_unwritable_target_fails_before_the_first_trial(read_only_dir, tmp_path):
    marker = tmp_path / "ran"
    for flag, name in (("--json", "b.json"), ("--report", "r.md")):
        proc = in_read_only(read_only_dir, "bench", "-t", "1", "-k", "1", "--no-prime", flag,
                            str(read_only_dir / name), *job(marker))
        assert proc.returncode == 2, proc.stderr
        assert "Read-only file system" in proc.stderr and "Traceback" not in proc.stderr
        assert not marker.exists()
    proc = in_read_only(read_only_dir, "run", "--cache-dir", str(tmp_path / "cache"),
                        "--record", str(read_only_dir / "r.json"), *job(marker))
    assert proc.returncode == 2 and "Read-only file system" in proc.stderr
    assert not marker.exists()  # the job never started
    assert os.listdir(read_only_dir) == []


@needs_root
def test_another_users_directory_is_refused_for_that_user(base, accounts):
    """Mode 0755, owned by root: user a cannot create there, and is told so before any run."""
    if subprocess.run([*as_user_argv(accounts.a), sys.executable, "-c", "import jaxcache"],
                      capture_output=True, cwd="/").returncode:
        pytest.skip("this checkout's interpreter is not reachable by other users")
    roots = mkdir(base / "roots", 0o755)
    work = mkdir(base / "work", 0o777)
    marker = work / "ran"
    proc = bench("--json", str(roots / "b.json"), marker=marker, user=accounts.a, cwd="/",
                 python=sys.executable)  # bench needs JAX: this checkout's interpreter
    assert proc.returncode == 2 and "Permission denied" in proc.stderr, proc.stderr
    assert not marker.exists() and os.listdir(roots) == []


def test_failed_bench_removes_only_its_own_placeholders(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    proc = jaxcache("bench", "-t", "1", "-k", "1", "--no-prime", "--json",
                    str(tmp_path / "b.json"), "--report", str(tmp_path / "r.md"), "--",
                    sys.executable, "-c", "import sys; sys.exit(4)")
    assert proc.returncode == 2 and "exit status 4" in proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["keep.txt"]


def test_success_writes_every_output_and_replaces_only_its_own(tmp_path):
    pytest.importorskip("matplotlib")
    marker = tmp_path / "ran"
    paths = {"--json": tmp_path / "b.json", "--report": tmp_path / "r.md",
             "--plot": tmp_path / "c.png"}
    args = [a for flag, p in paths.items() for a in (flag, str(p))]
    old_umask = os.umask(0o027)
    try:
        proc = bench(*args, marker=marker)
    finally:
        os.umask(old_umask)
    assert proc.returncode in (0, 1), proc.stderr
    assert json.loads(paths["--json"].read_text())["schema"] == "jaxcache.bench/1"
    assert paths["--report"].read_text().startswith("# jaxcache bench\n")
    assert paths["--plot"].read_bytes().startswith(b"\x89PNG")
    assert all(p.stat().st_mode & 0o777 == 0o640 for p in paths.values())  # the user's umask
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]  # no temp files left
    inodes = {f: p.stat().st_ino for f, p in paths.items()}
    proc = bench(*args, marker=marker)  # jaxcache's own documents of the same kind: replaced
    assert proc.returncode in (0, 1), proc.stderr
    assert all(p.stat().st_ino != inodes[f] for f, p in paths.items())
    assert marker.read_text() == "ran\n" * 4
    # but a document of another kind is not: a bench result is not a run record
    proc = jaxcache("run", "--cache-dir", str(tmp_path / "cache"), "--record",
                    str(paths["--json"]), *job(marker))
    assert proc.returncode == 2 and "refusing to overwrite" in proc.stderr
    assert marker.read_text() == "ran\n" * 4


def test_demo_writes_only_into_a_new_folder_of_its_own(tmp_path):
    pytest.importorskip("jax")
    pytest.importorskip("matplotlib")
    out = mkdir(tmp_path / "out", 0o700)  # private: the layout an earlier demo deleted runs/ in
    (out / "runs").mkdir()
    (out / "runs" / "trial-1").mkdir()
    (out / "runs" / "trial-1" / "cold.json").write_text('{"mine": true}')
    (out / "runs" / "notes.txt").write_bytes(os.urandom(512))
    (out / "jaxcache-demo-1").mkdir()  # an earlier demo's, or anything of that name
    (out / "jaxcache-demo-1" / "report.md").write_text("keep")
    (out / "bench.json").write_text("{}")
    before = tree(out)
    proc = jaxcache("demo", "--out", str(out), "-t", "1", "-k", "1", "--max-trials", "1")
    assert "Traceback" not in proc.stderr + proc.stdout
    made = out / "jaxcache-demo-2"
    assert f"demo output: {made} (a new folder)" in proc.stdout, proc.stdout[-2000:]
    assert {k: v for k, v in tree(out).items() if not k.startswith("jaxcache-demo-2")} == before
    assert sorted(os.listdir(out)) == ["bench.json", "jaxcache-demo-1", "jaxcache-demo-2",
                                       "runs"]
    assert made.stat().st_mode & 0o777 == 0o700
    assert (made / "bench.json").is_file() and (made / "runs" / "trial-1").is_dir()


def test_one_file_named_twice_is_refused_and_an_empty_leftover_is_reused(tmp_path):
    marker = tmp_path / "ran"
    same = str(tmp_path / "x.json")
    proc = bench("--json", same, "--report", same, marker=marker)
    assert proc.returncode == 2 and "must name different files" in proc.stderr
    assert os.listdir(tmp_path) == []
    (tmp_path / "x.json").touch()  # what a killed bench leaves: its empty placeholder
    proc = bench("--json", same, marker=marker)
    assert proc.returncode in (0, 1), proc.stderr
    assert json.loads((tmp_path / "x.json").read_text())["schema"] == "jaxcache.bench/1"


@needs_root
def test_an_output_never_follows_another_users_link(base, accounts):
    """Issue 22: a symlinked parent folder of an output was followed. A link another user
    made on the way (here a's, in a folder a can write) is refused with one line, for a run
    record, a bench report and a key; nothing lands where it points. A link root (you) made
    is followed, as the user asked for it."""
    import pwd

    elsewhere = mkdir(base / "elsewhere", 0o755)
    shared = mkdir(base / "shared", 0o777)
    a = pwd.getpwnam(accounts.a)
    os.symlink(elsewhere, shared / "out")
    os.lchown(shared / "out", a.pw_uid, a.pw_gid)  # as if a had made it
    marker = base / "ran"
    proc = jaxcache("run", "-q", "--cache-dir", str(base / "c"), "--record",
                    str(shared / "out" / "r.json"), "--", "/bin/sh", "-c", JOB, str(marker))
    assert proc.returncode == 2 and not marker.exists(), proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert f"{shared / 'out'} is a symbolic link owned by uid {a.pw_uid}" in line, line
    proc = bench("--report", str(shared / "out" / "r.md"), marker=marker)
    assert proc.returncode == 2 and "symbolic link owned by uid" in proc.stderr
    proc = jaxcache("keygen", str(shared / "out" / "k" / "ci.key"))
    assert proc.returncode == 2 and "symbolic link owned by uid" in proc.stderr, proc.stderr
    assert list(elsewhere.iterdir()) == [] and not marker.exists()
    mine = base / "mine"
    os.symlink(elsewhere, mine)  # root's own link: followed
    proc = jaxcache("run", "-q", "--cache-dir", str(base / "c"), "--record",
                    str(mine / "r.json"), "--", "/bin/sh", "-c", JOB, str(marker))
    assert proc.returncode == 0 and (elsewhere / "r.json").is_file(), proc.stderr


@needs_root
def test_a_key_is_never_kept_in_another_users_folder(base, accounts):
    """The key folder was checked only for 'anyone can write and not sticky': a folder
    another user owns (mode 0755) passed, and its owner could then replace ci.key.pub. Now a
    key's folder, existing or made, must be yours or root's and writable by nobody else."""
    import pwd

    a = pwd.getpwnam(accounts.a)
    theirs = mkdir(base / "theirs", 0o755, accounts.a)
    proc = jaxcache("keygen", str(theirs / "ci.key"))
    assert proc.returncode == 2 and not list(theirs.iterdir()), proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert f"owner uid {a.pw_uid}" in line and "ci.key" not in os.listdir(theirs), line
    proc = jaxcache("keygen", str(theirs / "sub" / "ci.key"))  # not even a folder inside it
    assert proc.returncode == 2 and not list(theirs.iterdir()), proc.stderr
    mine = mkdir(base / "mine", 0o700)
    assert jaxcache("keygen", str(mine / "k" / "ci.key")).returncode == 0
    assert (mine / "k" / "ci.key.pub").is_file()
