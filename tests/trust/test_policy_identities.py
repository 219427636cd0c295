"""[[trusted_identities]] and [[revoked_identities]]: a keyless signer is named by the job that
ran (repository, workflow, ref, event; on GitHub the caller), by exact claims; a pattern only
where spelled `_glob`, never for the issuer or the event; a ref or event left open only where
said (any_ref, any_event); every mistake is one line naming the table."""

from __future__ import annotations

import pytest

from jaxcache.errors import PolicyError
from jaxcache.trust.inputs import policy_toml
from jaxcache.trust.kernel.principals import Accounts
from jaxcache.trust.rules import keyring
from jaxcache.trust.rules.identities import GITHUB_ISSUER, Claim, Pattern, Platform

GH = GITHUB_ISSUER
WF = "org/repo/.github/workflows/jax-cache.yml@refs/heads/main"
GOOD = {"issuer": GH, "repository": "org/repo", "workflow_ref": WF, "ref": "refs/heads/main",
        "event": "push"}
GL_CONFIG = "gitlab.com/org/repo//.gitlab-ci.yml@refs/heads/main"
GITLAB = {"issuer": "https://gitlab.com", "project_path": "org/repo",
          "ci_config_ref_uri": GL_CONFIG, "ref": "refs/heads/main", "event": "push"}


def parse(text: str):
    return policy_toml.parse(text.encode(), "/p/policy.toml", Accounts())


def table(kind: str = "trusted_identities", **fields: str | bool) -> str:
    def value(v: str | bool) -> str:
        return ("true" if v else "false") if isinstance(v, bool) else f'"{v}"'

    return f"[[{kind}]]\n" + "".join(f"{k} = {value(v)}\n" for k, v in fields.items())


def test_a_github_identity_pins_the_job_that_ran():
    (ident,) = parse(table(**GOOD)).default.trusted_identities
    assert ident.platform is Platform.GITHUB
    assert dict(ident.claims()) == {
        Claim.ISSUER: Pattern(GH), Claim.REPOSITORY: Pattern("https://github.com/org/repo"),
        Claim.WORKFLOW: Pattern(f"https://github.com/{WF}"),
        Claim.REF: Pattern("refs/heads/main"),
        # not called by another workflow: the run started from the trusted one itself
        Claim.CALLER: Pattern(f"https://github.com/{WF}"),
        Claim.EVENT: Pattern("push")}
    assert ident.loose == ()


def test_a_named_caller_is_the_one_allowed_to_call_a_reusable_workflow():
    caller = "org/repo/.github/workflows/release.yml@refs/heads/main"
    (ident,) = parse(table(**GOOD, caller_workflow_ref=caller)).default.trusted_identities
    assert dict(ident.claims())[Claim.CALLER] == Pattern(f"https://github.com/{caller}")


def test_a_gitlab_identity_binds_project_ref_and_event():
    (ident,) = parse(table(**GITLAB)).default.trusted_identities
    assert ident.platform is Platform.GITLAB
    assert dict(ident.claims()) == {
        Claim.ISSUER: Pattern("https://gitlab.com"),
        Claim.REPOSITORY: Pattern("https://gitlab.com/org/repo"),
        Claim.WORKFLOW: Pattern(f"https://{GL_CONFIG}"),
        Claim.REF: Pattern("refs/heads/main"),
        Claim.CALLER: Pattern(f"https://{GL_CONFIG}"),  # GitLab's build config: the same file
        Claim.EVENT: Pattern("push")}


def test_any_ref_and_any_event_are_said_explicitly_and_said_back():
    loose = {k: v for k, v in GOOD.items() if k not in ("ref", "event")}
    (ident,) = parse(table(**loose, any_ref=True, any_event=True)).default.trusted_identities
    claims = dict(ident.claims())
    assert Claim.REF not in claims and Claim.EVENT not in claims
    assert [w.split(" (")[0] for w in ident.loose] == ["any ref", "any event"]


def test_identity_ids_differ_by_the_job_they_pin():
    main = parse(table(**GOOD)).default.trusted_identities[0]
    tags = parse(table(**{**GOOD, "ref": "refs/tags/v1"})).default.trusted_identities[0]
    sched = parse(table(**{**GOOD, "event": "schedule"})).default.trusted_identities[0]
    assert len({main.id, tags.id, sched.id}) == 3


def test_the_trust_root_and_the_identities_reach_the_ring():
    pol = parse('sigstore_trust_root = "/etc/jaxcache/root.json"\n' + table(**GOOD) +
                table("revoked_identities", issuer=GH,
                      run="https://github.com/org/repo/actions/runs/9/attempts/1"))
    ring = keyring.for_rule(pol.declared("/any"))
    assert ring and len(ring) == 1
    assert ring.trust_root == "/etc/jaxcache/root.json"
    (revoked,) = ring.revoked_identities
    # a revoked identity pins only what it names: no implied caller, ref or event
    assert {c for c, _ in revoked.claims()} == {Claim.ISSUER, Claim.RUN}


@pytest.mark.parametrize(("fields", "said"), [
    ({**GOOD, "issuer": "https://token.actions.*.com"}, "never a pattern"),
    ({**GOOD, "issuer_glob": "https://*"}, "unknown field"),
    ({**GOOD, "issuer": "http://token.actions.githubusercontent.com"}, "https://"),
    ({**GOOD, "workflow_ref": "org/repo/.github/workflows/*.yml@refs/heads/main"},
     "spell a pattern as workflow_ref_glob"),
    ({**GOOD, "event": "pu*"}, "an event is never a pattern"),
    ({**GOOD, "event_glob": "p*"}, "unknown field"),
    ({"issuer": GH, "repository": "org/repo", "ref": "refs/heads/main", "event": "push"},
     "needs workflow_ref"),
    ({k: v for k, v in GOOD.items() if k != "ref"}, "must name the ref its jobs run for"),
    ({k: v for k, v in GOOD.items() if k != "event"}, "must name the event"),
    ({k: v for k, v in GITLAB.items() if k != "ref"}, "any_ref = true"),
    ({k: v for k, v in GITLAB.items() if k != "ci_config_ref_uri"}, "needs ci_config_ref_uri"),
    ({**GOOD, "any_ref": True}, "give ref or any_ref = true, not both"),
    ({**GOOD, "any_event": True}, "give event or any_event = true, not both"),
    ({**GOOD, "any_ref": "yes"}, "must be true or false"),
    ({**{k: v for k, v in GOOD.items() if k != "ref"}, "any_ref": False},
     "must name the ref"),
    ({**GOOD, "workflow_ref": "other/repo/.github/workflows/x.yml@refs/heads/main"},
     "is not in repository"),
    ({**GOOD, "workflow_ref": "org/repo/.github/workflows/x.yml"}, "must name the ref"),
    ({**GOOD, "caller_workflow_ref": "org/repo/.github/workflows/x.yml"}, "must name the ref"),
    ({**GOOD, "project_path": "org/repo"}, "GitLab's claim"),
    ({**GITLAB, "caller_workflow_ref": WF}, "GitHub's claim"),
    ({**GITLAB, "ref": "main"}, "must be a full ref"),
    ({**GITLAB, "ref_protected": "true"}, "certificate does not carry it"),
    ({**GITLAB, "workflow_ref": WF}, "GitHub's claim"),
    ({**GOOD, "repository_glob": "org/*"}, "not both"),
    ({**GOOD, "colour": "blue"}, "unknown field"),
])
def test_a_bad_identity_is_one_line(fields, said):
    with pytest.raises(PolicyError, match=said):
        parse(table(**fields))


def test_a_revoked_identity_takes_no_switches():
    with pytest.raises(PolicyError, match="unknown field"):
        parse(table("revoked_identities", issuer=GH, repository="org/repo", any_ref=True))


def test_identities_count_toward_signatures_needed_as_holders():
    two = parse("signatures_needed = 2\n" + table(**GOOD) + table(**GITLAB))
    assert keyring.for_rule(two.default).needed == 2
    with pytest.raises(PolicyError, match="distinct holder"):
        parse("signatures_needed = 2\n" + table(**GOOD))
    with pytest.raises(PolicyError, match="distinct holder"):  # one holder's two identities
        parse("signatures_needed = 2\n" + table(**GOOD, holder="ci") +
              table(**GITLAB, holder="ci"))


def test_trusted_and_revoked_at_once_is_refused():
    with pytest.raises(PolicyError, match="both trusted and revoked"):
        parse(table(**GOOD) + table(**GOOD).replace("trusted_", "revoked_"))


def test_a_revoked_identity_needs_more_than_an_issuer():
    with pytest.raises(PolicyError, match="beside its issuer"):
        parse(f'[[revoked_identities]]\nissuer = "{GH}"\n')
