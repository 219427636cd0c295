"""A trusted writer's ledger where the job itself judges each load (issue 44, point 2).

teamb's watched `jaxcache run` fills the team share (tests/trust/conftest.py's `team`); with
the policy naming teamb's ledger (trusted_ledgers), your `jaxcache run --require-origin` (and
under CI) and `enable(require_origin=True)` HIT teamb's entries, whose bytes a line of that
ledger names for that very name; bytes it does not vouch for under that name (swapped in after
the audit, inside the job) are still a miss, and the job computes its own result. `ls`, run's
summary and its record say vouched, by whose ledger. Real users, real JAX jobs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.jobs import JOB_TIMEOUT_S, jaxcache
from support.ledgers import TWO_JITS_OUTPUT
from support.team import copy_share, entries, env, policy, uid
from support.users import needs_root

pytestmark = needs_root
pytest.importorskip("jax")

# the job swaps jit_h's entry for jit_f's bytes once JAX is imported (after the audit: the
# gate holds `import jax` until then), then computes: a gate that took any bytes a trusted
# ledger names, whatever the name, would make h compute f
SWAPPING_JOB = """
import sys, numpy as np, jax
from pathlib import Path
share = Path(sys.argv[1])
if len(sys.argv) > 2:
    named = {p.name.split("-", 1)[0]: p for p in share.iterdir() if p.name.endswith("-cache")}
    named["jit_h"].write_bytes(named["jit_f"].read_bytes())
def f(x): return x * 2 + 1
def h(x): return x - 3
x = np.arange(4, dtype=np.float32)
print("A", jax.jit(f)(x).tolist(), jax.jit(h)(x).tolist())
"""


def _vouching(team: dict, accounts, name: str, share: Path | None = None) -> str:
    return policy(team, accounts.b, name, f'trusted_ledgers = ["{team["ledger"]}"]\n',
                  path=share)


def _run(team: dict, pol: str, share: Path, record: Path, *job_args: str, **extra: str
         ) -> tuple[subprocess.CompletedProcess, dict]:
    job = team["top"] / "swapping_job.py"
    if not job.exists():
        job.write_text(SWAPPING_JOB)
    proc = jaxcache("run", "--require-origin", "--policy", pol, "--cache-dir", str(share),
                    "--record", str(record), "--", sys.executable, str(job), str(share),
                    *job_args, env=env(team, **extra))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(record.read_text())
    from jaxcache.documents import schemas

    pytest.importorskip("jsonschema").validate(doc, schemas.load("run"))
    return proc, doc


def _outcomes(doc: dict) -> dict[str, str]:
    return {m["name"]: m["outcome"] for m in doc["modules"]}


@pytest.mark.parametrize("ci", [{}, {"GITHUB_ACTIONS": "true"}], ids=["required", "ci"])
def test_the_job_hits_what_a_trusted_ledger_vouches_for(team, accounts, tmp_path, ci):
    pol = _vouching(team, accounts, "job-hits")
    proc, doc = _run(team, pol, team["shared"], tmp_path / "r.json", **ci)
    assert proc.stdout == TWO_JITS_OUTPUT
    assert _outcomes(doc) == {"jit_f": "hit", "jit_h": "hit"}, doc["modules"]
    origin = doc["cache_dir"]["origin"]
    assert origin["vouched"] == 2 and origin["unknown"] == 0
    assert origin["vouched_by"] == {accounts.b: 2}
    assert {e["origin"] for e in origin["not_yours"]} == {"vouched"}
    assert {e["vouched_by"] for e in origin["not_yours"]} == {accounts.b}
    said = " ".join(proc.stderr.split())
    assert f"2 vouched (by {accounts.b}'s origin ledger)" in said, proc.stderr
    assert "2 unknown" not in said


def test_bytes_swapped_in_after_the_audit_are_a_miss(team, accounts, tmp_path):
    share = copy_share(team, "swapped")
    pol = _vouching(team, accounts, "job-swapped", share)
    proc, doc = _run(team, pol, share, tmp_path / "r.json", "swap")
    assert proc.stdout == TWO_JITS_OUTPUT  # h computed h: the job's output is its own
    assert _outcomes(doc)["jit_f"] == "hit" and _outcomes(doc)["jit_h"] != "hit", doc["modules"]


def test_the_in_job_gate_rechecks_the_trusted_ledger(team, accounts):
    """The gate reads the trusted ledger again as a trusted input teamb may own: handed the
    writers the policy trusts it vouches; handed others (the ledger's owner not among them), or
    asked for other bytes under that name, it does not."""
    from jaxcache.lifecycle import witness

    named = entries(team["shared"])
    key = named["jit_f"].name.removesuffix("-cache")
    value = named["jit_f"].read_bytes()
    path = str(team["ledger"])
    assert witness.gatekeeper(str(team["state"] / "none.ledger"),
                              trusted=((path, frozenset({uid(accounts.b)})),))(
        str(team["shared"]), key, value)
    assert not witness.gatekeeper(str(team["state"] / "none.ledger"),
                                  trusted=((path, frozenset({uid(accounts.c)})),))(
        str(team["shared"]), key, value)
    assert not witness.gatekeeper(str(team["state"] / "none.ledger"),
                                  trusted=((path, frozenset({uid(accounts.b)})),))(
        str(team["shared"]), key, named["jit_h"].read_bytes())
    assert not witness.gatekeeper(str(team["state"] / "none.ledger"))(
        str(team["shared"]), key, value)


ENABLE_JOB = """
import sys, warnings, numpy as np, jax, jaxcache
hits = []
jax.monitoring.register_event_listener(
    lambda event, **kw: hits.append(1) if event == "/jax/compilation_cache/cache_hits" else None)
jaxcache.enable(sys.argv[1], policy=sys.argv[2], require_origin=True)
def f(x): return x * 2 + 1
def h(x): return x - 3
x = np.arange(4, dtype=np.float32)
print("A", jax.jit(f)(x).tolist(), jax.jit(h)(x).tolist(), len(hits))
"""


def test_enable_hits_what_a_trusted_ledger_vouches_for(team, accounts, tmp_path):
    pol = _vouching(team, accounts, "enable-hits")
    job = tmp_path / "enable_job.py"
    job.write_text(ENABLE_JOB)
    ran = subprocess.run([sys.executable, str(job), str(team["shared"]), pol],
                         capture_output=True, text=True, env=env(team), timeout=JOB_TIMEOUT_S)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == TWO_JITS_OUTPUT.rstrip("\n") + " 2\n", ran.stdout


def test_ls_says_vouched_by_whose_ledger(team, accounts):
    pol = _vouching(team, accounts, "ls")
    text = jaxcache("ls", "--policy", pol, str(team["shared"]), env=env(team))
    # teamb's files are foreign-owned, but the policy trusts teamb to write there: nothing to act
    # on (issue 44: a team share reads true), so ls exits 0
    assert text.returncode == 0, text.stdout + text.stderr
    rows = text.stdout.splitlines()
    assert sum(" vouched " in r for r in rows[1:-1]) == 2, text.stdout
    assert f"origin: 2 vouched (by {accounts.b}'s origin ledger)" in rows[-1], text.stdout
    doc = json.loads(jaxcache("ls", "--format", "json", "--policy", pol, str(team["shared"]),
                              env=env(team)).stdout)
    from jaxcache.documents import schemas

    pytest.importorskip("jsonschema").validate(doc, schemas.load("ls"))
    assert doc["origins"]["vouched"] == 2 and doc["origins"]["unknown"] == 0
    assert {e["origin"] for e in doc["entries"] if e["origin"]} == {"vouched"}
    # without the policy's word, they are a trusted writer's entries no ledger of yours knows
    plain = jaxcache("ls", str(team["shared"]), env=env(team))
    assert "2 unknown" in plain.stdout.splitlines()[-1], plain.stdout
    assert plain.returncode == 1, plain.stderr  # and files someone else owns are flagged


def test_build_words_name_whose_entries(team):
    """A vouched entry's build, where it cannot be compared, is said to be of its writer's
    entries, not "of yours"."""
    from jaxcache.fingerprint import current
    from jaxcache.trust.judgement import origin_findings
    from jaxcache.trust.provenance.origin import EntryOrigin, Origins

    origins = Origins((EntryOrigin("jit_f-1-cache", "vouched", 1.0, "", vouched_by="teamb"),
                       EntryOrigin("jit_h-2-cache", "yours", 1.0, "")), "/l",
                      reader=current())
    said = [f.message for f in origin_findings.build_findings(origins, "/c", ci=None,
                                                               required=False)]
    assert any("1 entry of teamb's" in m for m in said), said
    assert any("1 entry of yours" in m for m in said), said
