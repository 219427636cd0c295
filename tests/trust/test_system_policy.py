"""A system-wide policy (issue 28, point 6): with no policy of the user's, jaxcache reads the
one an admin keeps at /etc/jaxcache/policy.toml, under the same checks; a user's own policy
wins. /etc is never touched: the file is placed in an overlay of /etc inside a private mount
namespace (real overlayfs), which disappears with it."""

from __future__ import annotations

import json
import sys

from attacks.storage import in_namespace, needs_ns
from support.users import mkdir, needs_root

pytestmark = [needs_root, needs_ns]

JAXCACHE = [sys.executable, "-m", "jaxcache"]


def test_the_system_policy_is_read_when_the_user_has_none(base, accounts, tmp_path):
    cache = mkdir(base / "team", 0o770, group=accounts.group)
    upper = mkdir(tmp_path / "upper", 0o755)
    mkdir(upper / "jaxcache", 0o755)
    (upper / "jaxcache" / "policy.toml").write_text(
        f'[[cache]]\npath = "{cache}"\ntrusted_groups = ["{accounts.group}"]\n')
    (upper / "jaxcache" / "policy.toml").chmod(0o644)
    work = mkdir(tmp_path / "work", 0o755)
    mine = mkdir(tmp_path / "cfg", 0o700)
    none = {"XDG_CONFIG_HOME": str(tmp_path / "nothing"), "JAX_PLATFORMS": "cpu"}
    own = {"XDG_CONFIG_HOME": str(mine), "JAX_PLATFORMS": "cpu"}
    audit = [*JAXCACHE, "audit", "--format", "json", "--no-processes", str(cache)]
    results = in_namespace([
        {"run": audit, "env": none},
        {"mount": ["mount", "-t", "overlay", "overlay", "-o",
                   f"lowerdir=/etc,upperdir={upper},workdir={work}", "/etc"]},
        {"run": audit, "env": none},
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
