"""The local tier of a sealed cache (`--local`, `local=`): a private directory read first and
written instead of the shared one, one folder in it per build. Trusted by ownership, as a
plain cache is: audited as one, and made private where missing.
"""

from __future__ import annotations

from jaxcache.errors import JaxcacheError, UntrustedCacheError
from jaxcache.text import quoted, safe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.trust.create import InitResult
    from jaxcache.trust.kernel.principals import Accounts
    from jaxcache.trust.rules.policy_rules import Policy
    from jaxcache.trust.rules.target import Target


def local_path(tgt: Target, given: str) -> str:
    """The directory a sealed tier names: a mounted path, not a URL, and no '~' (which JAX
    would not expand either)."""
    if tgt.path is None:
        raise JaxcacheError(f"a sealed cache must be a local path (mounted), not {safe(given)}")
    if tgt.tilde:
        raise JaxcacheError(f"{quoted(given)} starts with '~', which is not expanded")
    return tgt.path


def build_tier(local: str) -> str:
    """Where this build keeps its private entries: `<local>/<fingerprint id>`. The local tier
    holds unsigned entries, trusted by ownership, which carry no build claim to check; one
    folder per build and CPU means an in-place jaxlib upgrade, a rebuilt jaxlib of the same
    version or another CPU sharing the home directory never loads what another compiled
    (the shared tier checks the signed claim instead)."""
    from jaxcache import fingerprint
    from jaxcache.trust.rules import namespace

    return namespace.join(local, fingerprint.in_job().id)


def private_tier(local: str, pol: Policy, accounts: Accounts,
                 made_dirs: list[InitResult] | None = None,
                 shared: str | None = None) -> str:
    """This build's folder of the local tier (build_tier), which is trusted by ownership: it
    must pass the ordinary audit (its parents, `local` among them, too), and is made private
    where missing. `local` must stand apart from the `shared` (sealed) directory: checked
    before anything is made. `jaxcache run` checks it before the job, the job again."""
    from jaxcache.seal.publishing.tier_files import apart
    from jaxcache.trust import create
    from jaxcache.trust.judgement.audit import audit
    from jaxcache.trust.rules import target

    path = local_path(target.resolve(local), local)
    if shared is not None:
        apart(path, shared)
    path = build_tier(path)
    report = audit(path, policy=pol, scan_processes=False, accounts=accounts)
    if not report.exists:
        made = create.init(path, policy=pol)
        if made_dirs is not None:
            made_dirs.append(made)
        if not made.ok:
            raise UntrustedCacheError(made.report)
        report = made.report
    if not report.verdict.ok:
        raise UntrustedCacheError(report)
    return report.resolved or path
