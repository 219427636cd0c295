"""Trusted identities: the second kind of signer a sealed reader trusts, beside keys.

A keyless signature (seal/signing/keyless.py) is made by a CI job with a short-lived Sigstore
certificate that Fulcio issued for the job's OIDC token; the certificate states who the job
was, and the transparency log states when it signed. What a policy must pin is the job that
ran, not only the workflow file that signed: on GitHub a workflow called as a reusable workflow
signs with its OWN file as the certificate's identity (the SAN), whoever called it, so a pull
request or another branch that calls `jax-cache.yml@refs/heads/main` gets a certificate naming
that main-branch file. What tells the jobs apart is the source ref the run was for (Fulcio's
OID .14: `refs/pull/N/merge` for a pull request), the workflow the run started from (the build
config, .18: the caller) and the event that triggered it (.20). So every trusted identity
names its ref and its event, or says explicitly that any will do (`any_ref = true`,
`any_event = true`, which the audit warns about), and on GitHub the caller is the trusted
workflow itself unless `caller_workflow_ref` names the one allowed to call it:

    [[trusted_identities]]                    # GitHub Actions: a push to main
    issuer = "https://token.actions.githubusercontent.com"
    repository = "org/repo"
    workflow_ref = "org/repo/.github/workflows/jax-cache.yml@refs/heads/main"
    ref = "refs/heads/main"
    event = "push"
    [[trusted_identities]]                    # GitLab CI
    issuer = "https://gitlab.com"
    project_path = "org/repo"
    ci_config_ref_uri = "gitlab.com/org/repo//.gitlab-ci.yml@refs/heads/main"
    ref = "refs/heads/main"
    event = "push"

Every field is compared exactly with what the certificate says. A field whose name ends in
`_glob` is a pattern where `*` stands for any run of characters but '/'; the issuer and the
event are never patterns. Nothing here decides anything: `claims()` says which certificate
claim each field pins, and seal/signing/identity_policy.py turns those into sigstore's own
verification policies, which judge a certificate only after sigstore verified its bundle.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from enum import Enum

GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
GITHUB_SERVER = "https://github.com"
FULCIO_OID = "1.3.6.1.4.1.57264.1."  # Fulcio's certificate extensions


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
        """The certificate's URI for a workflow as the policy writes it (GitHub:
        org/repo/.github/workflows/x.yml@ref; GitLab's ci_config_ref_uri:
        gitlab.com/org/repo//.gitlab-ci.yml@ref)."""
        return f"{GITHUB_SERVER}/{workflow}" if self is Platform.GITHUB else f"https://{workflow}"

    def workflow_of(self, uri: str) -> str | None:
        """workflow_uri's inverse: the policy's spelling of a certificate's workflow URI."""
        prefix = f"{GITHUB_SERVER}/" if self is Platform.GITHUB else "https://"
        return uri[len(prefix):] if uri.startswith(prefix) else None


class Claim(Enum):
    """A claim a Fulcio certificate states, as a policy field pins it: its value is the
    extension's OID (the SAN has none: it is the certificate's subject alternative name)."""

    ISSUER = FULCIO_OID + "8"
    WORKFLOW = "san"  # the build signer: the workflow file that signed (a reusable one's own)
    REPOSITORY = FULCIO_OID + "12"
    COMMIT = FULCIO_OID + "13"
    REF = FULCIO_OID + "14"  # the source ref the run was for
    CALLER = FULCIO_OID + "18"  # the build config: the workflow the run started from
    EVENT = FULCIO_OID + "20"  # the build trigger
    RUN = FULCIO_OID + "21"  # the run invocation

    @property
    def word(self) -> str:
        """How reasons name it."""
        return {Claim.ISSUER: "issuer", Claim.WORKFLOW: "workflow",
                Claim.REPOSITORY: "repository", Claim.COMMIT: "commit", Claim.REF: "ref",
                Claim.CALLER: "caller workflow", Claim.EVENT: "event", Claim.RUN: "run"}[self]


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class SeenIdentity:
    """Who a certificate says signed (its Fulcio extensions and SAN), and which job. `der`
    is the certificate itself: what sigstore's policies judge (identity_policy.py)."""

    issuer: str
    subject: str  # the SAN: for CI, the workflow's URI (build signer URI)
    repository_uri: str | None = None
    ref: str | None = None
    commit: str | None = None
    run_uri: str | None = None
    caller: str | None = None  # the build config URI: the workflow the run started from
    event: str | None = None  # the build trigger
    certificate: str = ""  # SHA-256 of the certificate (hex): one job's signer
    der: bytes = b""

    @property
    def text(self) -> str:
        """How reasons name it: the workflow URI, the issuer, the ref, and the caller and
        event where they tell this job from the trusted one."""
        extra = [f"ref {self.ref}"] if self.ref else []
        if self.caller and self.caller != self.subject:
            extra.append(f"called from {self.caller}")
        if self.event:
            extra.append(f"event {self.event}")
        return f"{self.subject} (issuer {self.issuer}{''.join(', ' + e for e in extra)})"

    @property
    def who(self) -> tuple[str | None, ...]:
        """The identity without the job: what every job of one workflow on one ref, called
        the same way by the same event, shares (reports count entries by it)."""
        return self.issuer, self.subject, self.repository_uri, self.ref, self.caller, self.event

    def claim(self, which: Claim) -> str | None:
        return {Claim.ISSUER: self.issuer, Claim.WORKFLOW: self.subject,
                Claim.REPOSITORY: self.repository_uri, Claim.COMMIT: self.commit,
                Claim.REF: self.ref, Claim.CALLER: self.caller, Claim.EVENT: self.event,
                Claim.RUN: self.run_uri}[which]

    def to_json(self) -> dict[str, str | None]:
        """As verify's JSON names it: the certificate's claims (a platform's own words:
        workflow_ref on GitHub, ci_config_ref_uri on GitLab, are both its `workflow`)."""
        return {"issuer": self.issuer, "workflow": self.subject,
                "repository": self.repository_uri, "ref": self.ref, "commit": self.commit,
                "caller": self.caller, "event": self.event, "run": self.run_uri,
                "certificate_sha256": self.certificate or None}


@dataclass(frozen=True)
class TrustedIdentity:
    """One [[trusted_identities]] (or [[revoked_identities]]) table, checked. `caller` None
    on GitHub: the trusted workflow itself must be where the run started (not called by
    another); a revoked identity pins only what it names."""

    platform: Platform
    issuer: str
    repository: Pattern | None = None  # GitHub repository / GitLab project path
    workflow: Pattern | None = None  # GitHub workflow_ref / GitLab ci_config_ref_uri
    ref: Pattern | None = None  # the source ref (refs/heads/main)
    caller: Pattern | None = None  # GitHub: the workflow allowed to call a reusable one
    event: str | None = None  # the trigger (push, schedule, workflow_dispatch)
    any_ref: bool = False  # said explicitly: no ref pinned
    any_event: bool = False  # said explicitly: no event pinned
    commit: str | None = None  # only in revoked_identities: one commit's jobs
    run: str | None = None  # only in revoked_identities: one job run (its run URI)
    holder: str | None = None  # as for keys: one holder's signers count once
    name: str | None = None
    # a [[revoked_identities]] table: it pins only what it names (not compared: the same
    # table trusted and revoked is one identity, which the key ring refuses)
    revoked: bool = field(default=False, compare=False)

    def claims(self) -> tuple[tuple[Claim, Pattern], ...]:
        """Each certificate claim this identity pins, with what it must be: every one must
        hold (identity_policy.py makes them sigstore's policies, in this order)."""
        server = self.platform.server(self.issuer)
        out: list[tuple[Claim, Pattern]] = [(Claim.ISSUER, Pattern(self.issuer))]
        if self.repository is not None:
            out.append((Claim.REPOSITORY, Pattern(f"{server}/{self.repository.text}",
                                                  self.repository.glob)))
        workflow = None if self.workflow is None else Pattern(
            self.platform.workflow_uri(self.issuer, self.workflow.text), self.workflow.glob)
        if workflow is not None:
            out.append((Claim.WORKFLOW, workflow))
        if self.ref is not None:
            out.append((Claim.REF, self.ref))
        if self.caller is not None:
            out.append((Claim.CALLER, Pattern(
                self.platform.workflow_uri(self.issuer, self.caller.text), self.caller.glob)))
        elif workflow is not None and not self.revoked:
            out.append((Claim.CALLER, workflow))  # started from the trusted workflow itself
        if self.event is not None:
            out.append((Claim.EVENT, Pattern(self.event)))
        if self.commit is not None:
            out.append((Claim.COMMIT, Pattern(self.commit)))
        if self.run is not None:
            out.append((Claim.RUN, Pattern(self.run)))
        return tuple(out)

    @property
    def loose(self) -> tuple[str, ...]:
        """What this trusted identity lets any job do, said explicitly in the policy: the
        audit warns about each."""
        out = []
        if self.any_ref:
            out.append("any ref (any_ref = true: a pull request's or another branch's job "
                       "that runs this workflow is trusted too)")
        if self.any_event:
            out.append("any event (any_event = true: a pull_request_target, issue_comment or "
                       "workflow_run job on the ref is trusted too)")
        return tuple(out)

    @property
    def pins(self) -> tuple[str, ...]:
        """What a job must be to count as it, as the audit lists it: the issuer, the ref, the
        caller where another workflow may call it, the event (or any), the holder."""
        out = [f"issuer {self.issuer}"]
        out.append("any ref" if self.any_ref or self.ref is None else f"ref {self.ref.text}")
        if self.caller is not None:
            out.append(f"called from {self.caller.text}")
        out.append("any event" if self.any_event or self.event is None
                   else f"event {self.event}")
        if self.holder is not None:
            out.append(f"holder {self.holder}")
        return tuple(out)

    @property
    def canonical(self) -> str:
        fields = [self.platform.value, self.issuer]
        fields += [f"{c.name.lower()}={p.text}{'~' if p.glob else ''}" for c, p in self.claims()
                   if c is not Claim.ISSUER]
        fields += [w for w, on in (("any_ref", self.any_ref), ("any_event", self.any_event))
                   if on]
        return "\n".join(fields)

    @property
    def raw(self) -> bytes:
        """Its stand-in for a public key's bytes: one identity, one signer."""
        return hashlib.sha256(b"jaxcache.identity/2\n" + self.canonical.encode()).digest()

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


def exact_of(seen: SeenIdentity) -> TrustedIdentity | None:
    """The CI job a publisher's own certificate states, exactly (it trusts what it signs): its
    repository, workflow, ref, caller and event, every one of them; None where the certificate
    does not state them all (an e-mail or a service account's, a claim missing): an identity
    that pinned less would trust what others that issuer certifies sign."""
    platform = platform_of(seen.issuer)
    server = platform.server(seen.issuer)
    repo = seen.repository_uri[len(server) + 1:] if seen.repository_uri and \
        seen.repository_uri.startswith(server + "/") else None
    workflow = platform.workflow_of(seen.subject)
    caller = platform.workflow_of(seen.caller) if seen.caller else None
    if not (repo and workflow and "@" in workflow and seen.ref and seen.ref.startswith("refs/")
            and caller and seen.event):
        return None
    return TrustedIdentity(platform, seen.issuer, Pattern(repo), Pattern(workflow),
                           Pattern(seen.ref), Pattern(caller) if caller != workflow else None,
                           seen.event)


def platform_of(issuer: str) -> Platform:
    return Platform.GITHUB if issuer == GITHUB_ISSUER else Platform.GITLAB
