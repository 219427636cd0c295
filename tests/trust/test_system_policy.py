"""A system-wide policy (issue 28, point 6): with no policy of the user's, jaxcache reads the
one an admin keeps at /etc/jaxcache/policy.toml, under the same checks; a user's own policy
wins. /etc is never touched: the file is placed in an overlay of /etc inside a private mount
namespace (real overlayfs), which disappears with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from attacks.storage import in_namespace, needs_ns
from support.users import mkdir, needs_root

JAXCACHE = [sys.executable, "-m", "jaxcache"]


@needs_root
@needs_ns
def test_the_system_policy_is_read_when_the_user_has_none(base, accounts, tmp_path):
    cache = mkdir(base / "team", 0o770, group=accounts.group)
    upper = mkdir(tmp_path / "upper", 0o755)
    mkdir(upper / "jaxcache", 0o755)
    (upper / "jaxcache" / "policy.toml").write_text(
        f'[[cache]]\npath = "{cache}"\ntrusted_groups = ["{accounts.group}"]\n')
    (upper / "jaxcache" / "policy.toml").chmod(0o644)
    work = mkdir(tmp_path / "work", 0o755)
    mine = mkdir(tmp_path / "cfg", 0o700)
    # none: the suite's own (no team policy, whatever this machine has: conftest.py); then
    # etc: the machine's own place, with the overlay's file; own: the user's own file
    none = {"XDG_CONFIG_HOME": str(tmp_path / "nothing"), "JAX_PLATFORMS": "cpu"}
    etc = {**none, "JAXCACHE_SYSTEM_POLICY": ""}
    own = {**etc, "XDG_CONFIG_HOME": str(mine)}
    audit = [*JAXCACHE, "audit", "--format", "json", "--no-processes", str(cache)]
    results = in_namespace([
        {"run": audit, "env": none},
        {"mount": ["mount", "-t", "overlay", "overlay", "-o",
                   f"lowerdir=/etc,upperdir={upper},workdir={work}", "/etc"]},
        {"run": audit, "env": etc},
        {"run": ["sh", "-c", f"mkdir -p {mine}/jaxcache && printf 'trusted_users = []\\n' > "
                 f"{mine}/jaxcache/policy.toml && chmod 600 {mine}/jaxcache/policy.toml && "
                 + " ".join(audit)], "env": own},
    ], tmp_path)
    runs = [r for r in results if "stdout" in r]
    assert len(runs) == 3, results
    docs = [json.loads(r["stdout"]) for r in runs]
    assert docs[0]["verdict"] == "UNSAFE" and docs[0]["policy"] is None
    assert docs[1]["verdict"] == "SHARED-BY-POLICY", docs[1]["findings"]
    assert docs[1]["policy"] == "/etc/jaxcache/policy.toml"
    assert docs[2]["verdict"] == "UNSAFE"  # the user's own policy wins, and trusts no group
    assert docs[2]["policy"] == f"{mine}/jaxcache/policy.toml"


@needs_root
def test_jaxcache_system_policy_names_where_the_teams_policy_is(base, accounts, tmp_path):
    """An image or a module system that keeps the team's policy elsewhere names it with
    JAXCACHE_SYSTEM_POLICY: read under the same checks, and only where the user has none."""
    cache = mkdir(base / "team", 0o770, group=accounts.group)
    team = mkdir(tmp_path / "team-policy", 0o755) / "policy.toml"
    team.write_text(f'[[cache]]\npath = "{cache}"\ntrusted_groups = ["{accounts.group}"]\n')
    team.chmod(0o644)
    audit = [*JAXCACHE, "audit", "--format", "json", "--no-processes", str(cache)]
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "nothing"),
           "JAXCACHE_SYSTEM_POLICY": str(team)}
    doc = json.loads(subprocess.run(audit, env=env, capture_output=True, text=True).stdout)
    assert doc["verdict"] == "SHARED-BY-POLICY" and doc["policy"] == str(team)
    team.chmod(0o666)  # a team policy anyone can change is refused, wherever it is
    refused = subprocess.run(audit, env=env, capture_output=True, text=True)
    assert refused.returncode == 2 and str(team) in refused.stderr, refused.stderr


def test_a_relative_jaxcache_system_policy_is_one_line(tmp_path):
    proc = subprocess.run([*JAXCACHE, "audit", str(tmp_path)], capture_output=True, text=True,
                          env={**os.environ, "JAXCACHE_SYSTEM_POLICY": "policy.toml"},
                          cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == "jaxcache: JAXCACHE_SYSTEM_POLICY must be an absolute path\n"
