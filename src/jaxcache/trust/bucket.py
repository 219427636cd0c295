"""A bucket prefix (gs://...) judged for a sealed reader.

jaxcache cannot read a bucket's access control (IAM, ACLs, managed folders), so for a plain
reader a bucket stays UNVERIFIABLE. A sealed reader loads only entries signed by trusted keys:
whoever can write the bucket can then delete entries or plant ones that are rejected (jobs
recompile), not choose the code. So the verdict is SEALED when trusted keys are given (each
policy key's holder names the storage principal that publishes), and the report says what was
not checked and what to check by hand.
"""

from __future__ import annotations

from jaxcache.display import safe
from jaxcache.trust import sealed as sealedmod
from jaxcache.trust.findings import UNSAFE, UNVERIFIABLE, WARNING, Finding, Verdict
from jaxcache.trust.rules import Policy


def judge_sealed(given: str, findings: list[Finding], policy: Policy,
                 sealed_keys: tuple) -> tuple[list[Finding], Verdict]:
    from jaxcache.errors import JaxcacheError
    from jaxcache.seal import objects

    try:
        url = objects.parse(given)
    except JaxcacheError as exc:
        return [*findings, Finding("path.url-unsupported", UNVERIFIABLE, str(exc), given)], \
            Verdict.UNVERIFIABLE
    from jaxcache.seal import keyring

    ring = keyring.for_rule(policy.rule_for(url.text), sealed_keys)
    holders = {k.holder: "policy" for k in ring.keys.values() if k.holder is not None}
    out, is_sealed = sealedmod.account(findings, [], ring, holders)
    if not is_sealed:
        return out, Verdict.UNVERIFIABLE
    publishers = sorted(holders) or ["the principal that runs your publishing CI"]
    out.append(Finding(
        "bucket.iam-unchecked", WARNING,
        f"not checked: who can create, overwrite or delete objects in gs://{safe(url.bucket)}"
        + (f" under {safe(url.prefix)}/" if url.prefix else "")
        + " (the bucket's IAM policy, ACLs and managed folders are not visible to jaxcache); "
        "the trusted keys keep such writers from choosing your code, not from deleting "
        "entries or making jobs recompile",
        url.text,
        f"check by hand: `gcloud storage buckets get-iam-policy gs://{safe(url.bucket)}` "
        f"(and `gcloud storage managed-folders list gs://{safe(url.bucket)}` if used): only "
        f"{', '.join(safe(p) for p in publishers)} should hold object create/delete "
        "(roles/storage.objectCreator, objectAdmin or broader); readers need only "
        "roles/storage.objectViewer; no allUsers or allAuthenticatedUsers grant; and the "
        "private key stays in that publisher's secret store"))
    if any(f.effect in (UNSAFE, UNVERIFIABLE) for f in out):
        return out, Verdict.UNVERIFIABLE
    return out, Verdict.SEALED
