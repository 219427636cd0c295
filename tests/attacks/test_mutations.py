"""Mutation test: thousands of damaged documents, none may crash jaxcache or change a file.

Real documents are made once per module by real runs (a run record of a real JAX job, its
warm twin, a bench result, audits of a private and an unsafe directory, a real policy); each
is then damaged with a fixed seed: fields deleted, replaced, retyped, garbage nested, huge,
negative and NaN numbers, wrong schema strings, truncation, byte flips, odd unicode. Every
variant goes to the commands that read it (explain, decide --bench / --audit, bench --compare,
audit --policy, run --policy). Each must end with exit 0, 1 or 2, never a traceback or an
"internal error", a 2 with one line, and the input file byte for byte as it was.

The bulk runs in-process (jaxcache.cli.main) to stay fast; a sample goes through real
subprocesses, `run --policy` among them.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from support.jobs import jaxcache
from support.users import mkdir

pytest.importorskip("jax")

SEED = 20261201
VARIANTS = 300  # per document type (tests/attacks/test_fuzz.py drives each parser with 10,000 more)
SUBPROCESS_SAMPLE = 3  # per document type, through a real `python -m jaxcache`

JOB = """
import jax, jax.numpy as jnp
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
@jax.jit
def f(x):
    return jnp.tanh(x @ x.T) + 1
@jax.jit
def g(x):
    return jnp.sin(x).sum()
x = jnp.ones((16, 16))
print(float(f(x).sum()), float(g(x)))
"""
ENV = {**os.environ, "JAX_PLATFORMS": "cpu"}
ENV.pop("JAX_COMPILATION_CACHE_DIR", None)


# --- the real documents, made once ---------------------------------------------------------

@pytest.fixture(scope="module")
def real(tmp_path_factory):
    root = tmp_path_factory.mktemp("mutations")
    root.chmod(0o700)
    job = root / "job.py"
    job.write_text(JOB)
    cache = root / "cache"
    docs: dict[str, object] = {"root": root, "cache": cache}
    for name in ("cold", "warm"):  # the warm run hits what the cold one wrote
        rec = root / f"{name}.json"
        proc = jaxcache("run", "--quiet", "--cache-dir", str(cache), "--record", str(rec),
                        "--", sys.executable, str(job), env=ENV)
        assert proc.returncode == 0, proc.stderr
        docs[name] = json.loads(rec.read_text())
    assert {m["outcome"] for m in docs["warm"]["modules"]} >= {"hit"}
    bench = root / "bench.json"
    proc = jaxcache("bench", "-t", "1", "-k", "1", "--no-prime", "--min-compile-time", "0",
                    "--json", str(bench), "--", sys.executable, str(job), env=ENV)
    assert bench.exists(), proc.stdout + proc.stderr
    docs["bench"] = json.loads(bench.read_text())
    shared = mkdir(root / "shared", 0o777)  # an unsafe layout: writers with reasons
    mkdir(shared / "cache", 0o700)
    audits = []
    for target in (cache, shared / "cache"):
        proc = jaxcache("audit", "--format", "json", str(target))
        assert proc.returncode in (0, 1), proc.stderr
        audits.append(json.loads(proc.stdout))
    assert {a["verdict"] for a in audits} == {"PRIVATE", "UNSAFE"}
    docs["audits"] = audits
    keygen = jaxcache("keygen", str(root / "keys" / "ci.key"))
    assert keygen.returncode == 0, keygen.stderr
    pub = (root / "keys" / "ci.key.pub").read_text().strip()
    docs["policy"] = (
        'trusted_users = ["root"]\n'
        'accepted_filesystems = ["tmpfs"]\n\n'
        '[[cache]]\n'
        f'path = "{cache}"\n'
        'trusted_groups = ["root"]\n'
        f'trusted_keys = [{{ holder = "root", key = "{pub}" }}]\n\n'
        '[[cache]]\n'
        '"path" = "/srv/jax-cache"\n'
        'trusted_users = ["root", "nobody"]\n')
    check = root / "policy-check.toml"
    check.write_text(docs["policy"])
    assert jaxcache("audit", "--policy", str(check), str(cache)).returncode == 0
    # inputs for the commands that read two documents
    for name in ("cold", "bench"):
        (root / f"good-{name}.json").write_text(json.dumps(docs[name]))
    (root / "good-audit.json").write_text(json.dumps(audits[0]))
    return docs


# --- damage ----------------------------------------------------------------------------------

ODD_TEXT = ["", " ", "\x00", "a\nb", "\u202eevil", "\ud800", "\udcff", "é" * 3, "\\x41",
            "../../etc/passwd", "x" * 5000, "jaxcache.run/2", "NaN", "-1", "null"]
ODD_VALUES = [None, True, False, 0, -1, -1e308, 1e308, 10 ** 30, -(10 ** 30), 2 ** 63,
              0.5, float("nan"), float("inf"), float("-inf"), [], {}, [None], {"": None},
              [[[[[]]]]], {"a": {"b": {"c": [1, "2", None]}}}]


def _paths(node, prefix=()):
    """Every (path) into a JSON tree, containers included."""
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*prefix, i))


def _get(doc, path):
    for p in path:
        doc = doc[p]
    return doc


def _garbage(rng: random.Random, depth: int = 0):
    kind = rng.randrange(6 if depth < 4 else 3)
    if kind == 0:
        return rng.choice(ODD_VALUES)
    if kind == 1:
        return rng.choice(ODD_TEXT)
    if kind == 2:
        return rng.choice([rng.randint(-10 ** 6, 10 ** 6), rng.uniform(-1e6, 1e6)])
    if kind == 3:
        return [_garbage(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == 4:
        return {rng.choice(["name", "outcome", "median", "verdict", "x", "\n"]):
                _garbage(rng, depth + 1) for _ in range(rng.randrange(4))}
    nest: object = rng.choice(ODD_VALUES)
    for _ in range(rng.randrange(2, 60)):
        nest = [nest] if rng.random() < 0.5 else {"k": nest}
    return nest


def _retype(value, rng: random.Random):
    if isinstance(value, bool):
        return rng.choice([str(value).lower(), int(value), None])
    if isinstance(value, (int, float)):
        return rng.choice([str(value), [value], {"value": value}, -value, value * 1e300,
                           float("nan"), None, bool(value)])
    if isinstance(value, str):
        return rng.choice([len(value), [value], {value[:20]: value}, value.encode().hex(),
                           value + rng.choice(ODD_TEXT), value[::-1], None, 0])
    if isinstance(value, list):
        return rng.choice([{str(i): v for i, v in enumerate(value)}, value[:1], value * 2,
                           len(value), None, [value]])
    if isinstance(value, dict):
        return rng.choice([list(value.values()), list(value), {}, None, "object",
                           {k: None for k in value}])
    return rng.choice(ODD_VALUES)


def mutate_tree(doc, rng: random.Random, schema: str):
    """One to three structural mutations of a JSON document (a deep copy)."""
    doc = copy.deepcopy(doc)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            return doc
        path = rng.choice(paths)
        parent, last = _get(doc, path[:-1]), path[-1]
        op = rng.randrange(7)
        if op == 0:  # delete the field or element
            del parent[last]
        elif op == 1:  # garbage in its place
            parent[last] = _garbage(rng)
        elif op == 2:  # same value, another type
            parent[last] = _retype(parent[last], rng)
        elif op == 3:  # a value from elsewhere in the document (plausible but wrong)
            parent[last] = copy.deepcopy(_get(doc, rng.choice(paths)))
        elif op == 4:  # numbers at their extremes
            parent[last] = rng.choice([-1, -0.0, 1e308, -1e308, 10 ** 25, 2 ** 64, 1e-320,
                                       float("nan"), float("inf")])
        elif op == 5:  # the schema string, wrong
            doc["schema"] = rng.choice([schema.replace("/1", "/2"), schema.upper(), "",
                                        None, 1, schema + "\n", "jaxcache.run/1",
                                        "jaxcache.bench/1", "jaxcache.audit/1"])
        else:  # an extra field, nested garbage
            target = parent if isinstance(parent, dict) else doc
            target[rng.choice(["extra", "cache_dir", "modules", "phases", "x\u202e"])] = \
                _garbage(rng)
    return doc


def mutate_text(text: str, rng: random.Random) -> bytes:
    """Damage to the bytes themselves: truncation, flips, invalid UTF-8, deep nesting."""
    data = text.encode("utf-8", "surrogatepass")
    op = rng.randrange(6)
    if op == 0:
        return data[:rng.randrange(len(data) + 1)]
    if op == 1:
        pos = rng.randrange(len(data))
        return data[:pos] + bytes([rng.randrange(256)]) + data[pos + 1:]
    if op == 2:
        pos = rng.randrange(len(data) + 1)
        return data[:pos] + rng.choice([b"\xff\xfe", b"\xc3", b"\x00", b"\xef\xbb\xbf",
                                        b"\xed\xa0\x80"]) + data[pos:]
    if op == 3:
        depth = rng.choice([100, 5000, 200000])
        return b"[" * depth + b"]" * depth
    if op == 4:
        lines = data.splitlines(keepends=True)
        if lines:
            del lines[rng.randrange(len(lines))]
        return b"".join(lines)
    return b"\xef\xbb\xbf" + data


def json_variant(doc, rng: random.Random, schema: str) -> bytes:
    if rng.random() < 0.85:
        mutated = mutate_tree(doc, rng, schema)
        return json.dumps(mutated, ensure_ascii=rng.random() < 0.5).encode(
            "utf-8", "surrogatepass")
    return mutate_text(json.dumps(doc), rng)


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return '""'
    if isinstance(v, float):
        return "nan" if v != v else ("inf" if v == float("inf") else
                                    "-inf" if v == float("-inf") else repr(v))
    if isinstance(v, (int, str)):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return "{ " + ", ".join(f"{_toml_key(str(k))} = {_toml_value(x)}" for k, x in v.items()) \
        + " }"


def to_toml(doc: dict) -> str:
    lines = [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in doc.items()
             if not (k == "cache" and isinstance(v, list) and v and
                     all(isinstance(t, dict) for t in v))]
    for table in doc.get("cache") if isinstance(doc.get("cache"), list) and doc["cache"] and \
            all(isinstance(t, dict) for t in doc["cache"]) else []:
        lines += ["", "[[cache]]"] + [f"{_toml_key(str(k))} = {_toml_value(v)}"
                                      for k, v in table.items()]
    return "\n".join(lines) + "\n"


def policy_variant(text: str, rng: random.Random) -> bytes:
    import tomllib

    if rng.random() < 0.8:
        mutated = mutate_tree(tomllib.loads(text), rng, "")
        mutated.pop("schema", None) if rng.random() < 0.9 else None
        return to_toml(mutated).encode("utf-8", "surrogatepass")
    return mutate_text(text, rng)


# --- running them ----------------------------------------------------------------------------

def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def call(argv: list[str], capsys) -> tuple[int, str]:
    from jaxcache.cli import main

    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 2
    return code, capsys.readouterr().err


def judge(code: int, err: str, argv: list[str], sample: bytes) -> None:
    where = f"{argv}\ninput: {sample[:300]!r}"
    assert code in (0, 1, 2), f"exit {code}: {err}\n{where}"
    assert "Traceback" not in err and "internal error" not in err, f"{err}\n{where}"
    if code == 2:
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("jaxcache:"), f"{err!r}\n{where}"


def feed(path: Path, variants: list[bytes], commands, capsys) -> Counter:
    """Write each variant to `path`, run the commands that read it, check it is unchanged."""
    codes: Counter = Counter()
    for i, data in enumerate(variants):
        path.write_bytes(data)
        path.chmod(0o600)
        before = _digest(path)
        argv = commands(i)
        code, err = call(argv, capsys)
        judge(code, err, argv, data)
        assert _digest(path) == before, f"{argv} changed its input"
        codes[code] += 1
    return codes


def through_subprocess(path: Path, variants: list[bytes], commands) -> None:
    for i, data in enumerate(variants):
        path.write_bytes(data)
        path.chmod(0o600)
        before = _digest(path)
        argv = commands(i)
        proc = subprocess.run([sys.executable, "-m", "jaxcache", *argv], capture_output=True,
                              text=True, env=ENV, timeout=120, errors="surrogateescape")
        judge(proc.returncode, proc.stderr, argv, data)
        assert _digest(path) == before


def _mixed(codes: Counter) -> None:
    """The variants reach past the first check: some are read and judged, some refused."""
    total = sum(codes.values())
    assert codes[2] >= total * 0.05 and codes[0] + codes[1] >= total * 0.05, codes


def test_run_records(real, capsys):
    rng = random.Random(SEED)
    root = real["root"]
    variants = [json_variant(real[rng.choice(["cold", "warm"])], rng, "jaxcache.run/1")
                for _ in range(VARIANTS)]
    path = root / "mutated-record.json"
    good = str(root / "good-cold.json")

    def commands(i: int) -> list[str]:  # alone, and after a good record (cross-run diffs)
        fmt = ["--format", "json"] if i % 3 == 0 else []
        return ["explain", *fmt, str(path)] if i % 2 else ["explain", *fmt, good, str(path)]

    _mixed(feed(path, variants, commands, capsys))
    through_subprocess(path, variants[:SUBPROCESS_SAMPLE], commands)


def test_bench_results(real, capsys):
    rng = random.Random(SEED + 1)
    root = real["root"]
    variants = [json_variant(real["bench"], rng, "jaxcache.bench/1") for _ in range(VARIANTS)]
    path = root / "mutated-bench.json"
    audit, good = str(root / "good-audit.json"), str(root / "good-bench.json")

    def commands(i: int) -> list[str]:
        if i % 2:
            return ["bench", "--compare", good, str(path)] if i % 4 == 1 else \
                ["bench", "--compare", str(path), good]
        return ["decide", "--audit", audit, "--bench", str(path),
                *(["--bench", good] if i % 4 == 2 else [])]

    _mixed(feed(path, variants, commands, capsys))
    through_subprocess(path, variants[:SUBPROCESS_SAMPLE], commands)


def test_audit_documents(real, capsys):
    rng = random.Random(SEED + 2)
    root = real["root"]
    variants = [json_variant(rng.choice(real["audits"]), rng, "jaxcache.audit/1")
                for _ in range(VARIANTS)]
    path = root / "mutated-audit.json"
    good = str(root / "good-bench.json")

    def commands(i: int) -> list[str]:
        fmt = ["--format", "json"] if i % 3 == 0 else []
        return ["decide", *fmt, "--audit", str(path), "--bench", good]

    _mixed(feed(path, variants, commands, capsys))
    through_subprocess(path, variants[:SUBPROCESS_SAMPLE], commands)


def test_policies(real, capsys):
    rng = random.Random(SEED + 3)
    root, cache = real["root"], real["cache"]
    variants = [policy_variant(real["policy"], rng) for _ in range(VARIANTS)]
    path = root / "mutated-policy.toml"

    def commands(i: int) -> list[str]:
        sealed = ["--sealed"] if i % 3 == 0 else []
        return ["audit", "--no-processes", *sealed, "--policy", str(path), str(cache)]

    _mixed(feed(path, variants, commands, capsys))
    record = root / "policy-run.json"

    def run_commands(i: int) -> list[str]:  # `run` ends the process: only in a subprocess
        return ["run", "--quiet", "--policy", str(path), "--cache-dir", str(cache),
                "--record", str(record), "--", "true"]

    through_subprocess(path, variants[:SUBPROCESS_SAMPLE], run_commands)
