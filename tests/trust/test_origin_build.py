"""A plain cache after jaxlib was rebuilt in place (issue 40, item 4): the origin ledger says
which build wrote each entry, so audit, ls and run flag "written by another build on this host".

Build A is this venv's jaxlib; build B the same files with bytes appended to the main shared
object (tests/support/builds.py): the same version string, so JAX's key is the same and B hits
A's entries. A watched job under A writes jit_f and jit_h; judged under A they are yours, same
build; under B they are flagged with both digests, `run --require-origin` refuses them before
the job, the in-job gate refuses them when they arrive after the audit, and a plain run still
works, its summary naming the modules that loaded another build's entries.
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
from support import builds
from support.jobs import JOB_TIMEOUT_S, clean_env
from support.ledgers import EVERY_COMPILE, TWO_JITS_JOB, TWO_JITS_OUTPUT, bound_ledger, judged
from support.users import mkdir

from jaxcache import fingerprint
from jaxcache.fingerprint.model import SHORT, Build, Cpu, Fingerprint
from jaxcache.trust.inputs import ledger as ledger_mod
from jaxcache.trust.judgement import origin_findings
from jaxcache.trust.provenance import ledger_file, origin
from jaxcache.trust.rules import ci

JAXCACHE = [sys.executable, "-m", "jaxcache"]
JOB, THRESHOLDS, EXPECTED = TWO_JITS_JOB, EVERY_COMPILE, TWO_JITS_OUTPUT


def _jc(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([*JAXCACHE, *args], capture_output=True, text=True, env=env,
                          timeout=JOB_TIMEOUT_S)


def _words(text: str) -> str:
    return " ".join(text.split())  # wrapped for the terminal


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Build B, one state folder, and a cache a watched job under build A wrote."""
    top = tmp_path_factory.mktemp("origin-build")
    state = mkdir(top / "state", 0o700)
    base = clean_env(XDG_STATE_HOME=str(state), NO_COLOR="1", **THRESHOLDS)
    for name in ci.VARIABLES:
        base.pop(name, None)
    site = builds.other_build(top)
    env = {"A": builds.build_env(None, base), "B": builds.build_env(site, base)}
    digest = {}
    for b in "AB":
        shown = _jc("fingerprint", "--format", "json", env=env[b])
        assert shown.returncode == 0, shown.stderr
        digest[b] = json.loads(shown.stdout)["build"]["digest"]
    assert digest["A"] != digest["B"], "build B must be another build"
    job = top / "job.py"
    job.write_text(JOB)
    cache = top / "cache"
    ran = _jc("run", "-q", "--cache-dir", str(cache), "--", sys.executable, str(job),
              env=env["A"])
    assert ran.returncode == 0 and ran.stdout == EXPECTED, ran.stderr
    names = sorted(n for n in os.listdir(cache) if n.endswith("-cache"))
    assert [n.split("-")[0] for n in names] == ["jit_f", "jit_h"], names
    return {"top": top, "state": state, "env": env, "digest": digest, "job": job,
            "cache": cache, "names": names}


def _audit(world: dict, b: str, *extra: str, cache: Path | None = None) -> dict:
    proc = _jc("audit", "--format", "json", "--no-processes", *extra,
               str(cache or world["cache"]), env=world["env"][b])
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def _other_build_sentence(world: dict) -> str:
    a, b = world["digest"]["A"][:SHORT], world["digest"]["B"][:SHORT]
    return f"another jaxlib build: digest {a} (writer) vs {b} (here)"


def test_under_the_writing_build_the_entries_are_yours_same_build(world):
    doc = _audit(world, "A")
    assert doc["verdict"] == "PRIVATE", doc["findings"]
    assert doc["origins"]["yours"] == 2
    assert doc["origins"]["build"]["digest"] == world["digest"]["A"]
    assert doc["origins"]["build"]["same"] == 2 and doc["origins"]["build"]["different"] == 0
    builds_of = {e["name"]: e["build"] for e in doc["entries"]["entries"] if e["build"]}
    assert set(builds_of) == set(world["names"])
    assert {b["outcome"] for b in builds_of.values()} == {"same"}
    assert not [f for f in doc["findings"] if f["code"].startswith("origin.")]
    listed = _jc("ls", str(world["cache"]), env=world["env"]["A"])
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "other-build" not in listed.stdout and "2 yours" in listed.stdout


def test_under_another_build_audit_and_ls_flag_them_with_both_digests(world):
    doc = _audit(world, "B")
    assert doc["verdict"] == "PRIVATE", doc["findings"]  # outside CI: a warning
    (found,) = [f for f in doc["findings"] if f["code"] == "origin.other-build"]
    assert found["effect"] == "warning"
    assert "2 entries written by another build on this host" in found["message"]
    assert _other_build_sentence(world) in found["message"]
    assert all(n in found["message"] for n in world["names"])
    assert "clear them, or keep one cache per fingerprint" in found["remedy"]
    assert doc["origins"]["build"]["different"] == 2
    assert doc["origins"]["build"]["digest"] == world["digest"]["B"]
    for e in doc["entries"]["entries"]:
        if e["name"] in world["names"]:
            assert e["origin"] == "yours" and e["build"]["outcome"] == "different"
            assert e["build"]["reason"] == _other_build_sentence(world)
    text = _jc("audit", "--no-processes", str(world["cache"]), env=world["env"]["B"])
    assert text.returncode == 0, text.stderr
    said = _words(text.stdout)
    assert "[warning] 2 entries written by another build on this host" in said
    assert _other_build_sentence(world) in said
    sarif = json.loads(_jc("audit", "--format", "sarif", "--no-processes", str(world["cache"]),
                           env=world["env"]["B"]).stdout)
    rules = {r["ruleId"] for run in sarif["runs"] for r in run["results"]}
    assert "origin.other-build" in rules
    strict = _audit(world, "B", "--require-origin")
    assert strict["verdict"] == "UNSAFE"
    listed = _jc("ls", str(world["cache"]), env=world["env"]["B"])
    assert listed.returncode == 1, listed.stdout + listed.stderr  # needs attention
    rows = [r for r in listed.stdout.splitlines() if r.rstrip().endswith(tuple(world["names"]))]
    assert len(rows) == 2 and all("other-build" in r and " yours " in r for r in rows), rows
    assert "2 of yours written by another build on this host" in listed.stdout
    ls_doc = json.loads(_jc("ls", "--format", "json", str(world["cache"]),
                            env=world["env"]["B"]).stdout)
    assert {e["build"]["outcome"] for e in ls_doc["entries"] if e["build"]} == {"different"}
    jsonschema = pytest.importorskip("jsonschema")
    from jaxcache.documents import schemas

    jsonschema.validate(doc, schemas.load("audit"))
    jsonschema.validate(ls_doc, schemas.load("ls"))


def test_run_require_origin_refuses_another_build_and_passes_the_writing_one(world, tmp_path):
    args = ["run", "--require-origin", "--cache-dir", str(world["cache"]), "--",
            sys.executable, str(world["job"])]
    refused = _jc(*args, env=world["env"]["B"])
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "A [" not in refused.stdout  # refused before the job
    said = _words(refused.stderr)
    assert "written by another build on this host" in said
    assert _other_build_sentence(world) in said
    assert "as --require-origin asks" in said
    assert "keep one cache per fingerprint" in said  # the way out
    record = tmp_path / "a.json"
    passed = _jc("run", "-q", "--record", str(record), *args[1:], env=world["env"]["A"])
    assert passed.returncode == 0 and passed.stdout == EXPECTED, passed.stderr
    outcomes = {m["name"]: m["outcome"] for m in json.loads(record.read_text())["modules"]}
    assert outcomes["jit_f"] == outcomes["jit_h"] == "hit", outcomes


def test_a_plain_run_under_another_build_works_and_names_the_hits(world, tmp_path):
    record = tmp_path / "b.json"
    ran = _jc("run", "--record", str(record), "--cache-dir", str(world["cache"]), "--",
              sys.executable, str(world["job"]), env=world["env"]["B"])
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == EXPECTED  # the job's output unchanged
    doc = json.loads(record.read_text())
    outcomes = {m["name"]: m["outcome"] for m in doc["modules"]}
    assert outcomes["jit_f"] == outcomes["jit_h"] == "hit", outcomes  # JAX's key is the same
    said = doc["cache_dir"]["origin"]
    assert {e["name"] for e in said["other_build"]} == set(world["names"])
    assert {e["reason"] for e in said["other_build"]} == {_other_build_sentence(world)}
    summary = ran.stderr
    assert "origin of the entries before the job: 2 yours (2 of yours written by another " \
           "build on this host)" in summary
    hit_lines = [ln for ln in summary.splitlines() if " hit " in ln]
    assert len(hit_lines) == 2 and all(
        "loaded an entry written by another build on this host" in ln for ln in hit_lines)


def test_the_in_job_gate_refuses_another_builds_entries_arriving_after_the_audit(world,
                                                                                tmp_path):
    """Under CI each load is judged by its bytes and, now, by the build its ledger line
    names: the very bytes A's watched job wrote, copied in after the audit passed, are a miss
    under build B (JAX compiles; the output is the job's own) and a hit under build A."""
    for b, loaded in (("B", False), ("A", True)):
        cache = mkdir(tmp_path / f"cache-{b}", 0o700)
        ready, go = tmp_path / f"ready-{b}", tmp_path / f"go-{b}"
        job = tmp_path / f"late-{b}.py"
        job.write_text(
            "import os, time, jax\n"  # past the gate: the audit has passed
            f"open({str(ready)!r}, 'w').close()\n"
            f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.01)\n" + JOB)
        record = tmp_path / f"late-{b}.json"
        proc = subprocess.Popen(
            [*JAXCACHE, "run", "-q", "--record", str(record), "--cache-dir", str(cache), "--",
             sys.executable, str(job)], env={**world["env"][b], "GITHUB_ACTIONS": "true"},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            while not ready.exists():
                assert proc.poll() is None, proc.communicate()
                time.sleep(0.01)
            for name in world["names"]:
                shutil.copy(world["cache"] / name, cache / name)
            go.touch()
            out, err = proc.communicate(timeout=JOB_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0 and out == EXPECTED, err
        outcomes = {m["name"]: m["outcome"] for m in json.loads(record.read_text())["modules"]}
        assert (outcomes["jit_f"] == "hit") is loaded, (b, outcomes)
        assert (outcomes["jit_h"] == "hit") is loaded, (b, outcomes)


# ---- the ledger's lines (no JAX job) -----------------------------------------------------------
def _fp(digest: str = "a" * 64, features: str = "sse2 avx") -> Fingerprint:
    return Fingerprint(Build(digest, (("jaxlib", "0.10.2"),)), "x86_64",
                       Cpu("GenuineIntel", "test", frozenset(features.split())))


def _cache_with_line(tmp_path: Path, version: str = ledger_file.VERSION,
                     writer: Fingerprint | None = None, describe: bool = True
                     ) -> tuple[Path, Path]:
    """A cache holding one entry and a ledger whose line (of `version`) vouches for it,
    naming `writer` (and, with `describe`, its fingerprint line)."""
    state = mkdir(tmp_path / "state", 0o700)
    cache = mkdir(tmp_path / "cache", 0o700)
    name = "jit_f-" + "a" * 64 + "-cache"
    body = b"compiled"
    (cache / name).write_bytes(body)
    st = os.stat(cache / name)
    w = ledger_file.Written(name, hashlib.sha256(body).hexdigest(), len(body),
                            (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns), 1.0,
                            str(cache), "", writer.id if writer else "")
    line = ledger_file.line(w)
    if version == "2":  # as jaxcache wrote them before lines named the build
        fields = line.rstrip(b"\n").split(b"\t")
        line = b"\t".join([b"2", *fields[1:10], fields[11]]) + b"\n"
    described = ledger_file.fingerprint_line(writer) if writer and describe else b""
    ledger = state / "origin.ledger"
    bound_ledger(ledger, described + line)
    return cache, ledger


def _judged_for(cache: Path, ledger: Path, reader: Fingerprint) -> origin.Origins:
    from jaxcache.trust.kernel import entries

    fd = os.open(cache, os.O_RDONLY | os.O_DIRECTORY)
    try:
        inv = entries.inventory(fd, str(cache), frozenset({0, os.geteuid()}),
                                entries.Accounts())
        return origin.judge(inv, fd, ledger_mod.load(str(ledger)), str(cache), reader)
    finally:
        os.close(fd)


def _findings(o: origin.Origins, **kw) -> dict:
    return {f.code: f for f in origin_findings.findings(o, "/c", ci=kw.get("ci"),
                                                        required=kw.get("required", False),
                                                        restored_from=())}


def test_old_lines_say_build_not_recorded(tmp_path):
    cache, ledger = _cache_with_line(tmp_path, "2")
    loaded = ledger_mod.load(str(ledger))
    assert loaded.skipped == 0 and len(loaded.by_name) == 1
    o = _judged_for(cache, ledger, fingerprint.current())
    (e,) = o.entries
    j = o.judgement(e)
    assert e.origin == "yours" and e.writer == "" and j is not None and not e.other_build
    assert j.outcome.value == "unknown" and "does not name the build" in j.reason
    note = _findings(o)["origin.build-unknown"]
    assert note.effect == "note" and "could not be compared" in note.message
    plain = judged(cache, ledger)  # no fingerprint given: not judged
    assert plain.judgement(plain.entries[0]) is None


def test_the_same_id_is_the_same_build_and_another_is_judged_by_its_line(tmp_path):
    here = _fp()
    for writer, outcome in ((here, "same"), (_fp("b" * 64), "different"),
                            (_fp(features="sse2"), "compatible"),  # a subset of here's
                            (_fp(features="sse2 avx avx512f"), "different")):
        top = mkdir(tmp_path / f"{writer.id}", 0o700)
        cache, ledger = _cache_with_line(top, writer=writer)
        o = _judged_for(cache, ledger, here)
        (e,) = o.entries
        j = o.judgement(e)
        assert j is not None and j.outcome.value == outcome, (writer, e)
        assert e.writer == writer.id and e.other_build is (outcome == "different")
        assert (e.build is None) is (outcome == "same")  # the same id: judged without the rule
    cache, ledger = _cache_with_line(mkdir(tmp_path / "undescribed", 0o700),
                                     writer=_fp("c" * 64), describe=False)
    o = _judged_for(cache, ledger, here)
    assert o.entries[0].other_build  # another id, not described: fail closed
    found = _findings(o, required=True)["origin.other-build"]
    assert found.effect == "unsafe" and "does not describe" in found.message
    assert "as --require-origin asks" in found.message


def test_a_judge_without_jaxlib_says_the_build_could_not_be_compared(tmp_path):
    cache, ledger = _cache_with_line(tmp_path, writer=_fp())
    o = _judged_for(cache, ledger, Fingerprint(None, "x86_64", Cpu()))
    j = o.judgement(o.entries[0])
    assert j is not None and j.outcome.value == "unknown" and not o.entries[0].other_build
    note = _findings(o)["origin.build-unknown"]
    assert "no jaxlib in this Python" in note.message and "origin.other-build" not in _findings(o)


def test_unknown_origin_says_nothing_is_known_of_the_build(tmp_path):
    cache, ledger = _cache_with_line(tmp_path, writer=_fp())
    (cache / ("jit_g-" + "d" * 64 + "-cache")).write_bytes(b"planted")
    o = _judged_for(cache, ledger, _fp())
    unknown = [e for e in o.entries if e.origin == "unknown"]
    assert len(unknown) == 1 and o.judgement(unknown[0]) is None
    assert "nothing is known of the build" in _findings(o)["origin.unknown"].message


@pytest.mark.parametrize("bad", [
    b"fingerprint\t" + b"a" * 15 + b"\t{}",  # a short id
    b"fingerprint\t" + b"A" * 16 + b"\t{}",  # not lower-case hex
    b"fingerprint\t" + b"a" * 16 + b"\t{\"build\": 1",  # torn
    b"fingerprint\t" + b"a" * 16 + b"\t{\"\xff\"}",  # not ASCII
    b"fingerprint\t" + b"a" * 16 + b"\t{" + b" " * ledger_file.MAX_LINE + b"}",  # too long
    b"fingerprint\t" + b"a" * 16,  # no document
])
def test_a_malformed_fingerprint_line_is_skipped(bad):
    data = bad + b"\n" + ledger_file.fingerprint_line(_fp())
    led = ledger_file.parse(data, "/l")
    assert (led.lines, led.skipped) == (2, 1)
    assert list(led.fingerprints) == [_fp().id] and led.fingerprints[_fp().id] == _fp()


@pytest.mark.parametrize("doc", [
    b"{}", b'{"a":[]}', b'{"build":{"digest":"xyz"},"machine":"x","cpu":{}}',
    b'{"build":null,"machine":"' + b"m" * 300 + b'","cpu":{"vendor":"","model":"",'
    b'"features":""}}',  # a field past its bound
])
def test_a_fingerprint_line_that_is_not_a_fingerprint_describes_nothing(doc, tmp_path):
    """Its bytes are well formed, its document is not a fingerprint: it is parsed only when an
    entry's line names its id, and then describes nothing (the id alone: another build)."""
    led = ledger_file.parse(b"fingerprint\t" + b"e" * 16 + b"\t" + doc + b"\n", "/l")
    assert led.skipped == 0 and led.fingerprints.get("e" * 16, "missing") is None


def test_a_line_whose_version_and_fields_disagree_is_skipped():
    w = ledger_file.Written("jit_f-" + "a" * 64 + "-cache", "b" * 64, 1, (1, 2, 3, 4), 1.5,
                            "/x", "", "f" * 16)
    fields = ledger_file.line(w).rstrip(b"\n").split(b"\t")
    v2_with_build = b"\t".join([b"2", *fields[1:]])
    v3_without = b"\t".join([*fields[:10], fields[11]])
    led = ledger_file.parse(v2_with_build + b"\n" + v3_without + b"\n" + ledger_file.line(w),
                            "/l")
    assert (led.lines, led.skipped) == (3, 2)
    assert led.by_name[w.name] == (w,)


def test_the_witness_describes_its_fingerprint_once_per_ledger(tmp_path):
    from jaxcache.lifecycle import witness

    ledger = tmp_path / "state" / "jaxcache" / "origin.ledger"
    mine = fingerprint.current()
    line = ledger_file.fingerprint_line(mine)
    assert line
    for i in range(3):
        w = ledger_file.Written(f"jit_{i}-" + "a" * 64 + "-cache", "b" * 64, 1, (1, 2, 3, 4),
                                1.5, "/x", "", mine.id)
        assert witness.append(str(ledger), w, line)
    data = ledger.read_bytes()
    assert data.count(b"\nfingerprint\t") == 1
    loaded = ledger_mod.load(str(ledger))
    assert loaded.skipped == 0
    described = loaded.fingerprints[mine.id]
    assert described is not None and described.id == mine.id  # recomputed from the line
    assert described.build is not None and mine.build is not None
    assert described.build.digest == mine.build.digest and described.cpu == mine.cpu


def test_seal_never_signs_another_builds_entries_as_its_own(world, tmp_path):
    """`jaxcache seal` claims its own build compiled what it signs: under build B the unsigned
    entries build A wrote are refused by name and nothing is signed; under A they are sealed
    with A's build."""
    cache = tmp_path / "cache"
    shutil.copytree(world["cache"], cache)
    os.chmod(cache, 0o700)
    for name in world["names"]:  # the ledger binds each entry's bytes, not its path
        assert (cache / name).read_bytes() == (world["cache"] / name).read_bytes()
    key = tmp_path / "keys" / "k.key"
    made = _jc("keygen", "-q", str(key), env=world["env"]["A"])
    assert made.returncode == 0, made.stderr
    before = sorted(os.listdir(cache))
    refused = _jc("seal", str(cache), "--signing-key", str(key), env=world["env"]["B"])
    assert refused.returncode == 2, refused.stdout + refused.stderr
    said = _words(refused.stderr)
    assert "refusing to seal" in said and "another build of jaxlib" in said, said
    assert world["names"][0] in said
    assert sorted(os.listdir(cache)) == before  # not one signature written
    sealed = _jc("seal", str(cache), "--signing-key", str(key), env=world["env"]["A"])
    assert sealed.returncode == 0, sealed.stdout + sealed.stderr
    shown = _jc("verify", "--format", "json", "--trusted-key", f"{key}.pub", str(cache),
                env=world["env"]["A"])
    assert shown.returncode == 0, shown.stdout + shown.stderr
    entries = json.loads(shown.stdout)["entries"]
    assert {e["status"] for e in entries} == {"valid"} and len(entries) == 2
