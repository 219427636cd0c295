"""The probe's folder (probe/probe_folder.py): whoever could put another folder at its path
would choose the code each process of the job runs, the cache it gets, and (through the
clean-up) which of your files are deleted. Found by an attack: TMPDIR under a project folder
a group may write (not sticky), a member renamed the run's folder away while the job ran and
put a sitecustomize, or a link to the victim's files, in its place."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from support.jobs import environ_without

from jaxcache.probe import launch, probe_folder


def _mkdir(path, mode):
    path.mkdir()
    path.chmod(mode)
    return path


def test_no_folder_is_made_below_a_directory_a_group_may_rename_from(tmp_path):
    team = _mkdir(tmp_path / "team", 0o2775)  # group-writable, not sticky: members rename
    mine = _mkdir(team / "victim", 0o755)  # yours, yet renamable by the group
    assert probe_folder.safe_root(str(mine)) is None
    sticky = _mkdir(tmp_path / "scratch", 0o1777)  # as /tmp: others rename only their own
    assert probe_folder.safe_root(str(_mkdir(sticky / "me", 0o700))) == str(sticky / "me")
    link = tmp_path / "link"
    link.symlink_to(sticky / "me")
    assert probe_folder.safe_root(str(link)) == str(sticky / "me")  # judged by its real path
    assert probe_folder.safe_root(str(link / "none")) is None


def test_run_puts_the_probe_folder_elsewhere_when_tmpdir_is_renamable(tmp_path):
    team = _mkdir(tmp_path / "team", 0o2775)
    tmpdir = _mkdir(team / "tmp", 0o700)
    cache = _mkdir(tmp_path / "cache", 0o700)
    env = {**os.environ, "TMPDIR": str(tmpdir), "XDG_STATE_HOME": str(tmp_path / "state")}
    env.pop("XDG_RUNTIME_DIR", None)
    proc = subprocess.run(
        [sys.executable, "-m", "jaxcache", "run", "-q", "--cache-dir", str(cache), "--record",
         str(tmp_path / "r.json"), "--", sys.executable, "-c",
         "import os; print(os.environ['JAXCACHE_PROBE_DIR'])"],
        capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    where = proc.stdout.strip()
    # in /tmp, in a folder of the user's own: one removed could not be made again by others
    assert not where.startswith(str(team)), where
    assert os.path.dirname(where) == f"/tmp/jaxcache-{os.geteuid()}", where


def test_the_clean_up_never_follows_what_was_put_in_the_folders_place(tmp_path):
    """The folder renamed away and a link to your files put at its path: the clean-up
    empties the folder it made (wherever it now is) and leaves the link and your files."""
    precious = _mkdir(tmp_path / "precious", 0o700)
    (precious / "thesis.tex").write_text("years of work")
    _mkdir(precious / "sub", 0o700)
    (precious / "sub" / "notes").write_text("more")
    folder = probe_folder.make([(probe_folder.__file__, "sitecustomize.py")])
    moved = tmp_path / "moved"
    os.rename(folder.path, moved)  # as the attacker did, then the link in its place
    os.symlink(precious, folder.path)
    try:
        probe_folder.remove(folder)
        assert os.path.islink(folder.path)  # not ours: left where it is
        assert sorted(p.name for p in precious.rglob("*")) == ["notes", "sub", "thesis.tex"]
        assert list(moved.iterdir()) == []  # ours, emptied through its descriptor
    finally:
        os.unlink(folder.path)


def test_documents_are_read_through_the_folder_never_through_a_link(tmp_path):
    elsewhere = tmp_path / "forged.json"
    elsewhere.write_text(json.dumps({"pid": 1, "forged": True}))
    folder = probe_folder.make([])
    try:
        os.symlink(elsewhere, os.path.join(folder.path, "probe-1.json"))
        with open(os.path.join(folder.path, "probe-2.json"), "w") as f:
            json.dump({"pid": 2, "started": 1.0}, f)
        assert launch._collect(folder, 2) == ({"pid": 2, "started": 1.0},)
    finally:
        probe_folder.remove(folder)
    assert not os.path.lexists(folder.path)  # gone once nothing raced in


def test_in_a_shared_root_the_folders_live_in_one_of_the_users_own(tmp_path):
    """A run's folder removed from a sticky directory could be made again by anyone, under
    the name a process its job left behind has on its PYTHONPATH: so there they are made in
    jaxcache-UID (0700), and one of that name someone else made is passed over."""
    shared = _mkdir(tmp_path / "shared", 0o1777)
    me = os.geteuid()
    assert probe_folder.private_parent(str(shared)) == str(shared / f"jaxcache-{me}")
    assert (shared / f"jaxcache-{me}").stat().st_mode & 0o777 == 0o700
    private = _mkdir(tmp_path / "mine", 0o700)
    assert probe_folder.private_parent(str(private)) == str(private)  # already no one else's
    taken = _mkdir(tmp_path / "taken", 0o1777)
    (taken / f"jaxcache-{me}").mkdir(mode=0o755)  # not private: as if another's
    chosen = probe_folder.private_parent(str(taken))
    assert os.path.dirname(chosen) == str(taken) and chosen != str(taken / f"jaxcache-{me}")
    assert os.stat(chosen).st_mode & 0o777 == 0o700


def test_the_probe_never_loads_from_the_folder_above_its_copy(tmp_path):
    """Once the job imports jax the probe loads recorder.py beside it (its copy in the run's
    folder), else from JAXCACHE_LIB: never from the folder above its own, which for a run's
    folder in /tmp is /tmp, where anyone may put a probe/recorder.py."""
    above = _mkdir(tmp_path / "above", 0o1777)
    planted = _mkdir(above / "probe", 0o755)
    (planted / "recorder.py").write_text("raise SystemExit('planted code ran')\n")
    here = _mkdir(above / "run", 0o700)
    site = os.path.join(os.path.dirname(launch.__file__), "site.py")
    with open(site, "rb") as f:
        (here / "sitecustomize.py").write_bytes(f.read())
    code = ("import sitecustomize as s\ntry:\n    s._load_beside("
            "'_jaxcache_probe_recorder.py', os.path.join('probe', 'recorder.py'))\n"
            "except ImportError:\n    print('refused')\n")
    env = environ_without("JAXCACHE_")
    proc = subprocess.run([sys.executable, "-c", "import os\n" + code], capture_output=True,
                          text=True, env={**env, "PYTHONPATH": str(here)})
    assert proc.returncode == 0 and proc.stdout == "refused\n", proc.stdout + proc.stderr


def test_the_users_own_folder_is_kept_and_made_whole_whatever_the_umask(tmp_path):
    """The usual name taken: the folder of its own an earlier run made is used again, not a
    new one each run; one made under a umask that takes the owner's bits is still 0700."""
    taken = _mkdir(tmp_path / "taken", 0o1777)
    me = os.geteuid()
    (taken / f"jaxcache-{me}").mkdir(mode=0o755)
    first = probe_folder.private_parent(str(taken))
    assert probe_folder.private_parent(str(taken)) == first
    assert sorted(p.name for p in taken.iterdir()) == sorted([f"jaxcache-{me}",
                                                              os.path.basename(first)])
    fresh = _mkdir(tmp_path / "fresh", 0o1777)
    old = os.umask(0o277)
    try:
        made = probe_folder.private_parent(str(fresh))
    finally:
        os.umask(old)
    assert os.stat(made).st_mode & 0o777 == 0o700
