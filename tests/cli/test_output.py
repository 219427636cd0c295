"""Output a person reads and output a program reads.

Text: the answer on the first line, no line over 200 characters on the bundled examples and
on a job whose jitted function takes a 240-leaf pytree. JSON: stdout is only the document
(never the job's own lines), and it validates against the schema shipped in the package.
"""

from __future__ import annotations

import json
import os
import re
import sys

import pytest
from support import paths
from support.jobs import jaxcache

from jaxcache.documents import schemas
from jaxcache.report import style
from jaxcache.text import plural, wrap

ROOT = paths.CHECKOUT
WIDE = str(ROOT / "tests" / "programs" / "wide_pytree.py")
EXAMPLES = {"mlp": [str(ROOT / "examples" / "mlp.py"), "--micro-steps", "4", "--steps", "2"],
            "train": [str(ROOT / "examples" / "train.py"), "--steps", "10", "--iters", "1"],
            "many_small": [str(ROOT / "examples" / "many_small.py"), "--functions", "12"]}
LONGEST = 200


def test_plural_agrees_with_its_count():
    assert [plural(n, "entry") for n in (0, 1, 2)] == ["0 entries", "1 entry", "2 entries"]
    assert plural(1, "trial") == "1 trial" and plural(3, "process") == "3 processes"


def test_shapes_summarized_with_count_bytes_and_digest():
    many = "(" + ", ".join(f"ShapedArray(float32[8,{4 + i % 5}])" for i in range(240)) + ",)"
    text = style.shapes(many)
    assert text.startswith("240 inputs totalling 46.1 KB: float32[8,4], float32[8,5], "
                           "float32[8,6] and 237 more (digest ")
    assert "digest" in text and len(text) < 110
    assert style.shapes(many.replace("[8,4]", "[8,9]", 1)) != text  # one changed shape shows
    assert style.shapes("(ShapedArray(bfloat16[2,3]),)") == "1 input of 12 B: bfloat16[2,3]"
    # a typed PRNG key (jax.random.key) is an input like any other, not JAX's text (the fourth
    # trial: `inputs: (ShapedArray(key<fry>[]),)` beside `1 input of 4 B: float32[]`)
    assert style.shapes("(ShapedArray(key<fry>[]),)") == "1 input of 8 B: key<fry>[]"
    assert style.shapes("(ShapedArray(key<rbg>[3]), ShapedArray(float32[]))") == \
        "2 inputs totalling 52 B: key<rbg>[3], float32[]"
    assert style.shapes("(ShapedArray(key<new>[2]),)") == "1 input of unknown size: key<new>[2]"


def test_colour_only_where_asked(tmp_path):
    env = {**os.environ, "NO_COLOR": "1"}
    plain = jaxcache("audit", str(tmp_path), "--no-processes", env=env)
    forced = jaxcache("audit", str(tmp_path), "--no-processes", "--color", "always", env=env)
    assert "\x1b[" not in plain.stdout and plain.stdout.startswith("verdict: PRIVATE")
    assert forced.stdout.startswith("verdict: \x1b[1;32mPRIVATE\x1b[0m")
    never = jaxcache("audit", str(tmp_path), "--no-processes", "--color", "never")
    assert "\x1b[" not in never.stdout


def test_missing_path_is_said_first_and_must_exist_fails(tmp_path):
    path = str(tmp_path / "typo" / "deep" / "cache")
    proc = jaxcache("audit", path, "--no-processes")
    first, *how = proc.stdout.split("\nverdict as it stands: PRIVATE")[0].splitlines()
    assert proc.returncode == 0 and first.startswith(f"NOT FOUND: {path} does not exist")
    said = " ".join(line.strip() for line in how)  # wrapped: a long path on its own line
    assert f"jaxcache init {path}" in said and "3 directories" in said
    strict = jaxcache("audit", path, "--no-processes", "--must-exist")
    assert strict.returncode == 1 and "does not exist (--must-exist)" in strict.stderr
    doc = json.loads(jaxcache("audit", path, "--no-processes", "--format", "json").stdout)
    assert doc["exists"] is False


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Every command's output once: the examples and the 240-leaf job run and recorded, a
    one-trial bench of the 240-leaf job, its cache sealed and verified, decide on it."""
    tmp = tmp_path_factory.mktemp("out")
    env = {**os.environ, "XDG_STATE_HOME": str(tmp / "state"), "NO_COLOR": "1"}
    texts: dict[str, str] = {}
    docs: dict[str, tuple[str, dict]] = {}

    def both(name: str, *args: str, schema: str, codes=(0, 1)) -> None:
        text = jaxcache(*args, env=env)
        assert text.returncode in codes and "Traceback" not in text.stderr, (name, text.stderr)
        texts[name] = text.stdout + text.stderr
        js = jaxcache(*args, "--format", "json", env=env)
        assert js.returncode == text.returncode, (name, js.stderr)
        docs[name] = (schema, json.loads(js.stdout))

    records = {}
    for name, argv in {**EXAMPLES, "wide": [WIDE]}.items():
        rec = tmp / f"{name}.json"
        # many_small: every module skipped by one rule, however slow the machine
        run_env = {**env, "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "1000"} \
            if name == "many_small" else env
        proc = jaxcache("run", "--cache-dir", str(tmp / f"c-{name}"), "--record", str(rec),
                        "--", sys.executable, *argv, env=run_env)
        assert proc.returncode == 0, proc.stderr
        texts[f"run {name}"] = proc.stderr
        records[name] = str(rec)
        both(f"explain {name}", "explain", str(rec), schema="explain")
        both(f"ls {name}", "ls", str(tmp / f"c-{name}"), schema="ls")
        both(f"audit {name}", "audit", str(tmp / f"c-{name}"), "--no-processes",
             schema="audit")
    bench = tmp / "bench.json"
    proc = jaxcache("bench", "-t", "1", "-k", "1", "--json", str(bench), "--", sys.executable,
                    WIDE, env=env)
    assert proc.returncode in (0, 1), proc.stderr
    texts["bench"] = proc.stdout
    docs["bench"] = ("bench", json.loads(bench.read_text()))
    compare = jaxcache("bench", "--compare", str(bench), str(bench), env=env)
    texts["bench --compare"] = compare.stdout
    both("decide", "decide", str(tmp / "c-wide"), "--bench", str(bench), schema="decide")
    both("init", "init", str(tmp / "fresh"), schema="init")
    key = str(tmp / "k.key")
    assert jaxcache("keygen", key, env=env).returncode == 0
    # a plain run's entries (XLA sub-caches on) are never hit by a sealed reader: seal them
    # anyway, as asked, so that verify below has a sealed directory to check
    both("seal", "seal", str(tmp / "c-wide"), "--signing-key", key, "--allow-unhittable",
         schema="seal-scan")
    both("verify", "verify", str(tmp / "c-wide"), "--trusted-key", key + ".pub",
         schema="seal-scan")
    both("net", "net", schema="net")
    # a run without --record: its record goes to XDG_STATE_HOME, where `records` looks
    proc = jaxcache("run", "--cache-dir", str(tmp / "c-wide"), "--", sys.executable, WIDE,
                    env=env)
    assert proc.returncode == 0, proc.stderr
    both("records", "records", schema="records-list")
    both("records stats", "records", "stats", schema="records-stats")
    both("records prune", "records", "prune", "--keep", "1", "--dry-run",
         schema="records-prune")
    return {"texts": texts, "docs": docs, "env": env, "tmp": tmp, "key": key}


def test_no_line_over_200_characters(world):
    long = {name: max(text.splitlines(), key=len)[:120] for name, text in world["texts"].items()
            if text and max(map(len, text.splitlines())) > LONGEST}
    assert not long, long


def test_answer_first(world):
    texts = world["texts"]
    assert texts["audit wide"].startswith("verdict: PRIVATE - ")
    assert texts["verify"].startswith("VALID: every entry verifies (")
    assert texts["decide"].split(" ")[:1] == ["decision:"]
    assert texts["explain wide"].startswith(("CACHED: ", "UNCACHED: "))


def test_wide_inputs_summarized_in_text_and_whole_in_json(world):
    bench = world["texts"]["bench"].splitlines()
    at = next(i for i, line in enumerate(bench) if line.startswith("  cached jit_total: "))
    said = " ".join([bench[at], *(line.strip() for line in bench[at + 1:]
                                   if line.startswith("    "))])  # wrapped, never clipped
    # whole shapes, 'and N more', the digest, every '(' closed (issue 44: '... (...')
    assert re.fullmatch(r"  cached jit_total: 240 inputs totalling 46\.1 KB: float32\[8,4\], "
                        r"float32\[8,5\], float32\[8,6\] and 237 more \(digest [0-9a-f]{8}\)",
                        said), said
    shapes = {s["module"]: s["input_shapes"] for s in world["docs"]["bench"][1]["comparable"]
              ["shapes"]}
    assert shapes["jit_total"].count("ShapedArray") == 240  # the JSON keeps every one


def test_explain_groups_what_shares_a_reason(world):
    text = world["texts"]["explain many_small"]
    assert "... and " in text and "more modules" in text
    assert len(text.splitlines()) < 20


def test_every_json_document_validates_against_its_shipped_schema(world):
    jsonschema = pytest.importorskip("jsonschema")
    for name, (schema, doc) in world["docs"].items():
        jsonschema.validate(doc, schemas.load(schema)), name
        assert doc["schema"] == f"jaxcache.{schema}/1", name
    assert world["docs"]["records"][1]["records"]  # the records list is not vacuous


def test_explain_json_of_a_command_is_only_the_document(world):
    proc = jaxcache("explain", "--format", "json", "--", sys.executable, WIDE, env=world["env"])
    assert proc.returncode in (0, 1), proc.stderr
    doc = json.loads(proc.stdout)  # the job printed a line: it went to stderr
    pytest.importorskip("jsonschema").validate(doc, schemas.load("explain"))
    assert "11520.0" in proc.stderr and "11520.0" not in proc.stdout


def test_wrapped_prose_keeps_numbers_with_their_units():
    text = "the thresholds left 7.30 s of compile uncached (28% of the 26.15 s start-up) " * 3
    lines = wrap(text, "  ", limit=60)
    assert all(len(line) <= 60 for line in lines) and len(lines) > 3
    assert not any(line.rstrip().endswith(("7.30", "26.15")) for line in lines)
    assert " ".join(line.strip() for line in lines) == text.strip()


def test_verbose_lists_every_entry_and_quiet_only_the_answer(world):
    cache, pub = str(world["tmp"] / "c-wide"), world["key"] + ".pub"
    verbose = jaxcache("-v", "verify", cache, "--trusted-key", pub, env=world["env"])
    assert verbose.returncode == 0, verbose.stderr
    assert any(line.startswith("  VALID ") and "-cache" in line
               for line in verbose.stdout.splitlines())
    # without -v only the entries that need a word: here the ones a sealed reader never hits
    assert all("never hit" in line for line in world["texts"]["verify"].splitlines()
               if line.startswith("  VALID "))
    quiet = jaxcache("verify", cache, "--trusted-key", pub, "--quiet", "--color", "always",
                     env=world["env"])
    assert quiet.stdout.count("\n") == 1 and "VALID" in quiet.stdout  # colour kept, one line
    audit = jaxcache("audit", cache, "-q", "--no-processes", env=world["env"])
    assert audit.stdout == world["texts"]["audit wide"].splitlines()[0] + "\n"
