"""The policy's identities as sigstore's own policies (seal/signing/identity_policy.py): a
certificate is trusted only when the job that ran is the trusted one (ref, caller, event),
not merely the workflow file that signed; revocation wins; reasons name the claim that
differs. Certificates carry Fulcio's claims (tests/support/fulcio_certs.py); the end-to-end
tests with the loopback Sigstore are tests/seal/test_keyless_rule.py."""

from __future__ import annotations

import pytest

pytest.importorskip("sigstore", reason="identity policies need the jaxcache[sigstore] extra")

from sigstore.verify import policy as sp  # noqa: E402
from support.fulcio_certs import GH, WF, seen  # noqa: E402

from jaxcache.seal.signing import identity_policy as ip  # noqa: E402
from jaxcache.trust.inputs import policy_toml  # noqa: E402
from jaxcache.trust.kernel.principals import Accounts  # noqa: E402
from jaxcache.trust.rules import keyring  # noqa: E402

GHS = "https://github.com/"
MAIN = f"{GHS}{WF}"
GL = "https://gitlab.com"
GL_CONFIG = "https://gitlab.com/org/repo//.gitlab-ci.yml@refs/heads/main"
POLICY = (f'[[trusted_identities]]\nissuer = "{GH}"\nrepository = "org/repo"\n'
          f'workflow_ref = "{WF}"\nref = "refs/heads/main"\nevent = "push"\n'
          f'[[trusted_identities]]\nissuer = "{GL}"\nproject_path = "org/repo"\n'
          f'ci_config_ref_uri = "{GL_CONFIG[len("https://"):]}"\n'
          'ref = "refs/heads/main"\nevent = "push"\n')


def ring(text: str = POLICY) -> keyring.KeyRing:
    return keyring.for_rule(policy_toml.parse(text.encode(), "/p", Accounts()).default)


def gitlab(ref: str = "refs/heads/main", event: str = "push", config: str = GL_CONFIG):
    return seen(issuer=GL, san=config, caller=config, repository=f"{GL}/org/repo", ref=ref,
                event=event)


def test_a_push_to_main_of_the_trusted_workflow_is_trusted():
    r = ring()
    got = ip.judge(seen(), r.identities, r.revoked_identities)
    assert got.standing is ip.Standing.TRUSTED and got.identity is r.identities[0]
    got = ip.judge(gitlab(), r.identities)
    assert got.standing is ip.Standing.TRUSTED and got.identity is r.identities[1]


# Each is a job that is not the trusted one, though several carry the trusted workflow's own
# file as their identity (a reusable workflow signs as itself, whoever calls it).
OTHER_JOBS = {
    "a same-repository pull request calling the trusted reusable workflow": dict(
        ref="refs/pull/5/merge", event="pull_request",
        caller=f"{GHS}org/repo/.github/workflows/pr.yml@refs/pull/5/merge"),
    "another branch calling the trusted reusable workflow": dict(
        ref="refs/heads/feature", caller=f"{GHS}org/repo/.github/workflows/ci.yml@refs/heads/"
                                         "feature"),
    "pull_request_target on main calling it from another workflow": dict(
        event="pull_request_target",
        caller=f"{GHS}org/repo/.github/workflows/triage.yml@refs/heads/main"),
    "another workflow on main calling it on push": dict(
        caller=f"{GHS}org/repo/.github/workflows/other.yml@refs/heads/main"),
    "the trusted workflow itself started by another event": dict(event="workflow_run"),
    "the trusted workflow run for a pull request": dict(
        san=f"{GHS}org/repo/.github/workflows/jax-cache.yml@refs/pull/5/merge",
        caller=f"{GHS}org/repo/.github/workflows/jax-cache.yml@refs/pull/5/merge",
        ref="refs/pull/5/merge", event="pull_request"),
    "a fork's job calling the trusted reusable workflow": dict(
        repository="https://github.com/evil/repo", ref="refs/heads/main",
        caller=f"{GHS}evil/repo/.github/workflows/x.yml@refs/heads/main"),
}


@pytest.mark.parametrize("claims", OTHER_JOBS.values(), ids=list(OTHER_JOBS))
def test_other_github_jobs_are_not_trusted(claims):
    r = ring()
    got = ip.judge(seen(**claims), r.identities, r.revoked_identities)
    assert got.standing is ip.Standing.UNTRUSTED
    assert got.differs is not None and ", not " in got.differs


@pytest.mark.parametrize(("claims", "differs"), [
    ({"ref": "refs/heads/feature"}, "ref refs/heads/feature, not refs/heads/main"),
    ({"event": "merge_request_event", "ref": "refs/heads/feature"},
     "ref refs/heads/feature, not refs/heads/main"),
    ({"event": "schedule"}, "event schedule, not push"),
    ({"event": "trigger"}, "event trigger, not push"),
])
def test_other_gitlab_jobs_are_not_trusted(claims, differs):
    r = ring()
    gl = r.identities[1:]
    got = ip.judge(gitlab(**claims), gl)
    assert got.standing is ip.Standing.UNTRUSTED and got.differs == differs


def test_the_reason_names_the_first_claim_that_differs():
    r = ring()
    pr = OTHER_JOBS["a same-repository pull request calling the trusted reusable workflow"]
    assert ip.judge(seen(**pr), r.identities).differs == (
        "ref refs/pull/5/merge, not refs/heads/main")
    other = OTHER_JOBS["another workflow on main calling it on push"]
    assert ip.judge(seen(**other), r.identities).differs == (
        f"caller workflow {other['caller']}, not {MAIN}")


def test_a_named_caller_may_call_the_trusted_reusable_workflow():
    release = "org/repo/.github/workflows/release.yml@refs/heads/main"
    text = POLICY.replace('ref = "refs/heads/main"\nevent = "push"\n',
                          f'ref = "refs/heads/main"\nevent = "push"\n'
                          f'caller_workflow_ref = "{release}"\n', 1)
    r = ring(text)
    assert ip.judge(seen(caller=GHS + release), r.identities).standing is ip.Standing.TRUSTED
    # then the workflow run directly is another caller: not trusted unless named too
    assert ip.judge(seen(), r.identities[:1]).standing is ip.Standing.UNTRUSTED


def test_any_ref_trusts_other_refs_and_says_so():
    text = POLICY.replace('ref = "refs/heads/main"\n', "any_ref = true\n", 1)
    r = ring(text)
    pr = seen(ref="refs/pull/5/merge")
    assert ip.judge(pr, r.identities).standing is ip.Standing.TRUSTED
    assert r.identities[0].loose[0].startswith("any ref")


def test_globs_only_where_spelled_so():
    text = POLICY.replace(f'workflow_ref = "{WF}"', 'workflow_ref_glob = "org/repo/.github/'
                          'workflows/jax-cache.yml@refs/tags/v*"', 1).replace(
        'ref = "refs/heads/main"', 'ref_glob = "refs/tags/v*"', 1)
    r = ring(text)
    tag = f"{GHS}org/repo/.github/workflows/jax-cache.yml@refs/tags/v1.2"
    assert ip.judge(seen(san=tag, ref="refs/tags/v1.2"), r.identities[:1]).standing is \
        ip.Standing.TRUSTED
    evil = tag.replace("v1.2", "v1/evil")
    assert ip.judge(seen(san=evil, ref="refs/tags/v1/evil"), r.identities[:1]).standing is \
        ip.Standing.UNTRUSTED


def test_a_prefix_or_a_case_change_is_another_identity():
    r = ring()
    for claims in ({"san": MAIN + "x", "caller": MAIN + "x"},
                   {"repository": "https://github.com/Org/repo"}, {"ref": "refs/heads/main2"},
                   {"event": "Push"}, {"issuer": GH + "/"}):
        assert ip.judge(seen(**claims), r.identities).standing is ip.Standing.UNTRUSTED, claims


def test_revocation_wins_and_pins_only_what_it_names():
    run = "https://github.com/org/repo/actions/runs/9/attempts/1"
    r = ring(POLICY + f'[[revoked_identities]]\nissuer = "{GH}"\nrun = "{run}"\n')
    got = ip.judge(seen(run=run), r.identities, r.revoked_identities)
    assert got.standing is ip.Standing.REVOKED and got.identity is r.revoked_identities[0]
    assert ip.judge(seen(run=run + "0"), r.identities, r.revoked_identities).standing is \
        ip.Standing.TRUSTED


def test_the_policies_are_sigstores_own():
    r = ring()
    policy = ip.policy_of(r.identities[0])
    assert isinstance(policy, sp.AllOf)
    kinds = {type(p) for p in policy._children}
    assert {sp.OIDCIssuerV2, sp.Identity, sp.OIDCSourceRepositoryURI,
            sp.OIDCSourceRepositoryRef, sp.OIDCBuildConfigURI, sp.OIDCBuildTrigger} == kinds
    assert isinstance(ip.any_of(r.identities), sp.AnyOf)


def test_the_publishers_own_identity_is_its_whole_job():
    from jaxcache.trust.rules.identities import exact_of

    pr = OTHER_JOBS["a same-repository pull request calling the trusted reusable workflow"]
    own = seen(**pr)
    mine = exact_of(own)
    assert ip.judge(own, (mine,)).standing is ip.Standing.TRUSTED
    assert ip.judge(seen(), (mine,)).standing is ip.Standing.UNTRUSTED  # not main's job
    said = ip.rejection(ring(), own)
    assert said is not None and "ref refs/pull/5/merge, not refs/heads/main" in said
    assert ip.rejection(ring(), seen()) is None


@pytest.mark.parametrize("claims", [
    dict(san="publisher-sa@proj.iam.gserviceaccount.com", issuer="https://accounts.google.com",
         repository="", ref=None, caller="", event=None),  # an e-mail: no job at all
    dict(event=None), dict(ref=None), dict(caller=""), dict(repository=""),
], ids=["service account", "no event", "no ref", "no caller", "no repository"])
def test_a_publisher_trusts_itself_only_as_a_whole_job(claims):
    """A certificate that does not state a whole CI job gives its publisher no identity of its
    own to trust (it trusts the policy's alone): one that pinned only its issuer would accept
    whatever anyone that issuer certifies signs."""
    from jaxcache.trust.rules.identities import exact_of

    assert exact_of(seen(**claims)) is None
    mine = exact_of(seen())
    assert mine is not None and not mine.loose


def test_a_revoked_publisher_trusts_nothing_of_its_own():
    from jaxcache.trust.rules.identities import exact_of

    mine = exact_of(seen())
    assert mine is not None
    text = POLICY.replace('ref = "refs/heads/main"\nevent = "push"\n',
                          'any_ref = true\nany_event = true\n', 1)
    revoked = (f'[[revoked_identities]]\nissuer = "{GH}"\nrepository = "org/repo"\n'
               f'workflow_ref = "{WF}"\nref = "refs/heads/main"\nevent = "push"\n')
    r = ring(text + revoked)
    assert r.with_identity(mine) is r  # no KeyRingError: revocation wins, nothing is added
    assert ip.judge(seen(), r.identities, r.revoked_identities).standing is \
        ip.Standing.REVOKED


def test_a_gitlab_job_signs_with_its_own_token_before_any_other(monkeypatch):
    """On GitLab the pipeline's SIGSTORE_ID_TOKEN comes first: a runner on a cloud VM would
    otherwise sign as the VM's service account (its metadata server answers first)."""
    from jaxcache.seal.signing import keyless

    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.setenv("GITLAB_CI", "true")
    monkeypatch.setenv("SIGSTORE_ID_TOKEN", "the.pipelines.token")
    assert keyless.ci_token() == "the.pipelines.token"
