"""The trust policy as the audit applies it: which extra writers, filesystems, storage and
signing keys a user accepts, per cache path. Loading and checking the file is policy.py's.

Kept below the loader: the audit, the trusted-input loader (which audits a file's parents) and
the bucket judge use the model; the loader uses them.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from jaxcache.trust.rules.namespace import covering
from jaxcache.trust.rules.target import is_url

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.trust.inputs.public_keys import PublicKey
    from jaxcache.trust.rules.identities import TrustedIdentity


class Rule(NamedTuple):
    trusted_uids: frozenset[int] = frozenset()
    trusted_gids: frozenset[int] = frozenset()
    accepted_filesystems: frozenset[str] = frozenset()
    names: tuple[str, ...] = ()  # how the user wrote them, for reports
    trusted_keys: tuple[PublicKey, ...] = ()  # with holder: readers accept entries they signed
    accepted_storage: frozenset[str] = frozenset()  # mount points: their storage is vouched for
    # where the entries come from, declared trusted by name (trust/provenance/origin.py): e.g.
    # "actions/cache, written only by the default branch"; entries of unknown origin are then
    # accepted
    restored_from: tuple[str, ...] = ()
    # keys no reader may count, whatever else trusts them: raw public keys (bytes) or ids (str)
    revoked_keys: tuple[bytes | str, ...] = ()
    signatures_needed: int = 0  # distinct key holders per entry (0: not set, i.e. 1)
    # users declared as key holders only: a sealed reader trusts what their keys sign, while a
    # plain reader still counts them as undeclared writers (unlike trusted_users)
    trusted_signers: frozenset[int] = frozenset()
    # a sealed reader misses entries whose signatures claim no build ("build unknown": signed
    # before build binding, or stripped of the claim), instead of loading them
    require_build: bool = False
    # other writers' origin ledgers (absolute paths, as written): entries a watched job of a
    # writer the policy trusts here wrote count as known, by their ledger, read as a trusted
    # input owned by that writer (trust/inputs/ledger.py's load_trusted)
    trusted_ledgers: tuple[str, ...] = ()
    # keyless signers (trust/rules/identities.py): CI identities whose Sigstore signatures a
    # sealed reader accepts as it accepts a trusted key's, those it refuses whatever trusts
    # them, and the Sigstore trusted root it verifies them against, offline (None: the
    # public-good instance's, fetched through TUF)
    trusted_identities: tuple[TrustedIdentity, ...] = ()
    revoked_identities: tuple[TrustedIdentity, ...] = ()
    sigstore_trust_root: str | None = None


class Policy(NamedTuple):
    source: str | None = None
    default: Rule = Rule()
    per_path: tuple[tuple[str, Rule], ...] = ()

    def rule_for(self, path: str) -> Rule:
        """The rule for the directory `path` names, as the audit finds it: a local path is
        walked as the audit walks it (trust/kernel/walk.py: each link expanded by hand, and judged
        by the audit of that path), then matched by declared(); a bucket URL by its one spelling.
        """
        if is_url(path):
            return self.declared(path)
        from jaxcache.trust.kernel.walk import walk

        full = path if path.startswith("/") else os.getcwd().rstrip("/") + "/" + path
        return self.declared(walk(full).resolved)

    def declares(self, name: str) -> bool:
        """Has the policy a [[cache]] table for exactly this local path, as written?"""
        return any(p == as_written(name) for p, _ in self.per_path if not is_url(p))

    def declared(self, name: str) -> Rule:
        """The global rule merged with the rules declared for `name`: the directory's path as
        the audit's walk reached it (no link left in it), or a bucket's normal spelling.

        The one place a declaration meets a cache, for every kind (trusted_*, accepted_*,
        restored_from, the key settings). A [[cache]] path is taken as written (normalised as
        text when the policy is read) and judged like a cache path: a link on it leads to its
        target only where no one but you and root could have made or could replace that link
        or any directory on the way (through_trusted_links()), as a cluster's root-made
        /home -> /gpfs/home. A link whoever can create that name could plant (a sticky /tmp)
        would carry the declaration onto whatever directory it points at: such a declared
        path names no directory (the audit says so: policy.through-link).

        A namespace (`<dir>/<fingerprint id>`, trust/rules/namespace.py) is covered by its parent's
        declaration as well as by its own.
        """
        if is_url(name):
            target = url_text(name)
            targets = {target, target and covering(target)} - {None}
            rules = [self.default] + [r for p, r in self.per_path if p in targets]
        else:
            target = as_written(name)
            targets = {target, covering(target)} - {None}
            rules = [self.default] + [r for p, r in self.per_path if not is_url(p) and (
                p in targets or through_trusted_links(p) in targets)]
        return Rule(
            frozenset().union(*(r.trusted_uids for r in rules)),
            frozenset().union(*(r.trusted_gids for r in rules)),
            frozenset().union(*(r.accepted_filesystems for r in rules)),
            tuple(n for r in rules for n in r.names),
            tuple(k for r in rules for k in r.trusted_keys),
            frozenset().union(*(r.accepted_storage for r in rules)),
            tuple(s for r in rules for s in r.restored_from),
            tuple(k for r in rules for k in r.revoked_keys),
            max(r.signatures_needed for r in rules),
            frozenset().union(*(r.trusted_signers for r in rules)),
            any(r.require_build for r in rules),
            tuple(dict.fromkeys(p for r in rules for p in r.trusted_ledgers)),
            tuple(dict.fromkeys(i for r in rules for i in r.trusted_identities)),
            tuple(dict.fromkeys(i for r in rules for i in r.revoked_identities)),
            # the path's own trusted root over the top level's
            next((r.sigstore_trust_root for r in reversed(rules)
                  if r.sigstore_trust_root is not None), None),
        )


EMPTY = Policy()


def as_written(path: str) -> str:
    """A local [[cache]] path, normalised as text only ('.', '..', repeated slashes), never by
    asking the filesystem: the same spelling for the policy and for the path the walk reached."""
    return "/" + os.path.normpath(path).lstrip("/")


def through_trusted_links(path: str) -> str | None:
    """Where the declared local `path` leads when it goes through links that only you and root
    could have made, and that only you and root can replace (each link and every directory
    on the way: trust/kernel/access.py's replacers, as the audit judges a cache path); None when it
    goes through none, through one someone else could change, or does not lead anywhere."""
    from jaxcache.errors import JaxcacheError
    from jaxcache.trust.kernel import access
    from jaxcache.trust.kernel import principals as pr
    from jaxcache.trust.kernel.walk import walk

    try:
        w = walk(path)
    except (JaxcacheError, OSError):
        return None
    if not w.exists or not any(n.kind == "symlink" for n in w.nodes):
        return None
    trusted = {0, os.geteuid()}
    if any(n.kind == "symlink" and n.uid not in trusted for n in w.nodes):
        return None
    for a in access.replace_access(w, pr.Accounts()):
        who = a.grant.principal
        if not (who.kind == "user" and who.id in trusted):
            return None
    return w.resolved


def url_text(path: str) -> str | None:
    from jaxcache.errors import JaxcacheError
    from jaxcache.trust.rules.target import normalize_bucket as normalize

    try:
        return normalize(path)
    except JaxcacheError:
        return None


def inside(policy_path: str, tree: str) -> bool:
    """Is the policy file inside the audited tree (where the tree's writers could edit it)?"""
    real = os.path.realpath(policy_path)
    return real == tree or real.startswith(tree.rstrip("/") + "/")
