"""The one rule with keyless signers (issue 46): signatures made by sigstore-python against
the loopback Sigstore (tests/support/sigstore_stack.py) with real tokens, judged offline
against the policy's trusted root and identities, beside keys."""

from __future__ import annotations

import json

import pytest
from support.sigstore_stack import SAFE_TABLE

from jaxcache.seal.signing import signature_file as sigfile
from jaxcache.seal.signing import signature_rule as rule
from jaxcache.seal.signing.keyless import KeylessSigner
from jaxcache.trust.inputs import policy_toml, signing_keys
from jaxcache.trust.kernel.principals import Accounts
from jaxcache.trust.rules import keyring

GH = "https://token.actions.githubusercontent.com"
WF = "org/repo/.github/workflows/jax-cache.yml@refs/heads/main"
KEY, DATA = "jit_f-0123abcd", b"compiled executable bytes " * 40


def ring(stack, extra: str = "", root=None) -> keyring.KeyRing:
    text = f'sigstore_trust_root = "{root or stack.trusted_root}"\n{extra}{SAFE_TABLE}'

    pol = policy_toml.parse(text.encode(), "/p/policy.toml", Accounts())
    return keyring.for_rule(pol.default)


def signed(stack, key: str = KEY, data: bytes = DATA, profile: str = "github", **claims):
    signer = KeylessSigner(stack.mint(profile, **claims), str(stack.trust_config))
    try:
        return signer.document(key, data)
    finally:
        signer.close()


@pytest.fixture(scope="module")
def main_sig(sigstore_stack):
    return signed(sigstore_stack)


def test_the_trusted_workflow_on_main_is_accepted(sigstore_stack, main_sig):
    got = rule.check(KEY, DATA, main_sig, ring(sigstore_stack))
    assert got.ok, got.reason
    assert got.reason == f"signed by identity {WF}"


def test_one_certificate_signs_every_entry_of_a_job(sigstore_stack):
    signer = KeylessSigner(sigstore_stack.mint("github"), str(sigstore_stack.trust_config))
    docs = [signer.document(f"k{i}", DATA + bytes([i])) for i in range(3)]
    signer.close()
    certs = {json.loads(json.loads(d)["sigstore_bundle"])["verificationMaterial"]
             ["certificate"]["rawBytes"] for d in docs}
    assert len(certs) == 1
    for i, d in enumerate(docs):
        assert rule.check(f"k{i}", DATA + bytes([i]), d, ring(sigstore_stack)).ok


@pytest.mark.parametrize(("claims", "seen"), [
    ({"ref": "refs/pull/1/merge"}, "jax-cache.yml@refs/pull/1/merge (issuer " + GH),
    ({"workflow_path": ".github/workflows/other.yml"}, "workflows/other.yml@refs/heads/main"),
    ({"repository": "evil/repo"}, "https://github.com/evil/repo/.github/workflows/jax-cache"),
    ({"iss": "ISSUER"}, "(issuer http://127.0.0.1:"),
])
def test_other_identities_are_rejected_naming_what_was_seen(sigstore_stack, claims, seen):
    if claims.get("iss") == "ISSUER":
        claims = {"iss": sigstore_stack.oidc}
    got = rule.check(KEY, DATA, signed(sigstore_stack, **claims), ring(sigstore_stack))
    assert got.status == rule.UNKNOWN_KEY
    assert seen in got.reason and "which is not trusted" in got.reason


# Jobs that are not the trusted one, though those calling the trusted reusable workflow get
# certificates naming its main-branch file as their identity (the SAN): the policy the docs
# print (SAFE_TABLE) rejects each, by the ref it ran for, the workflow it started from, or
# the event that started it.
_CALLER = "org/repo/.github/workflows/{}@{}"
OTHER_GITHUB_JOBS = {
    "a same-repository pull request calling the trusted reusable workflow": dict(
        ref="refs/pull/5/merge", event_name="pull_request", job_workflow_ref=WF,
        workflow_ref=_CALLER.format("pr.yml", "refs/pull/5/merge")),
    "another branch calling the trusted reusable workflow": dict(
        ref="refs/heads/feature", job_workflow_ref=WF,
        workflow_ref=_CALLER.format("ci.yml", "refs/heads/feature")),
    "a fork's pull request calling it": dict(
        repository="evil/repo", ref="refs/pull/6/merge", event_name="pull_request",
        job_workflow_ref=WF, workflow_ref="evil/repo/.github/workflows/x.yml@refs/pull/6/merge"),
    "pull_request_target on main calling it": dict(
        event_name="pull_request_target", job_workflow_ref=WF,
        workflow_ref=_CALLER.format("triage.yml", "refs/heads/main")),
    "the trusted workflow itself on main, started by workflow_run": dict(
        event_name="workflow_run"),
}


@pytest.mark.parametrize("claims", OTHER_GITHUB_JOBS.values(), ids=list(OTHER_GITHUB_JOBS))
def test_other_jobs_running_the_trusted_workflow_are_rejected(sigstore_stack, claims):
    sig = signed(sigstore_stack, **claims)
    got = rule.check(KEY, DATA, sig, ring(sigstore_stack))
    assert got.status == rule.UNKNOWN_KEY, got.reason
    assert "which is not trusted" in got.reason
    # the identity they sign as is the trusted file: only the job tells them apart
    if claims.get("job_workflow_ref") == WF:
        assert f"signed by identity https://github.com/{WF} (" in got.reason


def test_a_push_on_the_protected_ref_through_a_named_caller_is_accepted(sigstore_stack):
    release = _CALLER.format("release.yml", "refs/heads/main")
    sig = signed(sigstore_stack, job_workflow_ref=WF, workflow_ref=release)
    assert rule.check(KEY, DATA, sig, ring(sigstore_stack)).status == rule.UNKNOWN_KEY
    named = SAFE_TABLE.replace('event = "push"\n',
                               f'event = "push"\ncaller_workflow_ref = "{release}"\n')
    r = keyring.for_rule(policy_toml.parse(
        f'sigstore_trust_root = "{sigstore_stack.trusted_root}"\n{named}'.encode(), "/p",
        Accounts()).default)
    assert rule.check(KEY, DATA, sig, r).ok


GITLAB_TABLE = ('[[trusted_identities]]\nissuer = "https://gitlab.com"\n'
                'project_path = "org/repo"\n'
                'ci_config_ref_uri = "gitlab.com/org/repo//.gitlab-ci.yml@refs/heads/main"\n'
                'ref = "refs/heads/main"\nevent = "push"\n')


@pytest.mark.parametrize(("claims", "ok"), [
    ({}, True),  # a push to the protected main branch
    ({"ref": "refs/heads/feature", "pipeline_source": "merge_request_event",
      "ci_config_ref_uri": "gitlab.com/org/repo//.gitlab-ci.yml@refs/heads/feature"}, False),
    ({"ref": "refs/heads/feature",
      "ci_config_ref_uri": "gitlab.com/org/repo//.gitlab-ci.yml@refs/heads/feature"}, False),
    ({"pipeline_source": "schedule"}, False),
    ({"pipeline_source": "trigger"}, False),
    ({"project_path": "evil/repo",
      "ci_config_ref_uri": "gitlab.com/evil/repo//.gitlab-ci.yml@refs/heads/main"}, False),
], ids=["main push", "merge request", "another branch", "schedule", "trigger", "fork"])
def test_gitlab_jobs_under_the_documented_policy(sigstore_stack, claims, ok):
    r = keyring.for_rule(policy_toml.parse(
        f'sigstore_trust_root = "{sigstore_stack.trusted_root}"\n{GITLAB_TABLE}'.encode(),
        "/p", Accounts()).default)
    got = rule.check(KEY, DATA, signed(sigstore_stack, profile="gitlab", **claims), r)
    assert got.ok is ok, got.reason
    if not ok:
        assert got.status == rule.UNKNOWN_KEY and "which is not trusted" in got.reason


def test_a_gitlab_identity_against_a_github_policy(sigstore_stack):
    got = rule.check(KEY, DATA, signed(sigstore_stack, profile="gitlab"), ring(sigstore_stack))
    assert got.status == rule.UNKNOWN_KEY
    assert "identity https://gitlab.com/org/repo//.gitlab-ci.yml@refs/heads/main" in got.reason


def test_other_bytes_and_copied_bundles_are_bad(sigstore_stack, main_sig):
    r = ring(sigstore_stack)
    got = rule.check(KEY, DATA + b"x", main_sig, r)
    assert got.status == rule.BAD and "longer than" in got.reason
    got = rule.check("jit_g-other", DATA, main_sig, r)  # the whole file moved to another key
    assert got.status == rule.BAD and "for another entry" in got.reason
    # the bundle of another entry, pasted into a document that names this one
    other = json.loads(signed(sigstore_stack, key="jit_g-other", data=b"other bytes"))
    doc = json.loads(main_sig)
    doc["sigstore_bundle"] = other["sigstore_bundle"]
    got = rule.check(KEY, DATA, json.dumps(doc).encode(), r)
    assert got.status == rule.BAD and "does not verify" in got.reason


def test_a_revoked_identity_is_refused(sigstore_stack, main_sig):
    revoke = (f'[[revoked_identities]]\nissuer = "{GH}"\n'
              'run = "https://github.com/org/repo/actions/runs/9000/attempts/1"\n')
    got = rule.check(KEY, DATA, main_sig, ring(sigstore_stack, revoke))
    assert got.status == rule.REVOKED and "which the policy revokes" in got.reason


def test_a_bundle_from_another_sigstore_is_bad(sigstore_stack, main_sig, tmp_path):
    from support import sigstore_stack as stackmod

    other = stackmod.start(tmp_path / "other")
    try:
        got = rule.check(KEY, DATA, main_sig, ring(sigstore_stack, root=other.trusted_root))
    finally:
        other.stop()
    assert got.status == rule.BAD and "does not verify" in got.reason


def test_a_certificate_expired_before_the_log_time_is_bad(tmp_path):
    from support import sigstore_stack as stackmod

    late = stackmod.start(tmp_path / "late", skew_s=3600)  # the log an hour ahead
    try:
        sig = signed(late)
        got = rule.check(KEY, DATA, sig, ring(late))
    finally:
        late.stop()
    assert got.status == rule.BAD and "does not verify" in got.reason, got.reason


def test_mixed_threshold_one_key_and_one_identity(sigstore_stack, main_sig):
    key = signing_keys.generate("ci-key")
    extra = (f'signatures_needed = 2\ntrusted_keys = [{{ holder = "root", key = '
             f'"{key.public.named_text}" }}]\n')
    r = ring(sigstore_stack, extra)
    first = sigfile.sign(KEY, DATA, key)
    from jaxcache.trust.inputs.public_keys import identity_signer

    ident = identity_signer(r.identities[0])
    cosigs = {ident.id: main_sig}
    got = rule.check(KEY, DATA, first, r, cosigs.get)
    assert got.ok, got.reason
    assert got.reason.startswith("signed by root ci-key (") and f"identity {WF}" in got.reason
    # the same identity twice (two jobs, two certificates) is one signer
    again = signed(sigstore_stack)
    got = rule.check(KEY, DATA, main_sig, r, {ident.id: again}.get)
    assert got.status == rule.TOO_FEW, got.reason
    # the key alone is not enough either
    assert rule.check(KEY, DATA, first, r, {}.get).status == rule.TOO_FEW
