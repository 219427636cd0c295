"""The one admission: whether a cache may be used, and how (a plain directory, a sealed
directory, a sealed bucket, a generation), for `jaxcache run`, `enable()` and the sealed job alike.

Its order is the rule a reader reviews: the policy's word on a signing key first (a revoked
one signs nothing); a sealed cache's local tier must be private; then the audit of the cache
(the directory, its ancestors, its writers; for a sealed one, the keys and identities that
vouch for its entries); a missing directory is made private (mkdir 0700, then verified), but
never for a sealed reader, whose new empty directory would load nothing and lock its publisher
out; then the verdict: what may load is Verdict.ok (PRIVATE, SHARED-BY-POLICY, SEALED), a plain
cache's other verdicts only where the caller takes them (--allow-untrusted), and a sealed cache
only as SEALED, with trusted keys or identities. Anything else raises: UntrustedCacheError with
the report, JaxcacheError in one line. What to do with the admitted cache (the job's
environment, JAX's config, the sealed backend) is each caller's.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

from jaxcache.errors import JaxcacheError, UntrustedCacheError
from jaxcache.text import safe
from jaxcache.trust.findings import SEAL_KEYS, Verdict
from jaxcache.trust.judgement.audit import audit

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from jaxcache.fingerprint.model import Fingerprint
    from jaxcache.trust.create import InitResult
    from jaxcache.trust.inputs.public_keys import PublicKey
    from jaxcache.trust.judgement.audit import AuditReport
    from jaxcache.trust.kernel.principals import Accounts
    from jaxcache.trust.provenance.ledger_file import Ledger
    from jaxcache.trust.rules.policy_rules import Policy

NEEDS_KEYS = ("a sealed cache needs trusted keys or identities: --trusted-key (trusted_keys= "
              "in Python), a signing key, or trusted_keys or trusted_identities for this path "
              "in the policy")


class Kind(StrEnum):
    """How the admitted cache is used."""

    PLAIN = "plain"  # JAX's own cache, in a directory the audit trusts by its writers
    SEALED_DIRECTORY = "sealed-directory"  # loads only entries trusted keys signed
    SEALED_BUCKET = "sealed-bucket"  # the same, in gs:// or s3://
    GENERATION = "generation"  # one signed generation of a store (a directory, gs://, s3://)


class Asked(NamedTuple):
    """How a caller means to use the cache at `path` (a directory, or a bucket for a sealed
    cache). `keys`: trusted keys given besides the policy's; `signer`: the public half of the
    signing key the caller writes with (refused where the policy revokes it); `publisher`: it
    signs what it writes (a key, or keyless), so it may make a sealed directory; `local`: a
    sealed cache's private tier. For a plain cache: `allow_untrusted` takes any verdict,
    `require_origin` refuses entries no watched job wrote, `fingerprint` is the build whose
    loads the origins are judged for, `env` the environment CI is detected from. `remember`: a
    directory is audited through the memo of its last judgement that passed (`jaxcache run`'s
    audit, trust/inputs/audit_memo.py): an unchanged directory's entries are not judged again.
    `generation`: a sealed reader of a store of generations (its writers judged as a sealed
    cache's: they can withhold entries, not choose them)."""

    path: str
    sealed: bool = False
    keys: tuple[PublicKey, ...] = ()
    signer: PublicKey | None = None
    publisher: bool = False
    local: str | None = None
    allow_untrusted: bool = False
    require_origin: bool = False
    fingerprint: Callable[[], Fingerprint] | None = None
    env: Mapping[str, str] | None = None
    remember: bool = False
    generation: bool = False


class Admitted(NamedTuple):
    """A cache the admission let in: its path (resolved; a bucket's URL), how it is used, the
    audit's report, a sealed cache's local tier (this build's folder), and the directories
    made for it (mode 0700)."""

    path: str
    kind: Kind
    report: AuditReport
    local: str | None = None
    created: tuple[str, ...] = ()

    @property
    def verdict(self) -> Verdict:
        return self.report.verdict


def admit(asked: Asked, pol: Policy, accounts: Accounts,
          made: list[InitResult] | None = None) -> Admitted:
    """The admission (module docstring). `made`: what it creates is added there, so that a
    caller that fails later can take it back (create.taken_back_on_error)."""
    from jaxcache.lifecycle.local_tier import local_path, private_tier
    from jaxcache.trust.rules import target

    tgt = target.resolve(asked.path)
    if asked.signer is not None:  # a signing key the policy revokes or no longer trusts
        from jaxcache.trust.rules import keyring

        keyring.for_rule(pol.rule_for(tgt.url or asked.path), asked.keys).with_key(asked.signer)
    if asked.sealed and tgt.url is not None:
        return _bucket(asked, target.parse_bucket(asked.path).text, pol, accounts, made)
    if tgt.url is not None or tgt.path is None:
        raise JaxcacheError(f"a cache here must be a local directory, not {safe(asked.path)}")
    path = local_path(tgt, asked.path)
    tier = private_tier(asked.local, pol, accounts, made, shared=path) \
        if asked.sealed and asked.local is not None else None
    report = _audit(asked, path, pol, accounts, remember=asked.remember)
    created: tuple[str, ...] = ()
    if not report.exists and report.missing:
        if asked.sealed and not asked.publisher:
            raise JaxcacheError(f"the sealed cache {safe(path)} does not exist: a reader loads "
                                "only what a publisher signed there (a mistyped path?); its "
                                "publisher makes it, e.g. by a run with --signing-key")
        from jaxcache.trust import create

        init = create.init(path, policy=pol)  # mkdir 0700, then verified
        if made is not None:
            made.append(init)
        if not init.ok and not (asked.allow_untrusted and not asked.sealed):
            raise UntrustedCacheError(init.report)
        created = init.created
        report = _audit(asked, path, pol, accounts) if asked.sealed else \
            init.report if init.ok else report
    chosen = report.resolved or report.path or path
    if not asked.sealed:
        if not report.verdict.ok and not asked.allow_untrusted:
            raise UntrustedCacheError(report)
        return Admitted(chosen, Kind.PLAIN, report, created=created)
    _sealed_verdict(report)
    return Admitted(chosen, Kind.GENERATION if asked.generation else Kind.SEALED_DIRECTORY,
                    report, tier, created)


def _bucket(asked: Asked, url: str, pol: Policy, accounts: Accounts,
            made: list[InitResult] | None) -> Admitted:
    """gs:// or s3://bucket/prefix, for a sealed cache only: judged for a sealed reader (no
    request is made, so a network failure is a miss at load time, never a failed start)."""
    from jaxcache.lifecycle.local_tier import private_tier

    tier = private_tier(asked.local, pol, accounts, made) if asked.local is not None else None
    report = _audit(asked, url, pol, accounts)
    _sealed_verdict(report)
    return Admitted(url, Kind.GENERATION if asked.generation else Kind.SEALED_BUCKET, report,
                    tier)


def _audit(asked: Asked, where: str, pol: Policy, accounts: Accounts, *,
           remember: bool = False) -> AuditReport:
    """The audit of the cache (its other users' processes not listed, the handle scan on):
    a sealed one for its keys, with neither the origin ledger nor the memo (audit.audit()
    consults neither for a sealed reader); a plain one through _plain_audit()."""
    if asked.sealed:
        return audit(where, policy=pol, accounts=accounts, scan_processes=False, sealed=True,
                     sealed_keys=asked.keys)
    return _plain_audit(asked, where, pol, accounts, remember)


def _plain_audit(asked: Asked, where: str, pol: Policy, accounts: Accounts, remember: bool
                 ) -> AuditReport:
    """A plain cache's audit: its entries judged by origin, through the origin ledger, and
    (`remember`) through the memo of its last judgement that passed. Imported here, on the
    plain branch alone: a sealed run (its wrapper and its job) reads neither file."""
    from jaxcache.trust.inputs import ledger
    from jaxcache.trust.inputs.audit_memo import remembering

    env = dict(asked.env) if asked.env is not None else None

    def read_ledger() -> Ledger:  # read only where entries are judged (not an unchanged one's)
        return ledger.load(accounts=accounts, env=env)

    return remembering(where, policy=pol, accounts=accounts, require_origin=asked.require_origin,
                       env=env, ledger=read_ledger, fingerprint=asked.fingerprint,
                       remember=remember)


def _sealed_verdict(report: AuditReport) -> None:
    """A sealed cache loads only as SEALED, vouched for by trusted keys or identities."""
    if not any(f.code == SEAL_KEYS for f in report.findings):
        raise JaxcacheError(NEEDS_KEYS)
    if report.verdict is not Verdict.SEALED:
        raise UntrustedCacheError(report)
