"""The policy file's TOML read into the Policy model (trust/rules/policy_rules.py), once: a
pure parser, every key checked and every name resolved to its id here, PolicyError (one line)
for anything else. Reading the file (who may write it) is policy.py's `load`; the format is
described there.
"""

from __future__ import annotations

import os

from jaxcache.errors import PolicyError
from jaxcache.project.policy_keys import CACHE_TABLE, RULE_KEYS, TOP_LEVEL
from jaxcache.text import quoted, safe
from jaxcache.trust.rules.policy_rules import Policy, Rule, as_written, url_text
from jaxcache.trust.rules.target import is_url

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import TypeGuard

    from jaxcache.trust.inputs.public_keys import PublicKey
    from jaxcache.trust.kernel.principals import Accounts
    from jaxcache.trust.rules.identities import TrustedIdentity

_KEY_FIELDS = {"holder", "key", "name", "not_before", "not_after", "trust_signing_time"}
_ID = frozenset("0123456789abcdef")



def parse(data: bytes, source: str, accounts: Accounts) -> Policy:
    """The policy in `data`, read from `source`; PolicyError (one line) if it is none."""
    from jaxcache import validate as v

    try:
        doc = v.parse_toml(data)
    except v.Unreadable as exc:
        raise PolicyError(f"policy file {safe(source)} is {exc}") from None
    return policy_of(source, doc, accounts)


def _is_name(value: object) -> TypeGuard[str]:
    """A string the system calls can take: user, group and path names hold no NUL."""
    return isinstance(value, str) and "\0" not in value


def _rule(data: Mapping[str, object], where: str, accounts: Accounts, url: bool = False) -> Rule:
    unknown = set(data) - (TOP_LEVEL if where == "top level" else CACHE_TABLE)
    if unknown:
        raise PolicyError(f"policy: unknown key(s) {safe(', '.join(sorted(unknown)))} at "
                          f"{where}")
    if url and set(data) & RULE_KEYS:
        raise PolicyError(f"policy: {where} is a bucket: only the key settings (trusted_keys, "
                          "revoked_keys, signatures_needed, require_build) apply there (its "
                          "writers are decided by the storage service's access control)")
    lists = {}
    for key in RULE_KEYS:
        value = data.get(key, [])
        if not isinstance(value, list) or not all(_is_name(v) for v in value):
            raise PolicyError(f"policy: {key} at {where} must be a list of strings "
                              "(without NUL bytes)")
        lists[key] = value
    uids, gids = set(), set()
    for name in lists["trusted_users"]:
        uid = accounts.uid_of(name)
        if uid is None:
            raise PolicyError(f"policy: trusted user {quoted(name)} at {where} does not exist")
        uids.add(uid)
    signers = set()
    for name in lists["trusted_signers"]:
        uid = accounts.uid_of(name)
        if uid is None:
            raise PolicyError(f"policy: trusted signer {quoted(name)} at {where} does not exist")
        signers.add(uid)
    for name in lists["trusted_groups"]:
        gid = accounts.gid_of(name)
        if gid is None:
            raise PolicyError(f"policy: trusted group {quoted(name)} at {where} does not exist")
        gids.add(gid)
    if lists["accepted_storage"] and where == "top level":
        raise PolicyError("policy: accepted_storage vouches for what one cache path is stored on: "
                          "put it in that path's [[cache]] table, not at the top level")
    for point in lists["accepted_storage"]:
        if not os.path.isabs(point):
            raise PolicyError(f"policy: accepted_storage {quoted(point)} at {where} must be an "
                              "absolute mount point")
    restored = data.get("restored_from")
    if restored is not None and where == "top level":
        raise PolicyError("policy: restored_from names the source of one cache path's entries: "
                          "put it in that path's [[cache]] table, not at the top level")
    if restored is not None and (not _is_name(restored) or not restored.strip()):
        raise PolicyError(f"policy: restored_from at {where} must be a non-empty string naming "
                          "the source you trust (e.g. \"actions/cache, written only by the "
                          "default branch\")")
    if restored is not None and url:
        raise PolicyError(f"policy: {where} is a bucket: restored_from applies to a local "
                          "directory (a bucket's entries are judged by their signatures)")
    ledgers = _trusted_ledgers(data.get("trusted_ledgers", []), where, url)
    names = tuple(lists["trusted_users"]) + tuple(f"group {g}" for g in lists["trusted_groups"])
    return Rule(frozenset(uids), frozenset(gids), frozenset(lists["accepted_filesystems"]), names,
                _trusted_keys(data.get("trusted_keys", []), where, accounts, url),
                frozenset(os.path.normpath(p) for p in lists["accepted_storage"]),
                (restored.strip(),) if restored is not None else (),
                _revoked_keys(data.get("revoked_keys", []), where),
                _signatures_needed(data.get("signatures_needed"), where), frozenset(signers),
                _require_build(data.get("require_build", False), where), ledgers,
                _identities(data.get("trusted_identities", []), "trusted_identities", where),
                _identities(data.get("revoked_identities", []), "revoked_identities", where),
                _trust_root(data.get("sigstore_trust_root"), where))


def _trusted_ledgers(items: object, where: str, url: bool) -> tuple[str, ...]:
    """trusted_ledgers = ["/home/teamb/.local/state/jaxcache/origin.ledger"]: the origin
    ledgers of writers this table (or the top level) trusts, by absolute path."""
    if not isinstance(items, list) or not all(_is_name(i) for i in items):
        raise PolicyError(f"policy: trusted_ledgers at {where} must be a list of absolute "
                          "paths (a trusted writer's origin ledger, e.g. "
                          "\"/home/teamb/.local/state/jaxcache/origin.ledger\")")
    if items and url:
        raise PolicyError(f"policy: {where} is a bucket: trusted_ledgers applies to a local "
                          "directory (a bucket's entries are judged by their signatures)")
    for item in items:
        if not os.path.isabs(item) or item.endswith("/"):
            raise PolicyError(f"policy: trusted_ledgers {quoted(item)} at {where} must be the "
                              "absolute path of a ledger file")
    return tuple(dict.fromkeys(os.path.normpath(i) for i in items))


def _trusted_keys(items: object, where: str, accounts: Accounts, url: bool = False
                  ) -> tuple[PublicKey, ...]:
    """trusted_keys = [{ holder = "ci-publisher", key = "ed25519:..." }]: a sealed cache. For
    a bucket the holder names a principal of the storage service, not a local user. A key
    may also carry `name`, `not_before` / `not_after` (RFC 3339 with an offset) and
    `trust_signing_time` (keyring.py: the softer reading of not_after)."""
    from dataclasses import replace

    from jaxcache.trust.inputs.public_keys import KeyFileError, parse_public

    shape = ("a list of { holder = \"USER\", key = \"ed25519:...\" } tables (optional: name, "
             "not_before, not_after, trust_signing_time)")
    if not isinstance(items, list) or not all(
            isinstance(i, dict) and {"holder", "key"} <= set(i) <= _KEY_FIELDS and
            _is_name(i["holder"]) and _is_name(i["key"]) for i in items):
        raise PolicyError(f"policy: trusted_keys at {where} must be {shape}")
    out = []
    for item in items:
        if not url and accounts.uid_of(item["holder"]) is None:
            raise PolicyError(f"policy: key holder {quoted(item['holder'])} at {where} does "
                              "not exist")
        name = item.get("name")
        if name is not None and not _is_name(name):
            raise PolicyError(f"policy: a key name at {where} must be a string")
        try:
            key = parse_public(item["key"], item["holder"], name=name)
        except KeyFileError as exc:
            raise PolicyError(f"policy: trusted_keys at {where}: {exc}") from None
        soft = item.get("trust_signing_time", False)
        if not isinstance(soft, bool):
            raise PolicyError(f"policy: trust_signing_time of key {key.label} at {where} must "
                              "be true or false")
        start = _moment(item.get("not_before"), "not_before", key.label, where)
        end = _moment(item.get("not_after"), "not_after", key.label, where)
        if start is not None and end is not None and start >= end:
            raise PolicyError(f"policy: key {key.label} at {where}: not_before must come "
                              "before not_after")
        if soft and end is None:
            raise PolicyError(f"policy: key {key.label} at {where}: trust_signing_time only "
                              "changes how not_after is read; give not_after")
        out.append(replace(key, not_before=start, not_after=end, signing_time=soft))
    return tuple(out)


def _moment(value: object, field: str, label: str, where: str) -> float | None:
    """An RFC 3339 moment with an offset (a TOML offset date-time or a string), as POSIX
    seconds. A date or a local time is refused: its moment depends on where it is read."""
    import datetime as dt

    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value)
        except ValueError:
            raise PolicyError(f"policy: {field} of key {safe(label)} at {where} is not an RFC "
                              f"3339 time: {quoted(str(value), 60)} (want e.g. "
                              "2027-01-01T00:00:00Z)") from None
    if not isinstance(value, dt.datetime):
        raise PolicyError(f"policy: {field} of key {safe(label)} at {where} must be a time "
                          "with its offset, e.g. 2027-01-01T00:00:00Z (a date alone is "
                          "ambiguous)")
    if value.tzinfo is None or value.utcoffset() is None:
        raise PolicyError(f"policy: {field} of key {safe(label)} at {where} has no offset "
                          "(add Z for UTC, or +01:00): a local time means another moment on "
                          "each machine")
    try:
        from jaxcache.trust.rules.keyring import when

        moment = value.timestamp()
        when(moment)  # reports write it back in UTC: a moment they cannot write is refused
        return moment
    except (ValueError, OverflowError, OSError):
        raise PolicyError(f"policy: {field} of key {safe(label)} at {where} is out of range: "
                          f"{safe(str(value)[:40])}") from None


def _revoked_keys(items: object, where: str) -> tuple[bytes | str, ...]:
    """revoked_keys = ["ed25519:...", "name:ed25519:...", "<16 hex key id>"]."""
    from jaxcache.trust.inputs.public_keys import KeyFileError, parse_public

    if not isinstance(items, list) or not all(_is_name(i) for i in items):
        raise PolicyError(f"policy: revoked_keys at {where} must be a list of key texts "
                          "(ed25519:...) or key ids")
    out: list[bytes | str] = []
    for item in items:
        text = item.strip()
        if len(text) == 16 and _ID.issuperset(text):
            out.append(text)
            continue
        try:
            out.append(parse_public(text).raw)
        except KeyFileError as exc:
            raise PolicyError(f"policy: revoked_keys at {where}: {exc} (or give a 16-hex key "
                              "id)") from None
    return tuple(out)


# [[trusted_identities]] fields (trust/rules/identities.py): which platform's claims each names
_GITHUB_FIELDS = {"repository", "workflow_ref", "caller_workflow_ref"}
_GITLAB_FIELDS = {"project_path", "ci_config_ref_uri"}
_PATTERNED = _GITHUB_FIELDS | _GITLAB_FIELDS | {"ref"}
_SWITCHES = {"any_ref", "any_event"}  # true: said explicitly that any ref / event will do
_IDENTITY_FIELDS = ({"issuer", "holder", "name", "event"} | _PATTERNED | _SWITCHES
                    | {f"{f}_glob" for f in _PATTERNED})
_REVOKED_ONLY = {"commit", "run"}


def _identities(items: object, setting: str, where: str) -> tuple[TrustedIdentity, ...]:
    """[[trusted_identities]] / [[revoked_identities]]: tables of exact claims a keyless
    signature's certificate must state (a revoked one: every field it gives)."""
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise PolicyError(f"policy: {setting} at {where} must be an array of tables "
                          f"([[{setting}]] with issuer = \"...\" and the identity's claims)")
    return tuple(_identity(item, setting, where) for item in items)


def _identity(item: Mapping[str, object], setting: str, where: str) -> TrustedIdentity:
    from jaxcache.trust.rules import identities as ids

    revoked = setting == "revoked_identities"
    allowed = (_IDENTITY_FIELDS - _SWITCHES | _REVOKED_ONLY) if revoked else _IDENTITY_FIELDS
    at = f"{setting} at {where}"
    if "ref_protected" in item:
        raise PolicyError(f"policy: {at}: ref_protected cannot be checked by a reader: "
                          "Fulcio's certificate does not carry it (name the protected ref "
                          "itself: ref = \"refs/heads/main\")")
    unknown = set(item) - allowed
    if unknown:
        raise PolicyError(f"policy: {at}: unknown field(s) {safe(', '.join(sorted(unknown)))}"
                          f" (known: {', '.join(sorted(allowed))})")
    switches = {k: item[k] for k in _SWITCHES if k in item}
    if not all(isinstance(v, bool) for v in switches.values()):
        raise PolicyError(f"policy: {at}: {', '.join(sorted(switches))} must be true or false")
    texts = {k: v for k, v in item.items() if k not in _SWITCHES}
    if not all(_is_name(v) and v.strip() == v and v for v in texts.values()):
        raise PolicyError(f"policy: {at}: every field must be a non-empty string without "
                          "spaces around it")
    issuer = texts.get("issuer")
    if not isinstance(issuer, str):
        raise PolicyError(f"policy: {at}: an identity needs its issuer (e.g. issuer = "
                          f"\"{ids.GITHUB_ISSUER}\")")
    if "*" in issuer or not issuer.startswith("https://"):
        raise PolicyError(f"policy: {at}: issuer {quoted(issuer)} must be one exact https:// "
                          "URL (never a pattern: whoever runs a matching issuer would mint "
                          "your identity)")
    fields = {k: str(v) for k, v in texts.items()}
    for k, v in fields.items():
        if "*" in v and not k.endswith("_glob") and k not in ("holder", "name"):
            how = "an event is never a pattern" if k == "event" else \
                f"spell a pattern as {k}_glob"
            raise PolicyError(f"policy: {at}: {k} = {quoted(v)} holds a '*', but fields match "
                              f"exactly: {how}")
    base = {k.removesuffix("_glob") for k in fields}
    both = [k for k in _PATTERNED if k in fields and f"{k}_glob" in fields]
    if both:
        raise PolicyError(f"policy: {at}: give {both[0]} or {both[0]}_glob, not both")
    github = issuer == ids.GITHUB_ISSUER
    platform = ids.Platform.GITHUB if github else ids.Platform.GITLAB
    wrong = base & (_GITLAB_FIELDS if github else _GITHUB_FIELDS)
    if wrong:
        raise PolicyError(f"policy: {at}: {safe(', '.join(sorted(wrong)))} is "
                          f"{'GitLab' if github else 'GitHub'}'s claim, but issuer "
                          f"{quoted(issuer)} is {'GitHub' if github else 'not GitHub'}'s")
    any_ref, any_event = switches.get("any_ref") is True, switches.get("any_event") is True
    if revoked and len(base - {"issuer", "holder", "name"}) == 0:
        raise PolicyError(f"policy: {at}: a revoked identity needs a claim beside its issuer "
                          "(revoking a whole issuer: remove its trusted identities instead)")
    if not revoked:
        _pins_the_job(at, quoted(issuer), github, base, any_ref, any_event)

    def pattern(name: str) -> ids.Pattern | None:
        if name in fields:
            return ids.Pattern(fields[name])
        glob = fields.get(f"{name}_glob")
        return ids.Pattern(glob, True) if glob is not None else None

    ref = pattern("ref")
    if ref is not None and not ref.text.startswith("refs/"):
        raise PolicyError(f"policy: {at}: ref {quoted(ref.text)} must be a full ref "
                          "(refs/heads/main, refs/tags/v1)")
    repo = pattern(platform.repository_word)
    workflow = pattern(platform.workflow_word)
    caller = pattern("caller_workflow_ref")
    for word, wf in ((platform.workflow_word, workflow), ("caller_workflow_ref", caller)):
        if wf is not None and "@" not in wf.text:
            raise PolicyError(f"policy: {at}: {word} {quoted(wf.text)} must name the ref it "
                              "runs at (...@refs/heads/main)")
    if github and repo is not None and workflow is not None and not (
            repo.glob or workflow.glob) and not workflow.text.startswith(repo.text + "/"):
        raise PolicyError(f"policy: {at}: workflow_ref {quoted(workflow.text)} is not in "
                          f"repository {quoted(repo.text)}")
    return ids.TrustedIdentity(platform, issuer, repo, workflow, ref, caller,
                               fields.get("event"), any_ref, any_event, fields.get("commit"),
                               fields.get("run"), fields.get("holder"), fields.get("name"),
                               revoked=revoked)


def _pins_the_job(at: str, issuer: str, github: bool, base: set[str], any_ref: bool,
                  any_event: bool) -> None:
    """A trusted identity names the job that ran, not only the workflow file that signed: its
    repository, its workflow (GitLab: the CI config the pipeline ran, which a maintainer can
    point at another project's file), the ref it ran for and the event that started it, or
    says explicitly that any ref or event will do. Without the ref, a pull request's job that
    calls the trusted workflow (a reusable one signs as itself) would be trusted."""
    need = ["repository", "workflow_ref"] if github else ["project_path", "ci_config_ref_uri"]
    missing = [n for n in need if n not in base]
    if missing:
        raise PolicyError(f"policy: {at}: an identity of {issuer} needs "
                          f"{' and '.join(missing)} (what a reader checks, exactly)")
    for field, switch, example, why in (
            ("ref", any_ref, "ref = \"refs/heads/main\"",
             "a pull request's or another branch's job running the same workflow would be "
             "trusted"),
            ("event", any_event, "event = \"push\"",
             "a pull_request_target or issue_comment job on the same ref would be trusted")):
        if field in base and switch:
            raise PolicyError(f"policy: {at}: give {field} or any_{field} = true, not both")
        if field not in base and not switch:
            raise PolicyError(f"policy: {at}: an identity must name the {field} its jobs run "
                              f"for ({example}): without it {why}; to trust any {field} "
                              f"anyway, say any_{field} = true")


def _trust_root(value: object, where: str) -> str | None:
    """sigstore_trust_root = "/etc/jaxcache/trusted_root.json": the Sigstore trusted root
    keyless signatures are verified against, offline (read as a protected input)."""
    if value is None:
        return None
    if not _is_name(value) or not os.path.isabs(value):
        raise PolicyError(f"policy: sigstore_trust_root at {where} must be the absolute path "
                          "of a Sigstore trusted_root.json")
    return os.path.normpath(value)


def _signatures_needed(value: object, where: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 16:
        raise PolicyError(f"policy: signatures_needed at {where} must be a whole number from "
                          f"1 to 16, not {safe(str(value)[:40])}")
    return value


def _require_build(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise PolicyError(f"policy: require_build at {where} must be true or false, not "
                          f"{safe(str(value)[:40])}")
    return value


def policy_of(source: str, data: Mapping[str, object], accounts: Accounts) -> Policy:
    """The policy a parsed TOML document `data` (from `source`) declares."""
    default = _rule(data, "top level", accounts)
    per_path = []
    caches = data.get("cache", [])
    if not isinstance(caches, list):
        raise PolicyError("policy: [[cache]] must be an array of tables")
    for i, item in enumerate(caches):
        if not isinstance(item, dict) or not _is_name(item.get("path")):
            raise PolicyError(f"policy: [[cache]] number {i + 1} needs a string 'path'")
        where = f"[[cache]] {safe(item['path'])}"
        if is_url(item["path"]):
            text = url_text(item["path"])
            if text is None:
                raise PolicyError(f"policy: [[cache]] path {quoted(item['path'])} is not a "
                                  "gs:// or s3://bucket/prefix URL")
            per_path.append((text, _rule(item, where, accounts, url=True)))
            continue
        if not os.path.isabs(item["path"]):
            raise PolicyError(f"policy: [[cache]] path {quoted(item['path'])} must be absolute "
                              "(or a gs:// or s3://bucket/prefix URL)")
        per_path.append((as_written(item["path"]), _rule(item, where, accounts)))
    policy = Policy(source, default, tuple(per_path))
    _coherent_keys(policy)
    return policy


def _coherent_keys(policy: Policy) -> None:
    """Each path's keys as a reader merges them (the top level with the path's table): no key
    both trusted and revoked, no threshold the trusted keys cannot meet."""
    from jaxcache.trust.rules import keyring

    for where, rule in [("top level", policy.default)] + [
            (f"[[cache]] {safe(p)}", policy.declared(p)) for p, _ in policy.per_path]:
        try:
            keyring.for_rule(rule)
        except keyring.KeyRingError as exc:
            raise PolicyError(f"policy: {where}: {exc}") from None
