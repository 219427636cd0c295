"""The small public Python surface."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from jaxcache.trust.inputs import policy as policymod
from jaxcache.trust.judgement.audit import AuditReport
from jaxcache.trust.judgement.audit import audit as _audit
from jaxcache.trust.kernel.principals import Accounts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.fingerprint.model import Fingerprint
    from jaxcache.trust.inputs.public_keys import PublicKey
    from jaxcache.trust.rules.policy_rules import Policy


def audit(path: str, *, policy: str | Policy | None = None, as_user: str | None = None,
          scan_processes: bool = True, sealed: bool = False,
          sealed_keys: Sequence[PublicKey] = (), scan_handles: bool = True,
          require_origin: bool = False, fingerprint: Fingerprint | None = None,
          on_hashing: Callable[[int, int, bool], None] | None = None) -> AuditReport:
    """Who can change what JAX loads from `path`, and who wrote its entries (your origin
    ledger: refused under CI or with `require_origin`), and whether the build that wrote
    them is this Python's (`fingerprint`, default fingerprint.current(), found once the
    input is known good; `on_hashing` as there: the build that judges is the one whose
    entries may load); raises JaxcacheError on bad input."""
    from jaxcache.errors import JaxcacheError

    accounts = Accounts()
    uid = None
    if as_user is not None:
        from jaxcache.text import safe

        # a uid is ASCII digits ('²'.isdigit() is True, yet no int), within what a uid holds
        if as_user.isascii() and as_user.isdigit():
            uid = int(as_user) if len(as_user) <= 10 else None
        else:
            uid = accounts.uid_of(as_user)
        if uid is None or not 0 <= uid < 2**32 - 1:
            raise JaxcacheError(f"no such user: {safe(as_user)}")
    # a path (or None: the default places) is loaded here; a command that loaded its policy
    # once hands the Policy itself
    pol = policymod.load(policy, accounts) if policy is None or isinstance(policy, str) \
        else policy
    from jaxcache.trust.inputs import ledger
    from jaxcache.trust.rules.target import is_url

    def judging() -> Fingerprint:  # asked for only where there are entries to judge
        from jaxcache import fingerprint as fingerprints

        return fingerprint or fingerprints.current(on_hashing=on_hashing)

    return _audit(path, policy=pol, as_user=uid, scan_processes=scan_processes,
                  accounts=accounts, sealed=sealed, sealed_keys=tuple(sealed_keys),
                  scan_handles=scan_handles, require_origin=require_origin,
                  ledger=ledger.load(accounts=accounts),
                  fingerprint=None if sealed or is_url(path) else judging)
