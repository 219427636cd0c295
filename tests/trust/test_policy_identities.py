"""[[trusted_identities]] and [[revoked_identities]] (issue 46): a keyless signer is named by
exact claims; a pattern only where spelled `_glob`, never for the issuer; every mistake is
one line naming the table."""

from __future__ import annotations

import pytest

from jaxcache.errors import PolicyError
from jaxcache.trust.inputs import policy_toml
from jaxcache.trust.kernel.principals import Accounts
from jaxcache.trust.rules import keyring
from jaxcache.trust.rules.identities import GITHUB_ISSUER, Platform, SeenIdentity

GH = GITHUB_ISSUER
WF = "org/repo/.github/workflows/jax-cache.yml@refs/heads/main"
GOOD = {"issuer": GH, "repository": "org/repo", "workflow_ref": WF}
GITLAB = {"issuer": "https://gitlab.com", "project_path": "org/repo", "ref": "refs/heads/main"}


def parse(text: str):
    return policy_toml.parse(text.encode(), "/p/policy.toml", Accounts())


def seen(workflow: str = WF, repo: str = "org/repo", ref: str = "refs/heads/main",
         issuer: str = GH) -> SeenIdentity:
    return SeenIdentity(issuer, f"https://github.com/{workflow}", f"https://github.com/{repo}",
                        ref)


def table(**fields: str) -> str:
    return "[[trusted_identities]]\n" + "".join(f'{k} = "{v}"\n' for k, v in fields.items())


def test_a_github_identity_matches_only_its_exact_claims():
    pol = parse(table(**GOOD))
    (ident,) = pol.default.trusted_identities
    assert ident.platform is Platform.GITHUB
    assert ident.matches(seen())
    pr = WF.replace("heads/main", "pull/1/merge")
    assert ident.mismatch(seen(workflow=pr, ref="refs/pull/1/merge")) == ("workflow https://github.com/org/repo/.github/workflows/jax-cache"
                                ".yml@refs/pull/1/merge, not https://github.com/" + WF)
    assert "repository" in ident.mismatch(seen(repo="evil/repo", workflow=WF.replace(
        "org/repo", "evil/repo")))
    assert ident.mismatch(seen(issuer="https://gitlab.com")).startswith("issuer")
    assert not ident.matches(seen(workflow=WF.replace("jax-cache", "other")))
    # a prefix or a case change is another identity
    assert not ident.matches(seen(workflow=WF + "x"))
    assert not ident.matches(seen(repo="Org/repo"))


def test_the_trust_root_and_the_identities_reach_the_ring():
    pol = parse('sigstore_trust_root = "/etc/jaxcache/root.json"\n' + table(**GOOD) +
                "[[revoked_identities]]\n" + f'issuer = "{GH}"\nrun = "https://github.com/org/'
                'repo/actions/runs/9/attempts/1"\n')
    ring = keyring.for_rule(pol.declared("/any"))
    assert ring and len(ring) == 1
    assert ring.trust_root == "/etc/jaxcache/root.json"
    assert ring.identity_for(seen()) is not None
    assert ring.revoked_identity(seen()) is None  # no run in the certificate: not that run


def test_a_gitlab_identity_binds_project_and_ref():
    pol = parse(table(**GITLAB))
    (ident,) = pol.default.trusted_identities
    assert ident.platform is Platform.GITLAB
    ok = SeenIdentity("https://gitlab.com", "https://gitlab.com/org/repo//.gitlab-ci.yml@refs/"
                      "heads/main", "https://gitlab.com/org/repo", "refs/heads/main")
    assert ident.matches(ok)
    assert not ident.matches(SeenIdentity(ok.issuer, ok.subject, ok.repository_uri,
                                          "refs/heads/feature"))


def test_globs_only_where_spelled_so():
    pol = parse(table(issuer=GH, repository="org/repo",
                      workflow_ref_glob="org/repo/.github/workflows/jax-cache.yml@refs/tags/v*"))
    (ident,) = pol.default.trusted_identities
    assert ident.matches(seen(workflow=WF.replace("heads/main", "tags/v1.2")))
    assert not ident.matches(seen(workflow=WF.replace("heads/main", "tags/v1/evil")))
    assert not ident.matches(seen())


@pytest.mark.parametrize(("fields", "said"), [
    ({**GOOD, "issuer": "https://token.actions.*.com"}, "never a pattern"),
    ({**GOOD, "issuer_glob": "https://*"}, "unknown field"),
    ({**GOOD, "issuer": "http://token.actions.githubusercontent.com"}, "https://"),
    ({**GOOD, "workflow_ref": "org/repo/.github/workflows/*.yml@refs/heads/main"},
     "spell a pattern as workflow_ref_glob"),
    ({"issuer": GH, "repository": "org/repo"}, "needs repository and workflow_ref"),
    ({**GOOD, "workflow_ref": "other/repo/.github/workflows/x.yml@refs/heads/main"},
     "is not in repository"),
    ({**GOOD, "workflow_ref": "org/repo/.github/workflows/x.yml"}, "must name the ref"),
    ({**GOOD, "project_path": "org/repo"}, "GitLab's claim"),
    ({**GITLAB, "ref": "main"}, "must be a full ref"),
    ({**GITLAB, "ref_protected": "true"}, "certificate does not carry it"),
    ({**GITLAB, "workflow_ref": WF}, "GitHub's claim"),
    ({**GOOD, "repository_glob": "org/*"}, "not both"),
    ({**GOOD, "colour": "blue"}, "unknown field"),
])
def test_a_bad_identity_is_one_line(fields, said):
    with pytest.raises(PolicyError, match=said):
        parse(table(**fields))


def test_identities_count_toward_signatures_needed_as_holders():
    two = parse("signatures_needed = 2\n" + table(**GOOD) + table(**GITLAB))
    assert keyring.for_rule(two.default).needed == 2
    with pytest.raises(PolicyError, match="distinct holder"):
        parse("signatures_needed = 2\n" + table(**GOOD))
    with pytest.raises(PolicyError, match="distinct holder"):  # one holder's two identities
        parse("signatures_needed = 2\n" + table(**GOOD, holder="ci") + table(**GITLAB, holder="ci"))


def test_trusted_and_revoked_at_once_is_refused():
    with pytest.raises(PolicyError, match="both trusted and revoked"):
        parse(table(**GOOD) + table(**GOOD).replace("trusted_", "revoked_"))


def test_a_revoked_identity_needs_more_than_an_issuer():
    with pytest.raises(PolicyError, match="beside its issuer"):
        parse(f'[[revoked_identities]]\nissuer = "{GH}"\n')
