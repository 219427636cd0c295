"""Trusted identities: the second kind of signer a sealed reader trusts, beside keys (issue 46).

A keyless signature (seal/signing/keyless.py) is made by a CI job with a short-lived Sigstore
certificate that Fulcio issued for the job's OIDC token; the certificate states who the job
was (issuer, repository, workflow and ref), and the transparency log states when it signed.
The policy names the identities it trusts and the ones it revokes:

    [[trusted_identities]]                    # GitHub Actions
    issuer = "https://token.actions.githubusercontent.com"
    repository = "org/repo"
    workflow_ref = "org/repo/.github/workflows/jax-cache.yml@refs/heads/main"
    [[trusted_identities]]                    # GitLab CI
    issuer = "https://gitlab.com"
    project_path = "org/repo"
    ref = "refs/heads/main"

Every field is compared exactly with what the certificate says. A field whose name ends in
`_glob` (repository_glob, workflow_ref_glob, project_path_glob, ref_glob) is a pattern where
`*` stands for any run of characters but '/'; the issuer is never a pattern. Nothing here
verifies anything: the certificate's fields reach SeenIdentity only after sigstore verified
the bundle against the trusted root (seal/signing/keyless.py), and the one rule
(seal/signing/signature_rule.py) asks `matches`.
"""

from __future__ import annotations

import hashlib
import re
from enum import Enum

from jaxcache.values import frozen

GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
GITHUB_SERVER = "https://github.com"


class Platform(Enum):
    """Which CI's claims an identity is written in: each names its repository and workflow
    differently, and Fulcio maps them into the same certificate fields."""

    GITHUB = "github"
    GITLAB = "gitlab"

    @property
    def repository_word(self) -> str:
        return "repository" if self is Platform.GITHUB else "project_path"

    @property
    def workflow_word(self) -> str:
        return "workflow_ref" if self is Platform.GITHUB else "ci_config_ref_uri"

    def server(self, issuer: str) -> str:
        """Where its repositories live, as the certificate's URIs spell them."""
        return GITHUB_SERVER if self is Platform.GITHUB else issuer.rstrip("/")

    def workflow_uri(self, issuer: str, workflow: str) -> str:
        """The certificate's build signer URI (its SAN) for a workflow as the policy writes it
        (GitHub: org/repo/.github/workflows/x.yml@ref; GitLab's ci_config_ref_uri:
        gitlab.com/org/repo//.gitlab-ci.yml@ref)."""
        return f"{GITHUB_SERVER}/{workflow}" if self is Platform.GITHUB else f"https://{workflow}"


@frozen
class Pattern:
    """One field of an identity: exact text, or a `*` pattern where spelled `<field>_glob`."""

    text: str
    glob: bool = False

    def matches(self, value: str | None) -> bool:
        if value is None:
            return False
        if not self.glob:
            return value == self.text
        parts = (re.escape(p) for p in self.text.split("*"))
        return re.fullmatch("[^/]*".join(parts), value) is not None

    def __str__(self) -> str:
        return self.text


@frozen
class SeenIdentity:
    """Who a verified certificate says signed (its Fulcio extensions and SAN), and which job."""

    issuer: str
    subject: str  # the SAN: for CI, the workflow's URI (build signer URI)
    repository_uri: str | None = None  # 1.3.6.1.4.1.57264.1.12
    ref: str | None = None  # 1.3.6.1.4.1.57264.1.14
    commit: str | None = None  # 1.3.6.1.4.1.57264.1.13
    run_uri: str | None = None  # 1.3.6.1.4.1.57264.1.21: the job run that signed
    certificate: str = ""  # SHA-256 of the certificate (hex): one job's signer

    @property
    def text(self) -> str:
        """How reasons name it: the workflow URI, the issuer, the ref."""
        ref = f", ref {self.ref}" if self.ref else ""
        return f"{self.subject} (issuer {self.issuer}{ref})"

    @property
    def who(self) -> tuple[str, str, str | None, str | None]:
        """The identity without the job: (issuer, workflow, repository, ref), what every job
        of one workflow on one ref shares (reports count entries by it)."""
        return self.issuer, self.subject, self.repository_uri, self.ref

    def to_json(self) -> dict[str, str | None]:
        """As verify's JSON names it: the certificate's claims (a platform's own words:
        workflow_ref on GitHub, ci_config_ref_uri on GitLab, are both its `workflow`)."""
        return {"issuer": self.issuer, "workflow": self.subject,
                "repository": self.repository_uri, "ref": self.ref, "commit": self.commit,
                "run": self.run_uri, "certificate_sha256": self.certificate or None}


@frozen
class TrustedIdentity:
    """One [[trusted_identities]] (or [[revoked_identities]]) table, checked."""

    platform: Platform
    issuer: str
    repository: Pattern | None = None  # GitHub repository / GitLab project path
    workflow: Pattern | None = None  # GitHub workflow_ref / GitLab ci_config_ref_uri
    ref: Pattern | None = None  # the source ref (refs/heads/main)
    commit: str | None = None  # only in revoked_identities: one commit's jobs
    run: str | None = None  # only in revoked_identities: one job run (its run URI)
    holder: str | None = None  # as for keys: one holder's signers count once
    name: str | None = None

    @property
    def canonical(self) -> str:
        fields = (self.platform.value, self.issuer, *(
            f"{f}{'~' if f and f.glob else ''}" if isinstance(f, Pattern) else (f or "")
            for f in (self.repository, self.workflow, self.ref, self.commit, self.run)))
        return "\n".join(str(f) for f in fields)

    @property
    def raw(self) -> bytes:
        """Its stand-in for a public key's bytes: one identity, one signer."""
        return hashlib.sha256(b"jaxcache.identity/1\n" + self.canonical.encode()).digest()

    @property
    def id(self) -> str:
        return hashlib.sha256(self.raw).hexdigest()[:16]

    @property
    def subject(self) -> str:
        """The identity as people read it: its workflow (or repository and ref)."""
        if self.workflow is not None:
            base = str(self.workflow)
        else:
            parts = [str(p) for p in (self.repository, self.ref) if p is not None]
            base = "@".join(parts) if parts else self.issuer
        # a revoked identity may be one commit's or one run's jobs: say which
        which = [w for w in (self.commit and f"commit {self.commit}",
                             self.run and f"run {self.run}") if w]
        return f"{base} ({', '.join(which)})" if which else base

    @property
    def label(self) -> str:
        return f"{self.name} ({self.subject})" if self.name else self.subject

    @property
    def holder_word(self) -> str:
        """keyring.holder_of for this identity's signatures."""
        return f"holder {self.holder}" if self.holder is not None else f"identity {self.id}"

    def mismatch(self, seen: SeenIdentity) -> str | None:
        """Which field of the certificate differs from this identity (None: all match)."""
        if seen.issuer != self.issuer:
            return f"issuer {seen.issuer}, not {self.issuer}"
        server = self.platform.server(self.issuer)
        if self.repository is not None:
            want = Pattern(f"{server}/{self.repository.text}", self.repository.glob)
            if not want.matches(seen.repository_uri):
                return (f"{self.platform.repository_word} {seen.repository_uri}, not "
                        f"{want.text}")
        if self.workflow is not None:
            want = Pattern(self.platform.workflow_uri(self.issuer, self.workflow.text),
                           self.workflow.glob)
            if not want.matches(seen.subject):
                return f"workflow {seen.subject}, not {want.text}"
        if self.ref is not None and not self.ref.matches(seen.ref):
            return f"ref {seen.ref}, not {self.ref.text}"
        if self.commit is not None and seen.commit != self.commit:
            return f"commit {seen.commit}, not {self.commit}"
        if self.run is not None and seen.run_uri != self.run:
            return f"run {seen.run_uri}, not {self.run}"
        return None

    def matches(self, seen: SeenIdentity) -> bool:
        return self.mismatch(seen) is None


def exact_of(seen: SeenIdentity, platform: Platform) -> TrustedIdentity:
    """The identity a publisher's own certificate states, exactly (it trusts what it signs)."""
    server = platform.server(seen.issuer)
    repo = seen.repository_uri[len(server) + 1:] if seen.repository_uri and \
        seen.repository_uri.startswith(server + "/") else None
    workflow = seen.subject
    prefix = f"{GITHUB_SERVER}/" if platform is Platform.GITHUB else "https://"
    return TrustedIdentity(platform, seen.issuer,
                           Pattern(repo) if repo is not None else None,
                           Pattern(workflow[len(prefix):]) if workflow.startswith(prefix)
                           else None, Pattern(seen.ref) if seen.ref else None)


def platform_of(issuer: str) -> Platform:
    return Platform.GITHUB if issuer == GITHUB_ISSUER else Platform.GITLAB
