"""Every parser of a document a writer controls, fuzzed; and the cases it found, through the
commands a user runs.

- The corpus (tests/attacks/fuzz_corpus/<target>/: real documents from real runs, and every input
  that once broke jaxcache) is replayed in-process through each target
  (tests/attacks/fuzz_targets.py).
- Each target is then fuzzed by atheris (coverage-guided, structure-aware:
  tests/attacks/fuzz_run.py) for a fixed count of inputs, not a time: 10,000 per target, under an
  RSS limit. Any exception but jaxcache's own one-line error, or memory over the limit, fails the
  test with the input written beside it.
- The classes of input the fuzzer found go through the real commands (records list and stats,
  explain, audit --policy, verify) and must end in one line or a named, skipped file.
"""

from __future__ import annotations

import copy
import json
import os
import pwd
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.jobs import jaxcache
from support.users import mkdir

from attacks import fuzz_targets

HERE = Path(__file__).parent
RUNS = 10_000  # inputs per target, each run (the acceptance: >= 10,000 each in total)
RSS_LIMIT_MB = 512  # a fuzzing process peaks at ~55 MB here


@pytest.mark.parametrize("target", sorted(fuzz_targets.TARGETS))
def test_corpus_replays_through_every_reader(target):
    inputs = fuzz_targets.corpus(target)
    assert inputs, f"no corpus for {target}"
    for data in inputs:
        fuzz_targets.one(fuzz_targets.TARGETS[target], data)


def _fuzz(target: str, where: Path) -> subprocess.Popen:
    found = where / "found"  # new inputs go here, never into tests/
    found.mkdir(parents=True)
    # through a shell that forks it: a direct child inherits this process's peak RSS (Linux
    # keeps ru_maxrss across fork and exec), and libFuzzer's limit would judge pytest's size
    with open(where / "log", "wb") as log:
        return subprocess.Popen(
            ["sh", "-c", '"$@"; exit $?', "sh",
             sys.executable, str(HERE / "fuzz_run.py"), target, f"-runs={RUNS}",
             f"-rss_limit_mb={RSS_LIMIT_MB}", "-seed=20261202", f"-artifact_prefix={where}/",
             "-print_final_stats=1", str(found), str(fuzz_targets.CORPUS / target)],
            stdout=subprocess.DEVNULL, stderr=log, cwd=HERE,
            env={**os.environ, "PYTHONHASHSEED": "0"})  # with -seed: the same inputs each run


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory) -> dict[str, tuple[int, str, list[str]]]:
    """Every target fuzzed, as many at once as there are CPUs: exit code, log, crash files."""
    pytest.importorskip("atheris")
    root = tmp_path_factory.mktemp("fuzz")
    waiting, running, done = sorted(fuzz_targets.TARGETS), {}, {}
    deadline = time.monotonic() + 1800  # a hang guard only: the count of inputs bounds the work
    while waiting or running:
        while waiting and len(running) < max(1, os.cpu_count() or 1):
            name = waiting.pop(0)
            running[name] = _fuzz(name, root / name)
        for name, proc in list(running.items()):
            if proc.poll() is None and time.monotonic() < deadline:
                continue
            if proc.returncode is None:
                proc.kill()
                proc.wait()
            del running[name]
            log = (root / name / "log").read_text(errors="replace")
            crashes = [p.name for p in (root / name).iterdir()
                       if p.name.startswith(("crash-", "oom-", "leak-", "timeout-"))]
            done[name] = (proc.returncode, log, crashes)
        time.sleep(0.05)
    return done


def _stat(log: str, name: str) -> int | None:
    for line in log.splitlines():
        if line.startswith(f"stat::{name}:"):
            return int(line.rsplit(":", 1)[1])
    return None


@pytest.mark.parametrize("target", sorted(fuzz_targets.TARGETS))
def test_fuzz(target, fuzzed):
    code, log, crashes = fuzzed[target]
    tail = "\n".join(line for line in log.splitlines()
                     if not line.startswith("INFO: Instrumenting"))[-6000:]
    assert code == 0 and not crashes, f"{crashes}\n{tail}"
    runs = _stat(log, "number_of_executed_units")
    assert runs is not None and runs >= RUNS, tail
    peak = _stat(log, "peak_rss_mb")
    assert peak is not None and peak < RSS_LIMIT_MB, tail


# --- what the fuzzer found, through the commands ---------------------------------------------

def _corpus_doc(target: str, name: str) -> bytes:
    return (fuzz_targets.CORPUS / target / name).read_bytes()


BAD_RECORDS = ["argv-number.json", "counts-text.json", "cache-key-list.json", "seal-text.json",
               "seal-rejections-text.json", "deep-value.json"]


def _one_line(proc, code: int = 2) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("jaxcache:"), proc.stderr
    return lines[0]


@pytest.mark.parametrize("name", BAD_RECORDS)
def test_a_malformed_record_is_skipped_and_named_by_records_and_refused_by_explain(
        base, name):
    runs = mkdir(base / "runs", 0o700)
    good, bad = "20261201T000000.000000000Z-1.json", "20261201T000001.000000000Z-2.json"
    (runs / good).write_bytes(_corpus_doc("record", "cold.json"))
    (runs / bad).write_bytes(_corpus_doc("record", name))
    before = {p.name: p.read_bytes() for p in runs.iterdir()}
    proc = jaxcache("records", "list", "--dir", str(runs), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [r["name"] for r in doc["records"]] == [good]
    assert [s["name"] for s in doc["skipped"]] == [bad], doc["skipped"]
    why = "nested more than 32 deep" if name.startswith("deep") else "not a valid run record"
    assert why in doc["skipped"][0]["why"]
    proc = jaxcache("records", "stats", "--dir", str(runs), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["records"], doc["skipped_files"]) == (1, 1), doc
    assert _corpus_doc("record", "cold.json") != _corpus_doc("record", name)
    line = _one_line(jaxcache("explain", str(runs / bad)))
    assert why in line and bad in line
    proc = jaxcache("explain", str(runs))  # a directory: the bad one skipped, named
    assert proc.returncode in (0, 1), proc.stderr
    assert f"skipped {bad}" in proc.stderr and "internal error" not in proc.stderr
    assert {p.name: p.read_bytes() for p in runs.iterdir()} == before


@pytest.mark.parametrize("name", ["deep-array.toml", "deep-table.toml"])
def test_a_deeply_nested_policy_is_one_line(base, tmp_path, name):
    cache = mkdir(base / "cache", 0o700)
    policy = tmp_path / "policy.toml"
    policy.write_bytes(_corpus_doc("policy", name))
    policy.chmod(0o600)
    line = _one_line(jaxcache("audit", "--policy", str(policy), str(cache)))
    assert "nested more than" in line or "not valid TOML" in line, line


def test_planted_signatures_are_each_that_entrys_finding_never_the_end_of_verify(base):
    """A .sig nested 2,000 deep, one with a list for its size, one naming no key: each is a
    bad signature for its own entry; the genuine entry beside them still verifies."""
    cache = mkdir(base / "cache", 0o700)
    entry = _corpus_doc("signature", "entry")
    meta = json.loads(_corpus_doc("signature", "entry.sig"))
    (cache / f"{meta['key']}-cache").write_bytes(entry)
    (cache / f"{meta['key']}-cache.sig").write_bytes(_corpus_doc("signature", "entry.sig"))
    planted = ("deep.sig", "size-list.sig", "foreign-key.sig")
    for i, name in enumerate(planted):
        key = f"jit_planted{i}-{i:064x}"
        (cache / f"{key}-cache").write_bytes(b"planted")
        (cache / f"{key}-cache.sig").write_bytes(_corpus_doc("signature", name))
    pub = base / "k.pub"
    pub.write_bytes(_corpus_doc("public_key", "k.pub"))
    proc = jaxcache("verify", str(cache), "--trusted-key", str(pub), "--format", "json")
    assert proc.returncode == 1, proc.stderr  # some entries are not valid
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    doc = json.loads(proc.stdout)
    status = {e["name"]: e["status"] for e in doc["entries"]}
    assert status.pop(f"{meta['key']}-cache") == "valid"
    assert sorted(status.values()) == ["bad-signature"] * 3, status


def test_every_target_rejects_what_it_cannot_read_with_its_own_error():
    """The targets themselves hold: a byte string that is no document of any kind is either
    jaxcache's own error or ignored, for every parser."""
    for target in fuzz_targets.TARGETS.values():
        for data in (b"", b"\x00\xff", b"[" * 5000, b"{" * 5000, b'{"schema": 1}'):
            fuzz_targets.one(target, data)
    assert os.path.isdir(fuzz_targets.CORPUS)


def _poisoned(node, text: str):
    """Every string in a document, keys of free-form maps included, made `text` + itself."""
    if isinstance(node, dict):
        return {(k if k in ("schema",) else k): (v if k == "schema" else _poisoned(v, text))
                for k, v in node.items()} | {text + "k": text}
    if isinstance(node, list):
        return [_poisoned(v, text) for v in node]
    return text + node if isinstance(node, str) else node


ESCAPES = "\x1b[2J\x1b[32mVALID\x1b[0m\r\x08\u202e\x9b"


@pytest.mark.parametrize("target,name", [("record", "cold.json"), ("record", "warm.json"),
                                         ("record", "conditions.json"),
                                         ("record", "sealed.json"), ("bench", "bench.json"),
                                         ("audit", "private.json"), ("audit", "unsafe.json"),
                                         ("audit", "sealed.json")])
def test_control_characters_in_every_field_reach_no_report_raw(target, name):
    """Each string field of a real document carries terminal escapes, a carriage return,
    a backspace, a right-to-left override and a C1 CSI; every report that shows the document
    (text and JSON) shows them escaped (fuzz_targets.shown), or refuses the document."""
    doc = json.loads(_corpus_doc(target, name))
    poisoned = json.dumps(_poisoned(doc, ESCAPES)).encode()
    fuzz_targets.one(fuzz_targets.TARGETS[target], poisoned)
    # and one string at a time, so that a refusal of the whole cannot hide a raw one
    for path in _strings(doc):
        one = copy.deepcopy(doc)
        parent = one
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = ESCAPES + parent[path[-1]]
        fuzz_targets.one(fuzz_targets.TARGETS[target], json.dumps(one).encode())


def _strings(node, path=()):
    """The path of every string value in a document but its schema."""
    items = node.items() if isinstance(node, dict) else enumerate(node) \
        if isinstance(node, list) else ()
    for key, value in items:
        if isinstance(value, str) and key != "schema":
            yield (*path, key)
        else:
            yield from _strings(value, (*path, key))


def test_names_a_writer_chooses_reach_no_terminal_raw(base, tmp_path):
    """A cache directory's writer names files and fills signatures; a records folder's
    writer fills records. What audit, ls, verify, seal, records and explain print of them is
    escaped, in text and with -v."""
    cache = mkdir(base / "cache", 0o700)
    meta = json.loads(_corpus_doc("signature", "entry.sig"))
    (cache / f"{meta['key']}-cache").write_bytes(_corpus_doc("signature", "entry"))
    planted = json.dumps(dict(meta, key=ESCAPES)).encode()  # its reason quotes the key
    (cache / f"{meta['key']}-cache.sig").write_bytes(planted)
    for i, odd in enumerate(("\x1b[2K\x1b[1G", "\u202egnp.", "\r\x9b31m", "\u2028")):
        name = f"jit_{odd}{i}-{i:064x}-cache"
        (cache / name).write_bytes(b"planted")
        (cache / f"{name}.sig").write_bytes(planted)
    (cache / "notes\x1b[8m.txt").write_text("x")
    pub = tmp_path / "k.pub"
    pub.write_bytes(_corpus_doc("public_key", "k.pub"))
    key = tmp_path / "k.key"
    key.write_bytes(_corpus_doc("signing_key", "k.key"))
    key.chmod(0o600)
    runs = mkdir(base / "runs", 0o700)
    (runs / "20261201T000000.000000000Z-1.json").write_text(json.dumps(
        _poisoned(json.loads(_corpus_doc("record", "sealed.json")), ESCAPES)))
    (runs / "20261201T000001.000000000Z-2\x1b[2J.json").write_text("{")
    commands = [["audit", str(cache)], ["audit", str(cache), "-v"], ["ls", str(cache)],
                ["verify", str(cache), "--trusted-key", str(pub)],
                ["verify", str(cache), "--trusted-key", str(pub), "-v"],
                ["seal", str(cache), "--signing-key", str(key), "--allow-unhittable"],
                ["records", "list", "--dir", str(runs)], ["records", "stats", "--dir", str(runs)],
                ["explain", str(runs)]]
    for args in commands:
        proc = jaxcache(*args)
        assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, (
            args, proc.stderr)
        fuzz_targets.shown(proc.stdout + proc.stderr)


def test_names_another_user_chose_reach_no_terminal_raw_as_writers(base, accounts):
    """Files another user owns, in a directory of yours, make that user a writer: the audit's
    writers section and findings (text, -v, SARIF), ls and run's refusal name each file, and
    show it escaped."""
    theirs = mkdir(base / "theirs", 0o700)
    for i, odd in enumerate((ESCAPES, "\x07\x08\x08\n", "\u2028\x7f")):
        name = f"jit_{odd}{i}-{i:064x}-cache"
        for planted in (theirs / name, theirs / f"{name}.sig"):
            planted.write_bytes(b"planted")
            os.chown(planted, pwd.getpwnam(accounts.a).pw_uid, -1)
    for args in (["audit", str(theirs)], ["audit", str(theirs), "-v"],
                 ["audit", str(theirs), "--format", "sarif"], ["ls", str(theirs)],
                 ["run", "--cache-dir", str(theirs), "--", sys.executable, "-c", "pass"]):
        proc = jaxcache(*args)
        assert proc.returncode == 1, (args, proc.stderr)
        assert accounts.a in proc.stdout + proc.stderr, (args, proc.stdout, proc.stderr)
        fuzz_targets.shown(proc.stdout + proc.stderr)
        if "sarif" in args:
            for run in json.loads(proc.stdout)["runs"]:
                for result in run["results"]:
                    fuzz_targets.shown(result["message"]["text"])
