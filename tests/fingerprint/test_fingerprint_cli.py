"""`jaxcache fingerprint` as a user runs it: text, JSON against its schema, --short, --compare
and bad input (one line, exit 2)."""

from __future__ import annotations

import json
import os
import re
from importlib import resources

import jsonschema
from support.jobs import jaxcache, no_state


def _schema() -> dict:
    return json.loads(resources.files("jaxcache.documents.schemas")
                      .joinpath("fingerprint.schema.json").read_text())


def test_text_json_and_short_agree_and_the_first_run_says_it_hashes(tmp_path):
    # an install nobody has hashed yet, of your own: a jaxlib folder found first on PYTHONPATH
    site = tmp_path / "site"
    (site / "jaxlib").mkdir(parents=True)
    (site / "jaxlib" / "__init__.py").write_text("")
    (site / "jaxlib" / "libjax_common.so").write_bytes(os.urandom(4096))
    (site / "jaxlib-0.10.2.dist-info").mkdir()
    env = {**no_state(tmp_path), "PYTHONPATH": str(site)}
    first = jaxcache("fingerprint", env=env)
    assert first.returncode == 0, first.stderr
    assert "hashing 1 shared object " in first.stderr
    assert first.stderr.rstrip().endswith("once per install")  # yours: kept for every user
    again = jaxcache("fingerprint", "--format", "json", env=env)
    assert again.returncode == 0 and "hashing" not in again.stderr
    doc = json.loads(again.stdout)
    jsonschema.validate(doc, _schema())
    short = jaxcache("fingerprint", "--short", env=env)
    assert short.stdout.strip() == doc["id"] and re.fullmatch(r"[0-9a-f]{16}\n", short.stdout)
    assert f"fingerprint {doc['id']}" in first.stdout
    assert doc["build"]["digest"][:16] in first.stdout and doc["machine"] in first.stdout
    assert jaxcache("fingerprint", "-q", env=no_state(tmp_path / "q")).stderr == ""


def test_compare_says_whether_another_hosts_entries_load_here(tmp_path):
    env = no_state(tmp_path)
    doc = json.loads(jaxcache("fingerprint", "--format", "json", env=env).stdout)
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps(doc))
    same = jaxcache("fingerprint", "--compare", str(mine), env=env)
    assert same.returncode == 0 and same.stdout.startswith("LOADS"), same.stdout
    wider = dict(doc, cpu=dict(doc["cpu"], features=doc["cpu"]["features"] + " amx_fp16"))
    other = tmp_path / "other.json"
    other.write_text(json.dumps(wider))
    judged = jaxcache("fingerprint", "--compare", str(other), "--format", "json", env=env)
    assert judged.returncode == 1, judged.stderr
    compared = json.loads(judged.stdout)["compared"]
    jsonschema.validate(json.loads(judged.stdout), _schema())
    assert compared["outcome"] == "different" and not compared["loads"]
    assert compared["differences"] == [{"field": "cpu features", "match": "subset",
                                        "writer": "amx_fp16", "reader": ""}]
    text = jaxcache("fingerprint", "--compare", str(other), env=env)
    assert "DOES NOT LOAD" in text.stdout and "amx_fp16" in text.stdout
    narrower = dict(doc, cpu=dict(doc["cpu"], features=" ".join(
        doc["cpu"]["features"].split()[1:])))
    other.write_text(json.dumps(narrower))
    assert jaxcache("fingerprint", "--compare", str(other), env=env).returncode == 0


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    env = no_state(tmp_path)
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(b"\x1b[31m{nope")
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"build": None, "machine": "x86_64"}))
    writable = tmp_path / "writable.json"
    writable.write_text("{}")
    writable.chmod(0o666)
    for args in (("--compare", str(garbage)), ("--compare", str(wrong)),
                 ("--compare", str(tmp_path / "missing.json")), ("--compare", str(writable)),
                 ("--short", "--compare", str(garbage)), ("--format", "sarif")):
        proc = jaxcache("fingerprint", *args, env=env)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        lines = [line for line in proc.stderr.splitlines() if "hashing" not in line]
        assert len(lines) == 1 or lines[0].startswith("usage:"), (args, proc.stderr)
        assert "Traceback" not in proc.stderr and "\x1b" not in proc.stderr
