"""The fingerprint: what it holds, the memo that makes a warm run cheap, and the rule.

Real files throughout: the installed jaxlib, build B (tests/support/builds.py: the same jaxlib
with bytes appended to its main shared object), state folders made here with the modes under
test. Nothing is timed: "cheap" is what the memo saves (files hashed: none), not seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support import builds
from support.jobs import JOB_TIMEOUT_S

from jaxcache import fingerprint, validate
from jaxcache.fingerprint import cpu, memo, rule
from jaxcache.fingerprint.model import Cpu, Fingerprint

X86 = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse sse2 avx avx2 avx512f amx_tile hypervisor constant_tsc vmx pti newfeature9

processor\t: 1
vendor_id\t: GenuineIntel
flags\t\t: fpu sse
"""
ARM = """processor\t: 0
BogoMIPS\t: 243.75
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics sve
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x1
CPU part\t: 0xd40
"""


def test_cpuinfo_instructions_kept_and_machine_facts_left_out():
    c = cpu.parse(X86.split("\n\n")[0])
    assert c.vendor == "GenuineIntel" and "8480+" in c.model
    assert {"avx512f", "amx_tile", "sse2"} <= c.features
    # facts about the machine, the clock, virtualization and mitigations are not instructions
    assert not {"hypervisor", "constant_tsc", "vmx", "pti"} & c.features
    assert "newfeature9" in c.features  # a word we do not know counts: fail closed
    arm = cpu.parse(ARM)
    assert arm.vendor == "0x41" and "0xd40" in arm.model and "sve" in arm.features


def test_cpuinfo_read_stops_at_the_first_processor(tmp_path):
    f = tmp_path / "cpuinfo"
    f.write_text(X86)
    assert cpu.read(str(f)).features == cpu.parse(X86.split("\n\n")[0]).features
    assert cpu.read(str(tmp_path / "missing")) == Cpu()


def _fp(features: set[str], digest: str = "a" * 64, machine: str = "x86_64") -> Fingerprint:
    from jaxcache.fingerprint.model import Build

    return Fingerprint(Build(digest), machine, Cpu("v", "m", frozenset(features)))


def test_rule_per_field():
    here = _fp({"sse2", "avx2", "avx512f"})
    assert rule.judge(here, here).outcome is rule.Outcome.SAME
    fewer = rule.judge(_fp({"sse2", "avx2"}), here)
    assert fewer.outcome is rule.Outcome.COMPATIBLE and fewer.loads
    more = rule.judge(_fp({"sse2", "avx2", "avx512f", "amx_tile"}), here)
    assert not more.loads and "amx_tile" in more.reason and "avx2" not in more.reason
    other = rule.judge(_fp({"sse2", "avx2", "avx512f"}, digest="b" * 64), here)
    assert not other.loads and "bbbbbbbbbbbbbbbb (writer) vs aaaaaaaaaaaaaaaa (here)" in \
        other.reason
    arch = rule.judge(_fp({"sse2"}, machine="aarch64"), here)
    assert not arch.loads and "aarch64" in arch.reason
    unknown = rule.judge(None, here)
    assert unknown.outcome is rule.Outcome.UNKNOWN and not unknown.loads
    no_jaxlib = Fingerprint(None, "x86_64", here.cpu)
    assert rule.judge(here, no_jaxlib).outcome is rule.Outcome.UNKNOWN
    # a writer that could not tell its CPU's features proves nothing by an empty set (a subset
    # of every host's); a reader that cannot tell them lacks the writer's
    blind = rule.judge(_fp(set()), here)
    assert blind.outcome is rule.Outcome.UNKNOWN and "CPU features" in blind.reason
    assert rule.judge(here, _fp(set())).outcome is rule.Outcome.DIFFERENT
    # both ways: explain and decide judge jobs that would share one cache
    fields = {d.field for d in rule.between(_fp({"sse2", "avx2"}), here)}
    assert fields == {rule.Field.CPU_FEATURES}


def test_rule_compares_the_backend_only_where_both_know_it():
    from jaxcache.fingerprint.model import Accelerator

    a = _fp({"sse2"}).with_accelerator(Accelerator("gpu", "cuda 12.4", "A100", "8.0"))
    b = _fp({"sse2"}).with_accelerator(Accelerator("gpu", "cuda 12.4", "H100", "9.0"))
    judged = rule.judge(a, b)
    assert not judged.loads and "compute capability: 8.0 (writer) vs 9.0 (here)" in judged.reason
    assert rule.judge(a, _fp({"sse2"})).loads  # the reader knows no backend: not compared


def test_document_round_trip_and_bad_documents():
    here = fingerprint.current()
    doc = json.loads(json.dumps(here.to_json()))
    back = Fingerprint.from_json(doc)
    assert back == here and back.id == here.id
    doc["id"] = "0" * 16  # a writer's claimed id is never taken
    assert Fingerprint.from_json(doc).id == here.id
    for broken in ({}, {**doc, "machine": 3}, {**doc, "build": {"digest": "zz"}},
                   {**doc, "cpu": {"vendor": "", "model": "", "features": "x" * 9000}}, []):
        with pytest.raises(validate.Invalid):
            Fingerprint.from_json(broken)


def test_the_installed_build_is_hashed_once_then_kept(tmp_path):
    state = str(tmp_path / "state")
    told: list[tuple[int, int]] = []
    first = fingerprint.current(state=state, fresh=True,
                                on_hashing=lambda size, n, _: told.append((size, n)))
    assert first.build is not None and first.build.versions
    main = builds.main_object(builds._jaxlib_folder())
    assert any(p.path == main.name or p.path.endswith("/" + main.name)
               for p in first.build.parts)
    # hashed, unless the install's owner kept its digests beside it (test_install_memo.py)
    if str(main) in memo.load_install(str(builds._jaxlib_folder().parent)):
        assert told == []
    else:
        assert len(told) == 1 and told[0][0] >= main.stat().st_size
    assert (tmp_path / "state" / memo.NAME).stat().st_mode & 0o777 == 0o600
    again: list[tuple[int, int]] = []
    second = fingerprint.current(state=state, fresh=True,
                                 on_hashing=lambda size, n, _: again.append((size, n)))
    assert second == first and second.id == first.id and not again and not second.notes


def _fingerprint_of(env: dict[str, str]) -> dict:
    proc = subprocess.run([sys.executable, "-m", "jaxcache", "fingerprint", "--format", "json"],
                          env=env, capture_output=True, text=True, timeout=JOB_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr
    return {"doc": json.loads(proc.stdout), "stderr": proc.stderr}


@pytest.fixture(scope="module")
def build_b(tmp_path_factory):
    return builds.other_build(tmp_path_factory.mktemp("builds"))


def test_another_build_of_the_same_version_is_told_apart(build_b, tmp_path):
    state = {"XDG_STATE_HOME": str(tmp_path / "state")}
    a = _fingerprint_of({**builds.build_env(None), **state})
    b = _fingerprint_of({**builds.build_env(build_b), **state})
    assert a["doc"]["build"]["versions"] == b["doc"]["build"]["versions"]
    assert a["doc"]["build"]["digest"] != b["doc"]["build"]["digest"]
    assert a["doc"]["id"] != b["doc"]["id"]
    changed = {p["path"] for p in a["doc"]["build"]["parts"]} == \
        {p["path"] for p in b["doc"]["build"]["parts"]}
    assert changed  # the same files, one of them with other bytes
    # the memo tells a changed file by its identity: one appended byte is hashed again
    main = builds.main_object(build_b / "jaxlib")
    with open(main, "ab") as f:
        f.write(b"\0")
    c = _fingerprint_of({**builds.build_env(build_b), **state})
    assert "hashing 1 shared object " in c["stderr"]
    assert c["doc"]["build"]["digest"] not in (a["doc"]["build"]["digest"],
                                               b["doc"]["build"]["digest"])
    d = _fingerprint_of({**builds.build_env(build_b), **state})
    assert "hashing" not in d["stderr"] and d["doc"]["id"] == c["doc"]["id"]


def test_a_memo_others_could_write_is_neither_read_nor_written(tmp_path):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    kept = fingerprint.current(state=str(state), fresh=True)
    planted = memo.load(str(state))
    assert planted.usable and planted.files
    # a forged memo naming other digests for the very same files
    doc = json.loads((state / memo.NAME).read_bytes())
    for value in doc["files"].values():
        value[5] = "f" * 64
    doc["derived"] = {}
    (state / memo.NAME).write_text(json.dumps(doc))
    state.chmod(0o777)  # anyone could have written it: it is not read
    found = fingerprint.current(state=str(state), fresh=True)
    # the forged digests are not read: hashed again, or taken from the install's own memo
    assert found == kept and any("digests not kept" in n for n in found.notes)
    assert json.loads((state / memo.NAME).read_bytes())["derived"] == {}  # not rewritten
    state.chmod(0o700)


def test_a_link_or_garbage_at_the_memo_is_never_followed_nor_trusted(tmp_path):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    target = tmp_path / "elsewhere"
    target.write_text("not yours to change")
    (state / memo.NAME).symlink_to(target)
    first = fingerprint.current(state=str(state), fresh=True)
    assert target.read_text() == "not yours to change"
    assert not (state / memo.NAME).is_symlink()  # replaced by a file of ours, by rename
    (state / memo.NAME).write_bytes(b"\xff{not json")
    assert fingerprint.current(state=str(state), fresh=True) == first
    (state / memo.NAME).unlink()
    (state / memo.NAME).mkdir()  # a folder opens; reading it fails: judged before any read
    assert fingerprint.current(state=str(state), fresh=True) == first
    (state / memo.NAME).rmdir()
    linked = tmp_path / "linked-state"
    linked.symlink_to(state)  # the state folder reached through a link of yours: resolved once
    assert memo.load(str(linked)).usable


def test_a_malformed_or_foreign_memo_is_ignored_never_trusted(tmp_path):
    """Each way a memo can be wrong (an older or buggy writer, or someone else's file) is
    dropped and hashed again: the fingerprint is the one a fresh state folder gives."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    first = fingerprint.current(state=str(state), fresh=True)
    good = json.loads((state / memo.NAME).read_bytes())
    assert first.build is not None and first.build.parts

    def spoiled(change) -> fingerprint.Fingerprint:
        doc = json.loads(json.dumps(good))
        change(doc)
        (state / memo.NAME).write_text(json.dumps(doc))
        (state / memo.NAME).chmod(0o600)
        return fingerprint.current(state=str(state), fresh=True)

    def roots_not_pairs(doc):
        for kept in doc["roots"].values():
            if "roots" in kept:
                kept["roots"] = [1]

    def no_folders_listed(doc):
        for kept in doc["roots"].values():
            if "dirs" in kept:
                kept["dirs"] = {}

    def digests_not_hex(doc):
        doc["derived"] = {k: "z" * 64 for k in doc["derived"]}
        for value in doc["files"].values():
            value[5] = "Z" * 64

    for change in (roots_not_pairs, no_folders_listed, digests_not_hex):
        assert spoiled(change) == first, change.__name__
    # a memo file others could write (its folder private): its digests are not read
    doc = json.loads(json.dumps(good))
    for value in doc["files"].values():
        value[5] = "f" * 64
    doc["derived"] = {}
    (state / memo.NAME).write_text(json.dumps(doc))
    (state / memo.NAME).chmod(0o666)
    assert fingerprint.current(state=str(state), fresh=True) == first


def test_what_run_hands_a_job_speaks_only_of_the_jaxlib_it_loaded(build_b):
    here = fingerprint.current()
    value = fingerprint.to_env(here)
    code = ("import sys, json, jaxlib; from jaxcache import fingerprint; "
            "got = fingerprint.inherited(sys.argv[1]); "
            "print(json.dumps(got.id if got else None))")
    same = subprocess.run([sys.executable, "-c", code, value], env=builds.build_env(None),
                          capture_output=True, text=True, timeout=JOB_TIMEOUT_S)
    other = subprocess.run([sys.executable, "-c", code, value], env=builds.build_env(build_b),
                           capture_output=True, text=True, timeout=JOB_TIMEOUT_S)
    assert json.loads(same.stdout) == here.id, same.stderr
    assert json.loads(other.stdout) is None, other.stderr  # build B's job computes its own
    assert fingerprint.inherited("{not json") is None and fingerprint.inherited(None) is None
    assert fingerprint.inherited("[" * 100_000) is None  # nested past Python's recursion limit
    # a rank on another node (srun, mpirun -x) or after a reboot, or a CPU that is not the one
    # the launcher read: computed again, never taken from the variable
    doc = json.loads(value)
    elsewhere = json.dumps({**doc, "host": "node-7 " + doc["host"].split()[-1]})
    fewer = json.dumps({**doc, "cpu": {**doc["cpu"], "features": ["sse2"]}})
    for lie in (elsewhere, fewer):
        proc = subprocess.run([sys.executable, "-c", code, lie], env=builds.build_env(None),
                              capture_output=True, text=True, timeout=JOB_TIMEOUT_S)
        assert json.loads(proc.stdout) is None, proc.stderr


def test_no_jaxlib_means_no_build_not_an_error(tmp_path):
    # the audit runs without JAX: a Python that cannot import jaxlib has no build to compare
    code = ("import sys; sys.modules['jaxlib'] = None; "
            "from jaxcache import fingerprint; f = fingerprint.current(state=sys.argv[1]); "
            "print(f.build is None, len(f.id))")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "s")],
                          capture_output=True, text=True, timeout=JOB_TIMEOUT_S,
                          env={**os.environ})
    assert proc.stdout.split() == ["True", "16"], proc.stderr
