"""`jaxcache gc` on real caches: real JAX jobs under `jaxcache run`, real files, real users.

A kept entry is a hit on the next warm run and an evicted one recompiles, with the job's output
unchanged; --dry-run changes nothing and plans the same; in a sticky shared directory only the
entries your ledger says your jobs wrote go, and another user's entry, a symlink, a FIFO, a
folder, a stray file and a copied-in entry of yours are reported and left as they are.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.jobs import clean_env, jaxcache
from support.ledgers import EVERY_COMPILE, TWO_JITS_JOB, TWO_JITS_OUTPUT
from support.users import IS_ROOT

pytest.importorskip("jax")


def _run(cache: Path, state: Path, record: Path, *extra: str) -> dict:
    """The two-jit job under `jaxcache run` (every compile written): its run record."""
    env = clean_env(XDG_STATE_HOME=str(state), **EVERY_COMPILE)
    proc = jaxcache("run", "-q", *extra, "--cache-dir", str(cache), "--record", str(record),
                    "--", sys.executable, "-c", TWO_JITS_JOB, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == TWO_JITS_OUTPUT  # the job's output, whatever the cache held
    return json.loads(record.read_text())


def _outcomes(record: dict) -> dict[str, str]:
    return {m["cache_key"]: m["outcome"] for m in record["modules"]}


def _gc(cache: Path, state: Path, *args: str) -> tuple[int, dict]:
    proc = jaxcache("gc", str(cache), *args, "--format", "json",
                    env=clean_env(XDG_STATE_HOME=str(state)))
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def _tree(root: Path) -> dict[str, str]:
    """Every name under `root` with what it is: a digest of the bytes, the link's target, or
    its kind (nothing is followed)."""
    out = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        if path.is_symlink():
            out[str(path)] = "link " + os.readlink(path)
        elif path.is_file():
            out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest() + f" {st.st_mode}"
        else:
            out[str(path)] = f"mode {st.st_mode:o}"
    return out


def _entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.iterdir() if p.name.endswith("-cache"))


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then), follow_symlinks=False)


def test_gc_by_size_and_by_age_and_the_next_warm_run(tmp_path):
    cache, state = tmp_path / "cache", tmp_path / "state"
    cold = _run(cache, state, tmp_path / "cold.json")
    written = {k for k, o in _outcomes(cold).items() if o == "written"}
    entries = _entries(cache)
    assert len(written) == len(entries) >= 2
    # one entry used long ago, the others recently (JAX's atime files, where there are
    # any, are aged with their entries: last use is the latest of the three mtimes)
    old = entries[0]
    for p in cache.iterdir():
        _age(p, 3600)
    _age(old, 40 * 86_400)
    for p in cache.glob(old.name[:-len("-cache")] + "*"):
        _age(p, 40 * 86_400)

    code, plan = _gc(cache, state, "--max-age", "30d", "--dry-run")
    assert code == 0 and plan["dry_run"] and [e["entry"] for e in plan["evicted"]] == [old.name]
    code, done = _gc(cache, state, "--max-age", "30d")
    assert code == 0 and done["evicted"] == plan["evicted"]  # the plan is what is done
    assert done["freed_bytes"] == plan["freed_bytes"] > 0
    assert not old.exists() and all(p.exists() for p in entries[1:])

    warm = _run(cache, state, tmp_path / "warm.json")
    outcomes = _outcomes(warm)
    evicted_key = old.name[:-len("-cache")]
    assert outcomes[evicted_key] == "written"  # recompiled, and written again
    assert all(o == "hit" for k, o in outcomes.items() if k != evicted_key)

    # by size: the least recently used go first, until the directory fits; the warm run's
    # loads are uses too where the filesystem keeps read times
    sizes = {p.name: p.stat().st_size for p in _entries(cache)}
    reads = _keeps_read_times(cache)
    newest = max(_entries(cache), key=lambda p: max(p.stat().st_mtime_ns,
                                                    p.stat().st_atime_ns if reads else 0))
    code, done = _gc(cache, state, "--max-size", str(sizes[newest.name]))
    assert code == 0 and done["after_bytes"] <= sizes[newest.name]
    assert [p.name for p in _entries(cache)] == [newest.name]
    last = _run(cache, state, tmp_path / "last.json")
    assert _outcomes(last)[newest.name[:-len("-cache")]] == "hit"


def test_dry_run_changes_nothing_and_nothing_unasked(tmp_path):
    cache, state = tmp_path / "cache", tmp_path / "state"
    _run(cache, state, tmp_path / "cold.json")
    before = _tree(cache)
    code, plan = _gc(cache, state, "--max-size", "1", "--dry-run")
    assert (code == 1) == (plan["over_by_bytes"] > 0)
    assert len(plan["evicted"]) == len(_entries(cache))
    assert _tree(cache) == before
    refused = jaxcache("gc", str(cache), env=clean_env(XDG_STATE_HOME=str(state)))
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "--max-size" in refused.stderr and _tree(cache) == before
    for bad in (["--max-size", "ten"], ["--max-age", "-3d"], ["--max-size", "1", "--max-age", "x"],
                ["--max-size", "9" * 400], ["--max-age", "9" * 30 + "d"],
                ["--max-age", "30d", "--lifecycle-rule"]):
        proc = jaxcache("gc", str(cache), *bad, env=clean_env(XDG_STATE_HOME=str(state)))
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert "Traceback" not in proc.stderr and _tree(cache) == before
    bucket = jaxcache("gc", "gs://Not_A_Bucket/jax", "--max-age", "1d",
                      env=clean_env(XDG_STATE_HOME=str(state)))
    assert bucket.returncode == 2 and bucket.stderr.count("\n") == 1, bucket.stderr
    whole = jaxcache("gc", "s3://whole-bucket", "--max-age", "30d", "--lifecycle-rule",
                     env=clean_env(XDG_STATE_HOME=str(state)))
    assert whole.returncode == 2 and "prefix" in whole.stderr and whole.stdout == ""
    link = tmp_path / "link"
    link.symlink_to(cache)
    proc = jaxcache("gc", str(link), "--max-size", "1", env=clean_env(XDG_STATE_HOME=str(state)))
    assert proc.returncode == 2 and "symbolic link" in proc.stderr and _tree(cache) == before


@pytest.mark.skipif(not IS_ROOT, reason="needs root to make another user's files")
def test_shared_sticky_directory_only_your_own_entries_go(tmp_path, accounts):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # like /tmp: everyone writes, each deletes only their own
    state = tmp_path / "state"
    _run(shared, state, tmp_path / "cold.json", "--allow-untrusted")
    mine = _entries(shared)
    assert mine
    key = "f" * 64
    theirs = shared / f"jit_theirs-{key}-cache"
    theirs.write_bytes(b"x" * 10)
    shutil.chown(theirs, accounts.b)
    copied = shared / f"jit_copied-{'e' * 64}-cache"  # yours, but no job of yours wrote it
    copied.write_bytes(mine[0].read_bytes())
    (shared / f"jit_link-{'d' * 64}-cache").symlink_to("/etc/passwd")
    os.mkfifo(shared / f"jit_fifo-{'c' * 64}-cache")
    (shared / f"jit_dir-{'b' * 64}-cache").mkdir()
    (shared / "notes.txt").write_text("not an entry\n")
    before = _tree(shared)

    code, done = _gc(shared, state, "--max-size", "1")
    assert done["shared"] is True
    assert sorted(e["entry"] for e in done["evicted"]) == sorted(p.name for p in mine)
    assert code == 1 and done["over_by_bytes"] > 0  # what is left is not gc's to delete
    left = {f["name"]: f["why"] for f in done["left"]}
    assert "not written by a job of yours" in left[copied.name]
    assert "not you" in left[theirs.name] and "symbolic link" in left[f"jit_link-{'d' * 64}-cache"]
    assert "FIFO" in left[f"jit_fifo-{'c' * 64}-cache"]
    assert "directory" in left[f"jit_dir-{'b' * 64}-cache"] and "notes.txt" in left
    after = _tree(shared)
    gone = {k for k in before if k not in after}
    assert gone == {str(p) for p in mine} | {k for k in before if any(
        k.startswith(str(p)[:-len("-cache")]) for p in mine)}
    assert {k: v for k, v in before.items() if k not in gone} == after  # the rest untouched


def test_a_sealed_directory_loses_whole_units_and_verifies_clean(tmp_path):
    """A publisher's sealed directory: an entry goes with its signature (never one without the
    other); an old signature whose entry is gone (a killed gc) is removed, a fresh one (a
    publish in progress: the signature is written first) is left; `verify` is clean after,
    and a sealed reader hits what was kept."""
    state, keys = tmp_path / "state", tmp_path / "keys"
    made = jaxcache("keygen", str(keys / "ci.key"), env=clean_env(XDG_STATE_HOME=str(state)))
    assert made.returncode == 0, made.stderr
    pub = (keys / "ci.key.pub").read_text().strip()
    sealed = tmp_path / "sealed"
    sealed.mkdir(mode=0o700)
    _run(sealed, state, tmp_path / "publish.json", "--sealed", "--signing-key",
         str(keys / "ci.key"))
    entries = _entries(sealed)
    assert len(entries) >= 2 and all(Path(f"{p}.sig").exists() for p in entries)
    for p in sealed.iterdir():
        _age(p, 3600)
    keep = entries[-1]
    for p in sealed.glob(keep.name + "*"):
        _age(p, 60)  # used a minute ago: the newest
    stale = sealed / f"jit_gone-{'a' * 64}-cache.sig"
    stale.write_bytes(Path(f"{entries[0]}.sig").read_bytes())
    _age(stale, 600)
    fresh = sealed / f"jit_coming-{'b' * 64}-cache.sig"
    fresh.write_bytes(Path(f"{entries[0]}.sig").read_bytes())

    unit = sum(p.stat().st_size for p in sealed.glob(keep.name + "*"))  # + .sig, .used
    code, done = _gc(sealed, state, "--max-size", str(unit + fresh.stat().st_size))
    assert code == 0, done
    gone = {e["entry"] for e in done["evicted"]}
    assert gone == {p.name for p in entries[:-1]}
    for e in done["evicted"]:
        assert e["files"][0] == e["entry"] and f"{e['entry']}.sig" in e["files"]
    assert done["orphans_removed"] == [stale.name] and not stale.exists()
    assert fresh.exists() and any(f["name"] == fresh.name for f in done["left"])
    assert [p.name for p in _entries(sealed)] == [keep.name]
    assert not any(Path(f"{p}.sig").exists() for p in entries[:-1])
    fresh.unlink()
    verified = jaxcache("verify", str(sealed), "--trusted-key", pub, "--format", "json",
                        env=clean_env(XDG_STATE_HOME=str(state)))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    read = _run(sealed, state, tmp_path / "read.json", "--sealed", "--trusted-key", pub)
    assert _outcomes(read)[keep.name[:-len("-cache")]] == "hit"


def test_run_collects_after_the_job_and_keeps_its_exit_status(tmp_path):
    cache, state = tmp_path / "cache", tmp_path / "state"
    _run(cache, state, tmp_path / "cold.json")
    entries = _entries(cache)
    for p in cache.iterdir():
        _age(p, 40 * 86_400)  # none of them used since: the next job uses none of them
    env = clean_env(XDG_STATE_HOME=str(state), **EVERY_COMPILE)
    proc = jaxcache("run", "--max-age", "30d", "--cache-dir", str(cache), "--record",
                    str(tmp_path / "r.json"), "--", sys.executable, "-c",
                    "import sys; sys.exit(3)", env=env)
    assert proc.returncode == 3  # the job's status, not gc's
    assert "jaxcache: gc: freed" in proc.stderr and not any(p.exists() for p in entries)
    warm = _run(cache, state, tmp_path / "again.json", "--max-size", "1G")
    assert set(_outcomes(warm).values()) == {"written"}  # recompiled, kept under 1 GB
    assert len(_entries(cache)) == len(entries)
    bad = jaxcache("run", "--max-size", "lots", "--cache-dir", str(cache), "--", "true",
                   env=env)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "not a size" in bad.stderr
    sealed = jaxcache("run", "--sealed", "--max-age", "1d", "--cache-dir", str(cache), "--",
                      "true", env=env)
    assert sealed.returncode == 2 and "jaxcache gc" in sealed.stderr


OTHER_JOB = """
import jax, jax.numpy as jnp
print(float(jax.jit(lambda x: jnp.sin(x).sum() * 3)(jnp.arange(8.0))))
"""


def test_a_limit_below_the_jobs_working_set_never_evicts_what_it_used(tmp_path):
    """`run --max-size` under what the job's own entries take: gc after the job deletes what
    other jobs left (least recently used first) but never an entry this job loaded or wrote,
    and says the limit cannot hold the job, so the next run hits instead of compiling again
    (it deleted one of them after every run, and the next run compiled it again)."""
    cache, state = tmp_path / "cache", tmp_path / "state"
    env = clean_env(XDG_STATE_HOME=str(state), **EVERY_COMPILE)
    other = jaxcache("run", "-q", "--cache-dir", str(cache), "--", sys.executable, "-c",
                     OTHER_JOB, env=env)
    assert other.returncode == 0, other.stderr
    stale = _entries(cache)
    for path in stale:
        _age(path, 3600)  # used an hour ago: the least recently used
    for name in ("cold", "warm"):
        proc = jaxcache("run", "-q", "--max-size", "1", "--cache-dir", str(cache), "--record",
                        str(tmp_path / f"{name}.json"), "--", sys.executable, "-c",
                        TWO_JITS_JOB, env=env)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == TWO_JITS_OUTPUT
        record = json.loads((tmp_path / f"{name}.json").read_text())
        used = {k for k, o in _outcomes(record).items() if o in ("hit", "written")}
        assert {p.name[:-len("-cache")] for p in _entries(cache)} == used, proc.stderr
        said = " ".join(proc.stderr.split())
        assert "jaxcache: gc: the limit cannot hold what this job used:" in said, said
        assert f"in {len(used)} entries, kept" in said and "max_size) of at least" in said
    others = [p for p in stale if p.name[:-len("-cache")] not in used]
    assert others and not any(p.exists() for p in others)  # not this job's: they went
    assert set(_outcomes(record).values()) == {"hit"}  # the warm run compiled nothing again


def test_a_limit_that_lasts_in_the_project_file_holds_for_every_run_and_enable(tmp_path):
    """[tool.jaxcache.gc] max_size, set once for the project's cache (as `ccache -M`): a plain
    `jaxcache run` and a plain enable() apply it after their job, as --max-size would: what
    other jobs left goes, what the job itself used stays (the limit cannot hold it: said)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[tool.jaxcache]\ncache_dir = "cache"\n[tool.jaxcache.gc]\nmax_size = "1"\n')
    cache, state = project / "cache", tmp_path / "state"
    env = clean_env(XDG_STATE_HOME=str(state), **EVERY_COMPILE)

    def entries() -> set[str]:
        return {p.name for p in _entries(cache)}

    first = jaxcache("run", "--", sys.executable, "-c", OTHER_JOB, env=env, cwd=str(project))
    assert first.returncode == 0, first.stderr
    others = entries()
    assert others and "the limit cannot hold what this job used" in first.stderr
    for path in cache.iterdir():
        _age(path, 3600)
    second = jaxcache("run", "--", sys.executable, "-c", TWO_JITS_JOB, env=env,
                      cwd=str(project))
    assert second.returncode == 0 and second.stdout == TWO_JITS_OUTPUT, second.stderr
    mine = entries()
    assert mine and not mine & (others - mine), (others, mine)  # the first job's went
    for path in cache.iterdir():
        _age(path, 3600)
    elsewhere = tmp_path / "elsewhere"  # a cache the project file does not name: not its
    named = jaxcache("run", "--cache-dir", str(elsewhere), "--", sys.executable, "-c", OTHER_JOB,
                     env=env, cwd=str(project))
    assert named.returncode == 0 and "jaxcache: gc" not in named.stderr, named.stderr
    assert len(list(elsewhere.iterdir())) == len(others)
    (project / "job.py").write_text(OTHER_JOB)
    enabled = subprocess.run([sys.executable, "-c", "import jax, jaxcache; "
                              "jaxcache.enable(); exec(open('job.py').read())"],
                             env=env, cwd=str(project), capture_output=True, text=True,
                             timeout=600)
    assert enabled.returncode == 0, enabled.stderr
    assert "cannot hold what this process used" in enabled.stderr, enabled.stderr
    assert entries() == others  # at exit: the other job's entries went, this one's stayed


def _keeps_read_times(path: Path) -> bool:
    """What findmnt (util-linux, not jaxcache) says of the mount: not noatime."""
    options = subprocess.run(["findmnt", "-no", "OPTIONS", "-T", str(path)],
                             capture_output=True, text=True, check=True).stdout
    return "noatime" not in options.strip().split(",")


def test_last_use_of_a_cache_plain_jax_loads_is_its_read_time_never_its_write_time(tmp_path):
    """A cache used by plain JAX (JAX_COMPILATION_CACHE_DIR, no size limit: JAX writes no
    -atime files) and loaded today, but written 90 days ago: gc --max-age 30d keeps what was
    loaded, by the filesystem's read time, and says which clock it used; an entry only ever
    written 90 days ago goes, said as written, not used (it said `last used 90d ago` of
    entries a job loaded every day)."""
    cache, state = tmp_path / "cache", tmp_path / "state"
    plain = clean_env(JAX_COMPILATION_CACHE_DIR=str(cache), **EVERY_COMPILE)
    for job in (OTHER_JOB, TWO_JITS_JOB):
        done = subprocess.run([sys.executable, "-c", job], env=plain, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
    entries = _entries(cache)
    for path in cache.iterdir():
        _age(path, 90 * 86_400)  # read and written 90 days ago
    before = {p.name: p.stat().st_atime_ns for p in entries}
    loaded = subprocess.run([sys.executable, "-c", TWO_JITS_JOB], env=plain,
                            capture_output=True, text=True, timeout=600)
    assert loaded.returncode == 0 and loaded.stdout == TWO_JITS_OUTPUT, loaded.stderr[-2000:]
    read = {p.name for p in entries if p.stat().st_atime_ns != before[p.name]}
    code, plan = _gc(cache, state, "--max-age", "30d", "--dry-run")
    evicted = {u["entry"]: u["last_used_by"] for u in plan["evicted"]}
    assert plan["read_times"] == _keeps_read_times(cache)
    if plan["read_times"]:
        assert read and len(read) < len(entries)  # the loaded ones: the other job's were not
        assert set(evicted) == {p.name for p in entries} - read, (evicted, read)
        assert plan["last_used_by"]["read"] == len(read)
    else:  # noatime: nothing but the write time is known, and gc says so
        assert set(evicted) == {p.name for p in entries}
    assert set(evicted.values()) == {"written"}
    text = jaxcache("gc", str(cache), "--max-age", "30d", "--dry-run",
                    env=clean_env(XDG_STATE_HOME=str(state))).stdout
    assert "  last use: " in text and "written, no load known since" in text, text
    assert "last written 90d ago" in text and "last used" not in text, text


def test_enable_collects_when_the_process_ends(tmp_path):
    """enable(path, max_age=...) in the job itself: the old entries are gone once it exits,
    what it just used stays; bad limits are one clear error before anything is enabled."""
    cache, state = tmp_path / "cache", tmp_path / "state"
    _run(cache, state, tmp_path / "cold.json")
    old = _entries(cache)
    for p in cache.iterdir():
        _age(p, 40 * 86_400)
    job = ("import jaxcache, jax, numpy as np, sys\n"
           f"jaxcache.enable({str(cache)!r}, max_age='30d')\n"
           "print(jax.jit(lambda x: x * 5)(np.arange(3.0)).tolist())\n")
    env = clean_env(XDG_STATE_HOME=str(state), **EVERY_COMPILE)
    proc = subprocess.run([sys.executable, "-c", job], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == "[0.0, 5.0, 10.0]\n"
    left = _entries(cache)
    assert not any(p in left for p in old) and len(left) == 1  # its own new entry stays
    bad = subprocess.run([sys.executable, "-c", "import jaxcache; jaxcache.enable("
                          f"{str(cache)!r}, max_size='huge')"], capture_output=True, text=True,
                         env=env, timeout=300)
    assert bad.returncode != 0 and "not a size: 'huge'" in bad.stderr
    assert _entries(cache) == left


def _records_job(cache: Path, state: Path) -> dict:
    """The two-jit job under `jaxcache run`, its record kept where gc reads records (the state
    directory's runs/): that record."""
    env = clean_env(XDG_STATE_HOME=str(state), **EVERY_COMPILE)
    proc = jaxcache("run", "-q", "--cache-dir", str(cache), "--", sys.executable, "-c",
                    TWO_JITS_JOB, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    newest = max((state / "jaxcache" / "runs").glob("*.json"), key=lambda p: p.name)
    return json.loads(newest.read_text())


def test_run_records_count_as_use_and_price_what_gc_frees(tmp_path):
    """A hit in a run record is a use (entries whose own times are old stay); the report says
    what the evicted entries took to compile, from the records; --order value evicts the
    least compile time per byte first."""
    cache, state = tmp_path / "cache", tmp_path / "state"
    cold = _records_job(cache, state)
    compiled = {m["cache_key"] + "-cache": m["compile_or_load_s"] for m in cold["modules"]
                if m["outcome"] == "written"}
    assert len(compiled) >= 2 and set(compiled) == {p.name for p in _entries(cache)}
    for p in cache.iterdir():
        _age(p, 40 * 86_400)  # every file's own time says: unused for 40 days
    warm = _records_job(cache, state)  # ... but this run loads them all
    assert all(m["outcome"] == "hit" for m in warm["modules"] if m["cache_key"])
    for p in cache.iterdir():
        _age(p, 40 * 86_400)  # JAX touched its -atime files on load: old again
    code, kept = _gc(cache, state, "--max-age", "30d", "--dry-run")
    assert code == 0 and kept["evicted"] == []  # the records' hits are recent
    elsewhere = tmp_path / "other-state"  # no records: only the files' own times
    code, plan = _gc(cache, elsewhere, "--max-age", "30d", "--dry-run")
    assert sorted(e["entry"] for e in plan["evicted"]) == sorted(compiled)
    assert plan["recompile_s"] == 0 and plan["unpriced_entries"] == len(compiled)

    code, lru = _gc(cache, state, "--max-age", "0", "--dry-run")
    assert lru["recompile_s"] == round(sum(compiled.values()), 3)
    assert lru["unpriced_entries"] == 0
    text = jaxcache("gc", str(cache), "--max-age", "0", "--dry-run",
                    env=clean_env(XDG_STATE_HOME=str(state)))
    assert "the next start of the jobs that used them recompiles ~" in text.stdout

    sizes = {e["entry"]: e["bytes"] for e in lru["evicted"]}
    # value: compile seconds per byte kept (one run compiled each, two asked): least first
    by_value = sorted(compiled, key=lambda n: (compiled[n] / sizes[n], n))
    code, value = _gc(cache, state, "--max-size", "1", "--order", "value", "--dry-run")
    assert value["order"] == "value"
    assert [e["entry"] for e in value["evicted"]] == by_value


def test_audit_and_run_say_when_a_grown_cache_has_no_limit(tmp_path):
    cache, state = tmp_path / "cache", tmp_path / "state"
    _run(cache, state, tmp_path / "cold.json")
    env = clean_env(XDG_STATE_HOME=str(state))
    quiet = jaxcache("audit", str(cache), env=env)
    assert "nothing limits its size" not in quiet.stdout  # small: no line
    big = cache / ("jit_big-" + "7" * 64 + "-cache")
    with big.open("wb") as f:
        f.truncate(1_000_000_000)  # sparse: 1 GB by its size, nothing on disk
    said = jaxcache("audit", str(cache), env=env)
    assert "nothing limits its size" in said.stdout and "jaxcache gc" in said.stdout
    limited = jaxcache("audit", str(cache),
                       env={**env, "JAX_COMPILATION_CACHE_MAX_SIZE": str(2 * 10**9)})
    assert "nothing limits its size" not in limited.stdout
    run_env = clean_env(XDG_STATE_HOME=str(state), **EVERY_COMPILE)
    proc = jaxcache("run", "--cache-dir", str(cache), "--", sys.executable, "-c",
                    TWO_JITS_JOB, env=run_env)
    assert proc.returncode == 0 and proc.stdout == TWO_JITS_OUTPUT
    assert "nothing limits its size" in proc.stderr
    in_code = ("import jax\njax.config.update('jax_compilation_cache_max_size', 2 * 10**9)\n"
               + TWO_JITS_JOB)  # the limit set by the job itself, not the environment
    limited_run = jaxcache("run", "--cache-dir", str(cache), "--", sys.executable, "-c",
                           in_code, env=run_env)
    assert limited_run.returncode == 0 and limited_run.stdout == TWO_JITS_OUTPUT
    assert "nothing limits its size" not in limited_run.stderr
    gc_after = jaxcache("run", "--cache-dir", str(cache), "--max-age", "30d", "--",
                        sys.executable, "-c", TWO_JITS_JOB, env=run_env)
    assert gc_after.returncode == 0 and "nothing limits its size" not in gc_after.stderr


def test_gc_frees_no_more_than_the_limit_needs(tmp_path):
    """A small entry used long ago, a large one used since, a recent one: with the limit 150 KB
    under what they hold, deleting the large one is enough, so the small old one stays (least
    recently used alone deleted both: 70 KB more than needed)."""
    cache, state = tmp_path / "cache", tmp_path / "state"
    cache.mkdir(mode=0o700)
    sizes = {"jit_init_params": 70_000, "jit_train_step": 450_000, "jit_eval_step": 365_000}
    for age, (name, size) in zip((3, 2, 1), sizes.items(), strict=True):
        path = cache / f"{name}-{name.encode().hex():0<64}-cache"
        path.write_bytes(os.urandom(size))
        _age(path, age * 86_400)
    total = sum(sizes.values())
    code, done = _gc(cache, state, "--max-size", str(total - 150_000))
    assert code == 0, done
    assert [e["entry"].split("-")[0] for e in done["evicted"]] == ["jit_train_step"]
    assert done["freed_bytes"] == 450_000 and done["after_bytes"] == total - 450_000
    assert sorted(p.name.split("-")[0] for p in _entries(cache)) == \
        ["jit_eval_step", "jit_init_params"]


def test_verify_reads_a_sealed_directory_without_counting_as_a_use(tmp_path):
    """`jaxcache verify` reads every entry to check it; where the filesystem keeps read times,
    that read must leave them (O_NOATIME), or gc would count every verify as a load and keep
    entries no job has loaded for months."""
    if not _keeps_read_times(tmp_path):
        pytest.skip("this filesystem keeps no read times (noatime): nothing to move")
    state, keys = tmp_path / "state", tmp_path / "keys"
    made = jaxcache("keygen", str(keys / "ci.key"), env=clean_env(XDG_STATE_HOME=str(state)))
    assert made.returncode == 0, made.stderr
    sealed = tmp_path / "sealed"
    sealed.mkdir(mode=0o700)
    _run(sealed, state, tmp_path / "publish.json", "--sealed", "--signing-key",
         str(keys / "ci.key"))
    for p in sealed.iterdir():
        _age(p, 90 * 86_400)
    entries = _entries(sealed)
    before = {p.name: p.stat().st_atime_ns for p in entries}
    verified = jaxcache("verify", str(sealed), "--trusted-key", str(keys / "ci.key.pub"),
                        env=clean_env(XDG_STATE_HOME=str(state)))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert {p.name: p.stat().st_atime_ns for p in entries} == before
    code, plan = _gc(sealed, state, "--max-age", "30d", "--dry-run")
    assert {e["entry"] for e in plan["evicted"]} == {p.name for p in entries}
    entries[0].read_bytes()  # a plain read here is a use: the clock the test watches moves
    assert entries[0].stat().st_atime_ns != before[entries[0].name]
