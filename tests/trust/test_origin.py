"""Ownership is not provenance (issue 23): entries that arrive in a private directory by a CI
restore (a tarball extracted by the runner's user, as actions/cache does), `cp -r`, `rsync -a`
or an image's read-only overlay layer are told from those a watched job wrote.

One source cache, as a default-branch job and "another workflow" leave it: a watched
`jaxcache run` of job A writes jit_f and jit_h (the ledger knows them) and a publisher seals
them; then a job run with plain JAX (no jaxcache) writes jit_g into the same source, and
overwrites jit_f's file with jit_g's program (the known poisoning: JAX would run g when A asks
for f). Each way of arriving must then show: jit_h yours, jit_g of unknown origin, jit_f
changed; `run` under CI refuses the directory; `run --sealed` rejects the poisoned entry and
A's output is what A computes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from support.jobs import JOB_TIMEOUT_S, clean_env
from support.ledgers import EVERY_COMPILE, TWO_JITS_JOB, bound_ledger, judged
from support.users import mkdir, needs_root

from jaxcache.trust.inputs import ledger as ledger_mod
from jaxcache.trust.provenance import birth, ledger_file, origin
from jaxcache.trust.rules import ci

JAXCACHE = [sys.executable, "-m", "jaxcache"]
JOB_A = TWO_JITS_JOB
JOB_B = """
import numpy as np, jax
def g(x): return x * 100
print("B", jax.jit(g)(np.arange(4, dtype=np.float32)).tolist())
"""
THRESHOLDS = EVERY_COMPILE


def _env(state: Path, **extra: str) -> dict:
    env = clean_env(XDG_STATE_HOME=str(state), NO_COLOR="1", **THRESHOLDS)
    for name in ci.VARIABLES:
        env.pop(name, None)
    return {**env, **extra}


def _jc(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([*JAXCACHE, *args], capture_output=True, text=True, env=env,
                          timeout=JOB_TIMEOUT_S)


def _entry(cache: Path, fun: str) -> str:
    (name,) = [n for n in os.listdir(cache) if n.startswith(f"jit_{fun}-")
               and n.endswith("-cache")]
    return name


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """The cache source: A's entries (watched, sealed), B's (plain JAX), jit_f poisoned."""
    top = tmp_path_factory.mktemp("origin")
    state = mkdir(top / "state", 0o700)
    env = _env(state)
    (top / "a.py").write_text(JOB_A)
    (top / "b.py").write_text(JOB_B)
    expected = subprocess.run([sys.executable, str(top / "a.py")], capture_output=True,
                              text=True, env=clean_env(), timeout=JOB_TIMEOUT_S).stdout
    assert expected.startswith("A [1.0, 3.0, 5.0, 7.0]"), expected
    key = top / "keys" / "ci.key"
    made = _jc("keygen", "-q", str(key), env=env)
    assert made.returncode == 0, made.stderr
    src = top / "src"
    ran = _jc("run", "-q", "--cache-dir", str(src), "--", sys.executable, str(top / "a.py"),
              env=env)
    assert ran.returncode == 0 and ran.stdout == expected, ran.stderr
    # before anything else touches it: every entry is the watched job's own
    doc = json.loads(_jc("audit", "--format", "json", "--no-processes", str(src), env=env).stdout)
    assert doc["origins"]["yours"] == 2 and doc["origins"]["unknown"] == 0, doc["origins"]
    assert not [f for f in doc["findings"] if f["code"].startswith("origin.")]
    sealed = _jc("seal", "--signing-key", str(key), str(src), env=env)
    assert sealed.returncode == 0, sealed.stdout + sealed.stderr
    other = subprocess.run([sys.executable, str(top / "b.py")], capture_output=True, text=True,
                           env=clean_env(JAX_COMPILATION_CACHE_DIR=str(src), **THRESHOLDS),
                           timeout=JOB_TIMEOUT_S)
    assert other.returncode == 0 and other.stdout.startswith("B"), other.stderr
    f_name, g_name = _entry(src, "f"), _entry(src, "g")
    (src / f_name).write_bytes((src / g_name).read_bytes())  # rewritten in place, as JAX writes
    return {"top": top, "src": src, "state": state, "pub": f"{key}.pub", "expected": expected,
            "f": f_name, "g": g_name, "h": _entry(src, "h")}


def _arrive(how: str, source: dict, dest: Path) -> None:
    src = source["src"]
    if how == "tarball":  # actions/cache: a tar made on one runner, extracted by the next
        archive = dest.parent / f"{dest.name}.tar"
        with tarfile.open(archive, "w") as t:
            t.add(src, arcname=".")
        mkdir(dest, 0o700)
        subprocess.run(["tar", "-C", str(dest), "-xf", str(archive)], check=True)
    elif how == "cp":
        subprocess.run(["cp", "-r", str(src), str(dest)], check=True)
    elif how == "rsync":
        if shutil.which("rsync") is None:
            pytest.skip("rsync is not installed (make test installs it as root)")
        subprocess.run(["rsync", "-a", f"{src}/", f"{dest}/"], check=True)
    os.chmod(dest, 0o700)


def _origins(doc: dict) -> dict[str, str]:
    return {e["name"]: e["origin"] for e in doc["entries"]["entries"] if e["origin"]}


def _check_judged(doc: dict, source: dict) -> None:
    assert doc["verdict"] == "PRIVATE", doc["findings"]  # outside CI: a warning, not a refusal
    # f: rewritten in the source after the watched job wrote it there; here, in a copy, its
    # bytes are no line's: unknown (a line of another directory says nothing of this file)
    assert _origins(doc) == {source["h"]: "yours", source["g"]: "unknown",
                             source["f"]: "unknown"}
    found = {f["code"]: f for f in doc["findings"]}
    assert found["origin.unknown"]["effect"] == "warning"
    assert source["g"] in found["origin.unknown"]["message"]
    assert source["f"] in found["origin.unknown"]["message"]
    assert "restored from a CI cache" in found["origin.unknown"]["message"]
    assert "--sealed" in found["origin.unknown"]["remedy"]
    assert "origin.changed" not in found


def _check_refused(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "A [" not in proc.stdout  # the job never computed with that cache
    said = " ".join(proc.stderr.split())  # wrapped for the terminal
    assert "not written by any job jaxcache watched" in said
    assert "running under GitHub Actions" in said
    assert "restored_from" in said  # the way out is said


def _check_sealed(proc: subprocess.CompletedProcess, record: Path, source: dict) -> None:
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == source["expected"]  # the poisoned program was never run
    doc = json.loads(record.read_text())
    rejected = {r["key"] for r in doc["seal"]["rejections"]}
    assert source["f"].removesuffix("-cache") in rejected, doc["seal"]
    outcomes = {m["name"]: m["outcome"] for m in doc["modules"]}
    assert outcomes.get("jit_h") == "hit", outcomes


def test_an_entry_rewritten_where_it_was_written_is_changed(source):
    """In the source itself, where the watched job wrote f, f's other bytes are changed: a
    line of this very directory says what was written there. (In a copy elsewhere they are
    unknown: JAX compiles the same key to other bytes in another cache, which no rewrite
    explains.)"""
    doc = json.loads(_jc("audit", "--format", "json", "--no-processes", str(source["src"]),
                         env=_env(source["state"])).stdout)
    assert _origins(doc)[source["f"]] == "changed"
    (changed,) = [f for f in doc["findings"] if f["code"] == "origin.changed"]
    assert source["f"] in changed["message"]


@pytest.mark.parametrize("how", ["tarball", "cp", "rsync"])
def test_restored_copies(how, source, tmp_path):
    dest = tmp_path / "restored"
    _arrive(how, source, dest)
    env = _env(source["state"])
    doc = json.loads(_jc("audit", "--format", "json", "--no-processes", str(dest),
                         env=env).stdout)
    _check_judged(doc, source)
    listed = _jc("ls", str(dest), env=env)
    assert listed.returncode == 0  # unknown origin: the audit's warning, under CI a refusal
    assert "1 yours, 2 unknown" in listed.stdout
    _check_refused(_jc("run", "--cache-dir", str(dest), "--", sys.executable,
                       str(source["top"] / "a.py"), env=_env(source["state"],
                                                             GITHUB_ACTIONS="true")))
    record = tmp_path / "sealed.json"
    _check_sealed(_jc("run", "-q", "--sealed", "--trusted-key", source["pub"], "--record",
                      str(record), "--cache-dir", str(dest), "--", sys.executable,
                      str(source["top"] / "a.py"), env=_env(source["state"],
                                                            GITHUB_ACTIONS="true")),
                  record, source)


@needs_root
def test_baked_into_a_read_only_image_layer(source, tmp_path):
    """A cache sealed at image build time, read at start-up from the image's read-only
    overlay lower layer."""
    from attacks.storage import in_namespace, needs_ns, overlay

    if needs_ns.args[0]:
        pytest.skip(needs_ns.kwargs["reason"])
    base = mkdir(tmp_path / "image", 0o755)
    lower = mkdir(base / "lower", 0o755)
    subprocess.run(["cp", "-a", str(source["src"]), str(lower / "cache")], check=True)
    cache = base / "merged" / "cache"
    record = tmp_path / "sealed.json"
    a = str(source["top"] / "a.py")
    plain, in_ci = _env(source["state"]), _env(source["state"], GITHUB_ACTIONS="true")
    mount = overlay(base, lower)
    # as a container runtime can mount an image: no redirects followed (with them on, the
    # audit cannot tell which lower path a file is served from: UNVERIFIABLE, fails closed)
    mount["mount"][5] += ",redirect_dir=nofollow"
    # and as this kernel mounts a lower-only overlay by default (redirect_dir=on): a plain
    # audit cannot judge it, a sealed reader judges every entry by its signature
    again = {"mount": ["mount", "-t", "overlay", "overlay", "-o",
                       f"lowerdir={lower}:{base / 'lower2'}", str(mkdir(base / "m2", 0o755))]}
    record2 = tmp_path / "sealed2.json"
    res = in_namespace([
        mount, again,
        {"run": [*JAXCACHE, "audit", "--format", "json", "--no-processes", str(cache)],
         "env": plain},
        {"run": [*JAXCACHE, "run", "--cache-dir", str(cache), "--", sys.executable, a],
         "env": in_ci},
        {"run": [*JAXCACHE, "run", "-q", "--sealed", "--trusted-key", source["pub"], "--record",
                 str(record), "--cache-dir", str(cache), "--", sys.executable, a],
         "env": in_ci},
        {"run": [*JAXCACHE, "run", "-q", "--sealed", "--trusted-key", source["pub"], "--record",
                 str(record2), "--cache-dir", str(base / "m2" / "cache"), "--",
                 sys.executable, a], "env": in_ci},
    ], tmp_path)
    doc = json.loads(res[2]["stdout"])
    assert doc["verdict"] == "PRIVATE", [(f["code"], f["effect"], f["message"])
                                         for f in doc["findings"]]
    assert any(c["filesystem"]["type"] == "overlay" for c in doc["components"])
    _check_judged(doc, source)

    def completed(r: dict) -> subprocess.CompletedProcess:
        return subprocess.CompletedProcess([], r["rc"], r["stdout"], r["stderr"])

    _check_refused(completed(res[3]))
    _check_sealed(completed(res[4]), record, source)
    _check_sealed(completed(res[5]), record2, source)


def test_declared_source_is_accepted_under_ci(source, tmp_path):
    dest = tmp_path / "restored"
    _arrive("cp", source, dest)
    policy = mkdir(tmp_path / "conf", 0o755) / "policy.toml"
    policy.write_text(f'[[cache]]\npath = "{dest}"\n'
                      'restored_from = "actions/cache, written only by the default branch"\n')
    env = _env(source["state"], GITLAB_CI="true")
    doc = json.loads(_jc("audit", "--format", "json", "--no-processes", "--policy", str(policy),
                         str(dest), env=env).stdout)
    assert doc["verdict"] == "PRIVATE"
    (note,) = [f for f in doc["findings"] if f["code"] == "origin.declared"]
    assert note["effect"] == "note" and "written only by the default branch" in note["message"]
    refused = json.loads(_jc("audit", "--format", "json", "--no-processes", str(dest),
                             env=env).stdout)
    assert refused["verdict"] == "UNSAFE"
    assert "running under GitLab CI" in " ".join(f["message"] for f in refused["findings"])


def test_require_origin_outside_ci(source, tmp_path):
    dest = tmp_path / "restored"
    _arrive("cp", source, dest)
    env = _env(source["state"])
    proc = _jc("run", "--require-origin", "--cache-dir", str(dest), "--", sys.executable,
               str(source["top"] / "a.py"), env=env)
    assert proc.returncode == 1, proc.stderr
    assert "as --require-origin asks" in " ".join(proc.stderr.split())
    warned = _jc("run", "--cache-dir", str(dest), "--", sys.executable,
                 str(source["top"] / "a.py"), env=env)
    assert warned.returncode == 0, warned.stderr
    assert "origin of the entries before the job: 1 yours, 2 unknown" in warned.stderr
    record = Path(warned.stderr.split("record: ")[-1].strip())
    said = json.loads(record.read_text())["cache_dir"]["origin"]
    assert {e["name"]: e["origin"] for e in said["not_yours"]} == {
        source["g"]: "unknown", source["f"]: "unknown"}


def test_enable_refuses_under_ci_and_records_what_it_writes(source, tmp_path):
    dest = tmp_path / "restored"
    _arrive("cp", source, dest)
    fresh = tmp_path / "fresh"
    program = tmp_path / "enable_job.py"
    program.write_text(
        "import sys, jaxcache\n"
        "try:\n"
        "    jaxcache.enable(sys.argv[1])\n"
        "except jaxcache.UntrustedCacheError as exc:\n"
        "    print('refused:', exc); sys.exit(1)\n" + JOB_A)
    state = mkdir(tmp_path / "state", 0o700)
    refused = subprocess.run([sys.executable, str(program), str(dest)], capture_output=True,
                             text=True, env=_env(state, BUILDKITE="true"), timeout=JOB_TIMEOUT_S)
    assert refused.returncode == 1 and "running under Buildkite" in " ".join(
        refused.stdout.split()), refused.stdout
    warned = subprocess.run(
        [sys.executable, "-c", "import sys, warnings, jaxcache\n"
         "with warnings.catch_warnings(record=True) as w:\n"
         "    warnings.simplefilter('always')\n"
         "    jaxcache.enable(sys.argv[1])\n"
         "print([str(x.message) for x in w if 'origin' in str(x.message) or 'watched' in "
         "str(x.message)])", str(dest)],
        capture_output=True, text=True, env=_env(state), timeout=JOB_TIMEOUT_S)
    assert warned.returncode == 0, warned.stderr
    assert "3 entries not written by any job jaxcache watched" in warned.stdout  # not refused
    required = subprocess.run(
        [sys.executable, "-c", "import sys, jaxcache\n"
         "jaxcache.enable(sys.argv[1], require_origin=True)", str(dest)],
        capture_output=True, text=True, env=_env(state), timeout=JOB_TIMEOUT_S)
    assert required.returncode == 1 and "UntrustedCacheError" in required.stderr
    ran = subprocess.run([sys.executable, str(program), str(fresh)], capture_output=True,
                         text=True, env=_env(state, BUILDKITE="true"), timeout=JOB_TIMEOUT_S)
    assert ran.returncode == 0 and ran.stdout == source["expected"], ran.stderr
    doc = json.loads(_jc("audit", "--format", "json", "--no-processes", str(fresh),
                         env=_env(state, BUILDKITE="true")).stdout)
    assert doc["verdict"] == "PRIVATE", doc["findings"]
    assert doc["origins"]["yours"] == 2 and doc["origins"]["unknown"] == 0


# ---- the ledger itself -----------------------------------------------------------------------
def test_a_copied_ledger_vouches_for_nothing(tmp_path):
    """A ledger that travels with the cache (a restored $HOME, an image FROM another) is
    another file: its lines count for nothing, whoever owns it."""
    first = mkdir(tmp_path / "a", 0o700) / "origin.ledger"
    bound_ledger(first, ledger_file.line(_written()))
    assert _written().name in ledger_mod.load(str(first)).by_name
    copy = mkdir(tmp_path / "b", 0o700) / "origin.ledger"
    shutil.copy2(first, copy)
    copy.chmod(0o600)
    copied = ledger_mod.load(str(copy))
    assert not copied.by_name and "copied, restored or baked" in (copied.problem or "")
    headless = mkdir(tmp_path / "c", 0o700) / "origin.ledger"
    headless.write_bytes(ledger_file.line(_written()))
    headless.chmod(0o600)
    assert ledger_mod.load(str(headless)).problem


def test_the_witness_makes_the_ledger_with_its_header(tmp_path):
    from jaxcache.lifecycle import witness

    ledger = tmp_path / "state" / "jaxcache" / "origin.ledger"
    assert witness.append(str(ledger), _written()) and witness.append(str(ledger), _written())
    loaded = ledger_mod.load(str(ledger))
    assert loaded.problem is None and len(loaded.by_name[_written().name]) == 2
    assert oct(ledger.stat().st_mode & 0o777) == "0o600" and ledger.stat().st_nlink == 1
    assert sorted(os.listdir(ledger.parent)) == ["origin.ledger"]  # no temporary file left
def _written(name: str = "jit_f-" + "a" * 64 + "-cache") -> ledger_file.Written:
    return ledger_file.Written(name, "b" * 64, 10, (1, 2, 3, 4), 1.5, "/c\t\n")


def test_ledger_lines_round_trip_and_bad_lines_are_skipped():
    good = ledger_file.line(_written())
    data = good + b"1\tjit_x\tnot-hex\n" + b"garbage\xff\n" + good[:20] + b"\n" + good
    ledger = ledger_file.parse(data, "/l")
    assert ledger.lines == 5 and ledger.skipped == 3
    (w, again) = ledger.by_name[_written().name]
    assert w == again == _written()  # the directory's tab and newline survive


@pytest.mark.parametrize("bad", [
    b'"/c', b'"/c\\q"', b'"/c"x', b'/c',  # the directory: not one JSON string
])
def test_a_line_whose_any_field_is_malformed_is_skipped_not_half_read(bad):
    fields = ledger_file.line(_written()).rstrip(b"\n").split(b"\t")
    variants = [fields[:11] + [bad],
                fields[:3] + [b"+10"] + fields[4:],  # a sign int() would take
                fields[:4] + [b"-1"] + fields[5:],
                fields[:8] + [b"nan"] + fields[9:],
                fields[:1] + [b"jit/f-cache"] + fields[2:],  # not a name JAX writes
                fields + [b"extra"]]
    data = b"".join(b"\t".join(v) + b"\n" for v in variants) + ledger_file.line(_written())
    ledger = ledger_file.parse(data, "/l")
    assert (ledger.lines, ledger.skipped) == (len(variants) + 1, len(variants))
    assert list(ledger.by_name) == [_written().name]
    assert ledger.by_name[_written().name] == (_written(),)


def test_a_torn_line_is_skipped_without_backtracking():
    """A write cut inside the directory's JSON string (a crash, a full disk) leaves a line
    with no closing quote: it must be one skipped line, not a regular expression that tries
    2^n ways to match it before every job starts. In a child, so a regression hangs nothing
    but that child (the bound is ~10^1000 times what the linear match needs)."""
    code = (
        "from jaxcache.trust.provenance import ledger_file as lf\n"
        "w = lf.Written('jit_f-' + 'a' * 64 + '-cache', 'b' * 64, 1, (1, 2, 3, 4), 1.5, '/x')\n"
        "head = lf.line(w).rsplit(b'\\t', 1)[0]\n"
        "torn = [head + b'\\t\"' + b'a' * n for n in (30, 4000, lf.MAX_LINE - len(head) - 2)]\n"
        "led = lf.parse(b'\\n'.join(torn) + b'\\n' + lf.line(w), '/l')\n"
        "print(led.lines, led.skipped, list(led.by_name) == [w.name])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.split() == ["4", "3", "True"], out.stderr


def _one_entry(tmp_path: Path, state_mode: int) -> tuple[Path, Path, bytes]:
    """A cache holding one entry and a ledger (in a state folder of `state_mode`) whose line
    was written for it, as the witness writes it."""
    import hashlib

    state = mkdir(tmp_path / "state", state_mode)
    cache = mkdir(tmp_path / "cache", 0o700)
    body = b"compiled"
    (cache / _written().name).write_bytes(body)
    st = os.stat(cache / _written().name)
    w = ledger_file.Written(_written().name, hashlib.sha256(body).hexdigest(), len(body),
                            (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns), 1.0,
                            str(cache))
    ledger = state / "origin.ledger"
    bound_ledger(ledger, ledger_file.line(w))
    return cache, ledger, body


def test_an_unprotected_ledger_counts_for_nothing(tmp_path):
    cache, ledger, body = _one_entry(tmp_path, 0o755)

    def now() -> origin.Origins:
        return judged(cache, ledger)

    assert now().count("yours") == 1
    ledger.chmod(0o622)  # anyone may append: a planted line would vouch for a planted entry
    o = now()
    assert o.count("yours") == 0 and o.count("unknown") == 1 and o.ledger_problem
    ledger.chmod(0o600)
    (cache / _written().name).write_bytes(b"compiler")  # same size, other bytes
    assert now().count("changed") == 1
    (cache / _written().name).write_bytes(body)  # the very bytes again (a copy back): yours
    assert now().count("yours") == 1


def test_ci_detection():
    from support.jobs import CI_VARIABLES

    assert set(CI_VARIABLES) == set(ci.VARIABLES)  # the suite strips every one it reads
    assert ci.detect({}) is None
    assert ci.detect({"GITHUB_ACTIONS": "true"}) == "GitHub Actions"
    assert ci.detect({"TF_BUILD": "True"}) == "Azure Pipelines"
    assert ci.detect({"JENKINS_URL": "http://j/"}) == "Jenkins"
    assert ci.detect({"CI": "false"}) is None
    assert ci.detect({"CI": "1"}) == ci.detect({"CI": "woodpecker"}) == "a CI system (CI is set)"
    assert ci.detect({"CI": "0"}) is None and ci.detect({"CI": "off"}) is None
    assert ci.detect({"CODEBUILD_BUILD_ID": "b:1"}) == "AWS CodeBuild"
    assert ci.detect({"GITLAB_CI": ""}) is None


@pytest.mark.parametrize("text,why", [
    ('restored_from = "x"\n', "top level"),
    ('[[cache]]\npath = "/x"\nrestored_from = ""\n', "non-empty"),
    ('[[cache]]\npath = "/x"\nrestored_from = ["a"]\n', "non-empty string"),
    ('[[cache]]\npath = "gs://b/p"\nrestored_from = "x"\n', "bucket"),
])
def test_bad_restored_from_is_one_line(text, why, tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text(text)
    proc = _jc("audit", "--policy", str(policy), str(tmp_path), env=_env(tmp_path))
    assert proc.returncode == 2 and why in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_verify_strict_is_the_gate_after_a_restore(source, tmp_path):
    dest = tmp_path / "restored"
    _arrive("cp", source, dest)
    env = _env(source["state"])

    def verify(*extra: str) -> int:
        return _jc("verify", *extra, "--trusted-key", source["pub"], str(dest), env=env).returncode

    assert verify() == 1 and verify("--strict") == 1  # jit_g unsigned, jit_f's bad signature
    sig = [n for n in os.listdir(dest) if n.startswith(source["f"]) and n != source["f"]]
    assert sig, os.listdir(dest)
    (dest / source["g"]).unlink()
    (dest / source["f"]).unlink()  # its signature stays behind: an orphan
    assert verify() == 0 and verify("--strict") == 1
    for n in sig:
        (dest / n).unlink()
    assert verify() == 0 and verify("--strict") == 0
    for planted in ("README", "xla_gpu_kernel_cache_file"):  # nothing signed these
        (dest / planted).write_text("x")
        assert verify() == 0 and verify("--strict") == 1
        (dest / planted).unlink()
    mkdir(dest / "xla_gpu_per_fusion_autotune_cache_dir", 0o700)
    assert verify() == 0 and verify("--strict") == 1


def test_a_ledger_beside_entry_names_is_read_without_recursion(tmp_path):
    """The ledger's folder is audited as a trusted input's parent, never judged by origin
    (which would read the ledger again)."""
    state = mkdir(tmp_path / "state", 0o700)
    (state / _written().name).write_bytes(b"x")  # looks like an entry
    ledger = state / "origin.ledger"
    bound_ledger(ledger, ledger_file.line(_written()))
    loaded = ledger_mod.load(str(ledger))
    assert loaded.problem is None and _written().name in loaded.by_name


def test_seal_under_ci_vouches_for_no_entry_of_unknown_origin(source, tmp_path):
    """A sealed publisher's own entries carry their signature already: `seal` under CI goes
    on; an unsigned entry nobody watched being written is refused, never signed."""
    key = str(source["pub"])[:-4]
    pub = tmp_path / "sealed"
    env = _env(source["state"], GITHUB_ACTIONS="true")
    ran = _jc("run", "-q", "--sealed", "--signing-key", key, "--cache-dir", str(pub), "--",
              sys.executable, str(source["top"] / "a.py"), env=env)
    assert ran.returncode == 0 and ran.stdout == source["expected"], ran.stderr
    again = _jc("seal", "--signing-key", key, str(pub), env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    planted = pub / source["g"]
    planted.write_bytes((source["src"] / source["g"]).read_bytes())
    refused = _jc("seal", "--signing-key", key, str(pub), env=env)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "to seal" in refused.stderr and source["g"] in " ".join(refused.stderr.split())
    assert not [n for n in os.listdir(pub) if n.startswith(source["g"]) and n != source["g"]]


def test_entries_arriving_after_the_audit_are_judged_when_loaded(source, tmp_path):
    """Under CI the bytes JAX is about to load are judged, not only the listing the audit saw:
    entries copied in after the audit (a restore still running, a parallel job) that no
    watched job wrote are misses; the job's output is A's own."""
    cache = mkdir(tmp_path / "cache", 0o700)
    ready, go = tmp_path / "ready", tmp_path / "go"
    job = tmp_path / "late.py"
    job.write_text(
        "import os, time, jax\n"  # past the gate: the audit has passed
        f"open({str(ready)!r}, 'w').close()\n"
        f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.01)\n" + JOB_A)
    env = _env(source["state"], GITHUB_ACTIONS="true")
    record = tmp_path / "late.json"
    proc = subprocess.Popen([*JAXCACHE, "run", "-q", "--record", str(record), "--cache-dir",
                             str(cache), "--", sys.executable, str(job)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while not ready.exists():
            assert proc.poll() is None, proc.communicate()
            import time

            time.sleep(0.01)
        for name in (source["f"], source["h"]):  # f: another program's bytes; h: A's own
            shutil.copy(source["src"] / name, cache / name)
        go.touch()
        out, err = proc.communicate(timeout=JOB_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert out == source["expected"]  # the poisoned jit_f was never loaded
    outcomes = {m["name"]: m["outcome"] for m in json.loads(record.read_text())["modules"]}
    assert outcomes["jit_h"] == "hit" and outcomes["jit_f"] != "hit", outcomes


def test_xla_subcache_files_are_of_unknown_origin(tmp_path):
    """XLA writes its sub-caches itself (no witness sees it) and a plain reader on GPU loads
    them: under CI they are refused like any entry of unknown origin."""
    cache = mkdir(tmp_path / "cache", 0o700)
    mkdir(cache / "xla_gpu_per_fusion_autotune_cache_dir", 0o700)
    (cache / "xla_gpu_per_fusion_autotune_cache_dir" / "abc.textproto").write_text("x")
    (cache / "xla_gpu_kernel_cache_file").write_text("x")
    state = mkdir(tmp_path / "state", 0o700)
    doc = json.loads(_jc("audit", "--format", "json", "--no-processes", str(cache),
                         env=_env(state, GITHUB_ACTIONS="true")).stdout)
    assert doc["verdict"] == "UNSAFE" and doc["origins"]["unknown"] == 2, doc["origins"]
    plain = json.loads(_jc("audit", "--format", "json", "--no-processes", str(cache),
                           env=_env(state)).stdout)
    assert plain["verdict"] == "PRIVATE" and "origin.unknown" in {
        f["code"] for f in plain["findings"]}


def test_seal_outside_ci_names_what_it_vouches_for(source, tmp_path):
    dest = tmp_path / "restored"
    _arrive("cp", source, dest)
    (dest / source["f"]).unlink()  # the poisoned one: its signature would be bad anyway
    for n in os.listdir(dest):
        if n.startswith(source["f"]):
            (dest / n).unlink()
    key = str(source["pub"])[:-4]
    env = _env(source["state"])
    refused = _jc("seal", "--require-origin", "--signing-key", key, str(dest), env=env)
    assert refused.returncode == 1 and "to seal" in refused.stderr, refused.stderr
    assert not [n for n in os.listdir(dest) if n.startswith(source["g"]) and n != source["g"]]
    warned = _jc("seal", "--signing-key", key, str(dest), env=env)
    assert warned.returncode == 0, warned.stdout + warned.stderr
    said = " ".join(warned.stderr.split())
    assert "warning" in said and source["g"] in said and "sealing vouches for them" in said


# ---- a ledger forged for the file it will become (issue 39.1) -------------------------------
PROGRAMS = Path(__file__).resolve().parent.parent / "programs"


def _digest(path: Path) -> list:
    import hashlib

    data = path.read_bytes()
    return [hashlib.sha256(data).hexdigest(), len(data)]


@needs_root
def test_a_ledger_forged_for_the_restored_file_vouches_for_nothing(source, tmp_path):
    """The attack: a fresh tmpfs numbers devices and inodes alike every time, so one dry-run
    extraction tells the attacker the pair the restored ledger will get; a home restored with
    a ledger naming that pair (and even the dry run's birth time) vouched for the poisoned
    jit_f under CI: the audit said PRIVATE and the job computed g where it asked for f. Bound
    to the birth time of the file itself, neither forged header vouches: the audit refuses
    the restored entries under CI, and so does the run, before the job computes anything."""
    if shutil.which("unshare") is None or subprocess.run(
            ["unshare", "-m", "--propagation", "private", "true"]).returncode:
        pytest.skip("unshare -m is refused here")
    src = source["src"]
    env = _env(Path("{home}/state"), GITHUB_ACTIONS="true")
    cfg = {"point": str(mkdir(tmp_path / "runner", 0o700)), "cache": str(src),
           "src": str(Path(origin.__file__).resolve().parents[2]),
           "vouch": {source[k]: _digest(src / source[k]) for k in ("f", "g", "h")},
           "runs": [{"argv": [*JAXCACHE, "audit", "--format", "json", "--no-processes",
                              "{home}/cache"], "env": env},
                    {"argv": [*JAXCACHE, "run", "-q", "--cache-dir", "{home}/cache", "--",
                              sys.executable, str(source["top"] / "a.py")], "env": env}]}
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    proc = subprocess.run(["unshare", "-m", "--propagation", "private", "--", sys.executable,
                           str(PROGRAMS / "restored_home.py"), str(tmp_path / "cfg.json")],
                          capture_output=True, text=True, timeout=3 * JOB_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)
    assert set(results) == {"device and inode", "device, inode and birth"}
    # the attack's premise (five tries each, as other tests mount too): without it the ledger
    # is forged all the same, and must vouch for nothing all the same
    assert any(got["predicted"] for got in results.values()), results
    for forged, got in results.items():
        audit, run = got["runs"]
        doc = json.loads(audit["stdout"])
        assert doc["verdict"] == "UNSAFE", (forged, doc["verdict"], doc["findings"])
        assert doc["origins"]["yours"] == 0, (forged, doc["origins"])
        found = {f["code"]: f for f in doc["findings"]}
        assert "origin.ledger" in found and "origin.unknown" in found, (forged, found)
        assert run["rc"] == 1 and "A [" not in run["stdout"], (forged, run)
        assert "not written by any job jaxcache watched" in " ".join(run["stderr"].split())


def test_an_old_ledger_is_set_aside_and_a_bound_one_started(tmp_path):
    """A ledger bound only by device and inode (as jaxcache made them before) vouches for
    nothing, saying why; the next line a watched job writes sets it aside under a new name
    (nothing deleted) and starts a ledger bound to its own birth time."""
    from jaxcache.lifecycle import witness

    state = mkdir(tmp_path / "state", 0o700)
    ledger = state / "origin.ledger"
    ledger.write_bytes(b"")
    ledger.chmod(0o600)
    st = ledger.stat()
    old = f"0\tledger\t{st.st_dev}\t{st.st_ino}\n".encode() + ledger_file.line(_written())
    ledger.write_bytes(old)  # same inode: the old binding holds for this very file
    loaded = ledger_mod.load(str(ledger))
    assert not loaded.by_name and loaded.problem == ledger_file.OLD_BINDING
    assert witness.append(str(ledger), _written("jit_g-" + "c" * 64 + "-cache"))
    (aside,) = [n for n in os.listdir(state) if n.startswith("origin.ledger.unbound-")]
    assert (state / aside).read_bytes() == old  # kept whole, beside
    fresh = ledger_mod.load(str(ledger))
    assert fresh.problem is None and list(fresh.by_name) == ["jit_g-" + "c" * 64 + "-cache"]
    assert fresh.identity == (ledger.stat().st_dev, ledger.stat().st_ino,
                              birth.of_path(str(ledger)))


@needs_root
def test_a_ledger_where_no_birth_time_is_kept_vouches_for_nothing(tmp_path):
    """ramfs records no birth time: there a restored ledger cannot be told from the original,
    so none vouches (fail closed), and the finding says where to keep it instead."""
    point = mkdir(tmp_path / "ramfs", 0o700)
    code = (
        "import sys; sys.path.insert(0, sys.argv[2])\n"
        "from jaxcache.lifecycle import witness\n"
        "from jaxcache.trust.inputs import ledger\n"
        "from jaxcache.trust.provenance import ledger_file\n"
        "w = ledger_file.Written('jit_f-' + 'a' * 64 + '-cache', 'b' * 64, 10, (1, 2, 3, 4), 1.5,"
        " '/c')\n"
        "path = sys.argv[1] + '/state/origin.ledger'\n"
        "print(witness.append(path, w), repr(ledger.load(path).problem))\n")
    proc = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c",
         'mount -t ramfs none "$1" && chmod 700 "$1" && exec "$2" -c "$3" "$1" "$4"', "sh",
         str(point), sys.executable, code, str(Path(origin.__file__).resolve().parents[2])],
        capture_output=True, text=True, timeout=120)
    if proc.returncode and "mount" in proc.stderr:
        pytest.skip(f"cannot mount ramfs here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    appended, problem = proc.stdout.split(" ", 1)
    assert appended == "True" and problem.strip() == repr(ledger_file.NO_BIRTH)


def test_a_copy_of_your_own_cache_is_read_once(tmp_path):
    """An entry found yours by its bytes under a new identity (your cache copied with cp -r)
    is hashed once: the audit appends its new identity to the very ledger it read, and the
    next audit knows it without reading it."""
    cache, ledger, _ = _one_entry(tmp_path, 0o700)
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(cache), str(copy)], check=True)

    def now() -> origin.Origins:
        return judged(copy, ledger)

    first = now()
    assert first.count("yours") == 1 and len(first.relearned) == 1
    again = now()
    assert again.count("yours") == 1 and again.relearned == ()  # known by identity now
    assert len(ledger_mod.load(str(ledger)).by_name[_written().name]) == 2


def test_an_unsigned_entry_among_signed_ones_is_named_first(tmp_path):
    """A restore under CI where four entries carry a signature file and one does not: the
    refusal counts both kinds and names the unsigned one first, never inside "and N more"
    (issue 44, point 3); changed entries would come before unknown ones."""
    cache = mkdir(tmp_path / "cache", 0o700)
    names = [f"jit_f{i}-{i:064x}-cache" for i in range(5)]
    for name in names:
        (cache / name).write_bytes(b"compiled")
    for name in names[:4]:
        (cache / f"{name}.sig").write_text("{}")
    proc = _jc("audit", "--format", "json", str(cache),
               env=_env(tmp_path / "state", GITHUB_ACTIONS="true"))
    doc = json.loads(proc.stdout)
    [found] = [f for f in doc["findings"] if f["code"] == "origin.unknown"]
    assert found["effect"] == "unsafe", found
    assert f"(1 without a signature: {names[4]}; 4 with one: {names[0]}, " in found["message"]
