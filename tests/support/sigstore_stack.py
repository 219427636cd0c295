"""Loopback Sigstore for the tests: an OIDC issuer that mints GitHub- and GitLab-style tokens
(and answers as GitHub's ACTIONS_ID_TOKEN_REQUEST_URL does), Fulcio, Rekor and an RFC 3161
timestamp authority, all in one Node process (tests/support/sigstore/server.mjs, over
@sigstore/mock and oauth2-mock-server, pinned in its package.json / package-lock.json and
installed by `npm ci`: the Makefile's sigstore-stand-ins target) on free loopback ports,
stopped by PID.

sigstore-python signs against it with a trust config (trust_config.json: the loopback URLs
and the trusted root) and verifies offline from trusted_root.json alone: no TUF, no network.
The tokens carry the real GitHub and GitLab issuer strings, so a policy written for
production works unchanged; the loopback CA can never chain to the public-good root (nor
the reverse), so nothing minted here is trusted anywhere else.

What the wrapper adds to the mock (spike 46): Fulcio verifies the token's signature
against the issuer's JWKS and maps claims to certificate extensions as real Fulcio does
(GitHub and GitLab principals); the TSA speaks the DER TimeStampReq sigstore-python sends;
Rekor v2 is its own (the mock's is unusable). LOG_SKEW_S (skew=) runs the log's and the
TSA's clocks ahead: a bundle whose certificate had expired at the log's time.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent / "sigstore"
GITHUB = "https://token.actions.githubusercontent.com"
GITLAB = "https://gitlab.com"


def skip_reason() -> str | None:
    """Why the stand-ins cannot run here (None: they can)."""
    if shutil.which("node") is None:
        return "node is not installed (Node 20+: the Sigstore stand-ins run on it)"
    if not (HERE / "node_modules" / "@sigstore" / "mock").is_dir():
        return ("the Sigstore stand-ins' npm packages are not installed (make "
                "sigstore-stand-ins: npm ci in tests/support/sigstore)")
    try:
        import sigstore  # noqa: F401
    except ImportError:
        return ("sigstore-python is not installed (the jaxcache[sigstore] extra; the test "
                "extra has it)")
    return None


@dataclass
class Stack:
    pid: int
    proc: subprocess.Popen
    state: Path
    services: dict

    @property
    def oidc(self) -> str:
        return self.services["oidc"]

    @property
    def trusted_root(self) -> Path:
        """All an offline verifier needs."""
        return self.state / "trusted_root.json"

    @property
    def trust_config(self) -> Path:
        """The trusted root and the loopback services to sign with (Rekor v1 and the TSA)."""
        return self.state / "trust_config.json"

    def mint(self, profile: str = "github", **claims: str) -> str:
        """A signed OIDC token (JWT) of `profile` (github | gitlab | local), each claim given
        overriding the profile's default (repository=, ref=, iss=, workflow_path=, ...)."""
        query = urllib.parse.urlencode({"profile": profile, **claims})
        with urllib.request.urlopen(f"{self.oidc}/mint?{query}", timeout=30) as r:
            return r.read().decode()

    def github_env(self, **claims: str) -> dict[str, str]:
        """What a GitHub Actions job with `permissions: id-token: write` has: its token is
        fetched from ACTIONS_ID_TOKEN_REQUEST_URL with the request token as a bearer."""
        query = urllib.parse.urlencode({"profile": "github", **claims})
        return {"GITHUB_ACTIONS": "true", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "request-token",
                "ACTIONS_ID_TOKEN_REQUEST_URL": f"{self.oidc}/gha?{query}"}

    def gitlab_env(self, **claims: str) -> dict[str, str]:
        """What a GitLab job with `id_tokens: SIGSTORE_ID_TOKEN: aud: sigstore` has."""
        return {"GITLAB_CI": "true", "SIGSTORE_ID_TOKEN": self.mint("gitlab", **claims)}

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.kill(self.pid, signal.SIGKILL)
            self.proc.wait()


def start(state: Path, skew_s: int = 0) -> Stack:
    """Start the stand-ins, writing their services.json, trusted_root.json and
    trust_config.json into `state`."""
    reason = skip_reason()
    assert reason is None, reason
    state.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "LOG_SKEW_S": str(skew_s)}
    log = open(state / "server.log", "wb")  # noqa: SIM115 - the child holds it
    proc = subprocess.Popen(["node", str(HERE / "server.mjs"), str(state)], stdout=log,
                            stderr=subprocess.STDOUT, cwd=HERE, env=env)
    log.close()
    found = state / "services.json"
    deadline = time.monotonic() + 60
    while not found.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait()
            raise RuntimeError("the Sigstore stand-ins did not start: "
                               + (state / "server.log").read_text()[-2000:])
        time.sleep(0.05)
    services = json.loads(found.read_text())
    _write_trust(state, services)
    return Stack(proc.pid, proc, state, services)


def trusted_root_of(s: dict) -> dict:
    """The TrustedRoot (application/vnd.dev.sigstore.trustedroot+json;version=0.1) of these
    services: Rekor's key, Fulcio's root, the CT log's key (sigstore-python insists on an
    SCT) and the TSA's chain; each valid from 5 minutes before they started."""
    start = datetime.fromisoformat(s["started_at"].replace("Z", "+00:00")) - timedelta(minutes=5)
    valid = {"start": start.strftime("%Y-%m-%dT%H:%M:%SZ")}
    rekor_key = base64.b64decode(s["rekor_pubkey_der"])
    return {
        "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
        "tlogs": [{"baseUrl": s["rekor"], "hashAlgorithm": "SHA2_256",
                   "publicKey": {"rawBytes": s["rekor_pubkey_der"],
                                 "keyDetails": "PKIX_ECDSA_P256_SHA_256", "validFor": valid},
                   "logId": {"keyId": base64.b64encode(
                       hashlib.sha256(rekor_key).digest()).decode()}}],
        "certificateAuthorities": [{
            "subject": {"organization": "sigstore.mock", "commonName": "sigstore"},
            "uri": s["fulcio"],
            "certChain": {"certificates": [{"rawBytes": s["fulcio_root_der"]}]},
            "validFor": valid}],
        "ctlogs": [{"baseUrl": "http://ctfe.invalid", "hashAlgorithm": "SHA2_256",
                    "publicKey": {"rawBytes": s["ctlog_pubkey_der"],
                                  "keyDetails": "PKIX_ECDSA_P256_SHA_256", "validFor": valid},
                    "logId": {"keyId": s["ctlog_id"]}}],
        "timestampAuthorities": [{
            "subject": {"organization": "sigstore.mock", "commonName": "tsa"},
            "uri": s["tsa"],
            "certChain": {"certificates": [{"rawBytes": c} for c in s["tsa_chain_der"]]},
            "validFor": valid}],
    }


def _write_trust(state: Path, s: dict) -> None:
    root = trusted_root_of(s)
    valid = root["tlogs"][0]["publicKey"]["validFor"]

    def svc(url: str) -> dict:
        return {"url": url, "majorApiVersion": 1, "validFor": valid, "operator": "loopback"}

    signing = {"mediaType": "application/vnd.dev.sigstore.signingconfig.v0.2+json",
               "caUrls": [svc(s["fulcio"])], "oidcUrls": [svc(s["oidc"])],
               "rekorTlogUrls": [svc(s["rekor"])], "tsaUrls": [svc(s["tsa"])],
               "rekorTlogConfig": {"selector": "ANY"}, "tsaConfig": {"selector": "ANY"}}
    (state / "trusted_root.json").write_text(json.dumps(root, indent=1))
    (state / "trust_config.json").write_text(json.dumps(
        {"mediaType": "application/vnd.dev.sigstore.clienttrustconfig.v0.1+json",
         "trustedRoot": root, "signingConfig": signing}, indent=1))


GH = "https://token.actions.githubusercontent.com"  # GitHub Actions' OIDC issuer
WF = "org/repo/.github/workflows/jax-cache.yml@refs/heads/main"  # the trusted workflow


# The policy docs/how-to/ci.md and docs/how-to/keyless.md print: the job that publishes, pinned
# (its repository, its workflow, the ref it ran for, the event that started it)
SAFE_TABLE = (f'[[trusted_identities]]\nissuer = "{GH}"\nrepository = "org/repo"\n'
              f'workflow_ref = "{WF}"\nref = "refs/heads/main"\nevent = "push"\n')


def trusting_policy(path: Path, trusted_root: object, head: str = "", tail: str = "") -> Path:
    """A policy (0600) that trusts the workflow WF of org/repo on GitHub, run for a push to
    main (SAFE_TABLE), verified against `trusted_root`; `head`: top-level settings before the
    table, `tail`: more tables after."""
    path.write_text(f'sigstore_trust_root = "{trusted_root}"\n{head}{SAFE_TABLE}{tail}')
    path.chmod(0o600)
    return path
