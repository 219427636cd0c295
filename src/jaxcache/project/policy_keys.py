"""The protected policy's keys, named once: its parser (trust/inputs/policy_toml.py) refuses
every other key, and the project file (project_toml.py) refuses each of these as a trust
setting, so a key the policy gains is a trust setting in a project file with no second list
to keep. Here rather than beside the parser because project/ sits below trust/ and may not
import it (tests/test_layers.py).
"""

from __future__ import annotations

# who may write a local cache path, and what it may be stored on: lists of names
RULE_KEYS = frozenset({"trusted_users", "trusted_groups", "trusted_signers",
                       "accepted_filesystems", "accepted_storage"})
# the settings of a path (at the top level: of every path), after its writers: which
# signatures a reader accepts, and where its entries came from
_SETTINGS = RULE_KEYS | {
    "trusted_keys", "revoked_keys", "signatures_needed", "require_build", "trusted_identities",
    "revoked_identities", "sigstore_trust_root", "restored_from", "trusted_ledgers"}
# the file's top level: the settings and the [[cache]] tables
TOP_LEVEL = _SETTINGS | {"cache"}
# a [[cache]] table: the path it is about and its settings
CACHE_TABLE = _SETTINGS | {"path"}
