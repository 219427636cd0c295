"""A bucket prefix (gs://..., s3://...) judged for a sealed reader.

jaxcache cannot read a bucket's access control (IAM, bucket policies, ACLs), so for a plain
reader a bucket stays UNVERIFIABLE. A sealed reader loads only entries signed by trusted keys:
whoever can write the bucket can then delete entries or plant ones that are rejected (jobs
recompile), not choose the code. So the verdict is SEALED when trusted keys are given (each
policy key's holder names the storage principal that publishes), and the report says what was
not checked and what to check by hand, in the service's own terms (its store module's).
"""

from __future__ import annotations

from jaxcache.trust.findings import UNVERIFIABLE, WARNING, Finding, Verdict
from jaxcache.trust.judgement import sealed_view as sealedmod
from jaxcache.trust.kernel.principals import Trust
from jaxcache.trust.rules.policy_rules import Policy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.trust.inputs.public_keys import PublicKey


def judge_sealed(given: str, findings: list[Finding], policy: Policy,
                 sealed_keys: tuple[PublicKey, ...]) -> tuple[list[Finding], Verdict]:
    from jaxcache.errors import JaxcacheError
    from jaxcache.trust.rules import target

    try:
        url = target.parse_bucket(given)
    except JaxcacheError as exc:
        return [*findings, Finding("path.url-unsupported", UNVERIFIABLE, str(exc), given)], \
            Verdict.UNVERIFIABLE
    from jaxcache.trust.judgement import services
    from jaxcache.trust.rules import keyring

    ring = keyring.for_rule(policy.rule_for(url.text), sealed_keys)
    holders = {k.holder: Trust.POLICY for k in ring.keys.values() if k.holder is not None}
    out, is_sealed = sealedmod.account(findings, [], ring, holders)
    if not is_sealed:
        return out, Verdict.UNVERIFIABLE
    publishers = sorted(holders) or ["the principal that runs your publishing CI"]
    where, check = services.unchecked(url, publishers)
    out.append(Finding(
        "bucket.iam-unchecked", WARNING,
        f"not checked: who can create, overwrite or delete objects in {where}; the trusted "
        "keys keep such writers from choosing your code, not from deleting entries or making "
        "jobs recompile",
        url.text, check))
    if any(f.effect.fails for f in out):
        return out, Verdict.UNVERIFIABLE
    return out, Verdict.SEALED
