"""The audit: walk, compute writers, inspect entries and filesystems, and decide the verdict.

Verdicts (DESIGN.md): PRIVATE when only you and root can create, replace or rename entries, the
directory or any ancestor; SHARED-BY-POLICY when every extra writer is declared trusted; UNSAFE
when any writer is not; UNVERIFIABLE when something cannot be judged (network filesystem, URL,
unreadable ancestor, kernel disagreeing with the model). Anything unknown fails closed.
"""

from __future__ import annotations

import os
from types import MappingProxyType
from typing import NamedTuple

from jaxcache import mounts as mountsmod
from jaxcache.errors import PolicyError
from jaxcache.text import safe
from jaxcache.trust.findings import (
    NOTE,
    UNVERIFIABLE,
    WARNING,
    Component,
    Finding,
    Judged,
    Verdict,
    Why,
    Writer,
)
from jaxcache.trust.judgement import sealed_view as sealedmod
from jaxcache.trust.judgement import storage as storagemod
from jaxcache.trust.judgement import verdict as verdictmod
from jaxcache.trust.kernel import acl as aclmod
from jaxcache.trust.kernel import entries as entriesmod
from jaxcache.trust.kernel import principals as pr
from jaxcache.trust.kernel.access import Action, access
from jaxcache.trust.kernel.principals import Trust
from jaxcache.trust.kernel.walk import Node, Walk, walk, walk_open
from jaxcache.trust.rules import policy_rules as rulesmod
from jaxcache.trust.rules import target as targetmod
from jaxcache.trust.rules.policy_rules import EMPTY, Policy, Rule

TYPE_CHECKING = False  # typing itself costs `jaxcache run` start-up time: names for the type
if TYPE_CHECKING:  # checker only
    from collections.abc import Callable, Mapping

    from jaxcache.fingerprint.model import Fingerprint
    from jaxcache.mounts import Mount
    from jaxcache.trust.inputs.public_keys import PublicKey
    from jaxcache.trust.judgement import shortcut
    from jaxcache.trust.judgement.plain_entries import Judging
    from jaxcache.trust.kernel.cache_users import ProcessScan
    from jaxcache.trust.kernel.open_handles import HandleScan
    from jaxcache.trust.provenance import origin as originmod
    from jaxcache.trust.provenance.ledger_file import Ledger



class AuditReport(NamedTuple):
    requested: str
    path: str | None  # absolute path JAX would use
    resolved: str | None  # after symlinks
    exists: bool
    verdict: Verdict
    judged_for: pr.Principal
    writers: tuple[Writer, ...]
    components: tuple[Component, ...]
    missing: tuple[str, ...]
    inventory: entriesmod.Inventory | None
    processes: ProcessScan | None
    findings: tuple[Finding, ...]
    policy: str | None
    handles: HandleScan | None = None  # None: not looked for
    origins: originmod.Origins | None = None  # a plain reader's local directory: who wrote what
    # a sealed reader's audit: what each writer a plain reader does not trust can do under the
    # seal (sealed_view.roles(): a declared signer, or one who can only cause recompiles)
    sealed_as: Mapping[pr.Principal, sealedmod.SealedRole] = MappingProxyType({})
    # how much of the entries were looked at (trust/judgement/shortcut.py), why not less, and
    # what to remember of this judgement for the next (None: nothing may be)
    judged: Judged = Judged.FULL
    judged_why: Why = Why.NOT_ASKED
    memo: shortcut.Memo | None = None

    @property
    def untrusted(self) -> tuple[Writer, ...]:
        return tuple(w for w in self.writers if w.trust is Trust.UNTRUSTED)

    def writer_names(self, trust: Trust | None = None) -> frozenset[str]:
        return frozenset(str(w.principal) for w in self.writers
                         if trust is None or w.trust is trust)


class _Trust:
    """Classifies principals from the judged user's point of view."""

    def __init__(self, uid: int, rule: Rule, accounts: pr.Accounts) -> None:
        self.uid, self.rule, self.accounts = uid, rule, accounts

    def __call__(self, p: pr.Principal) -> Trust:
        if p.kind == "user" and p.id == 0:
            return Trust.ROOT
        if p.kind == "user" and p.id == self.uid:
            return Trust.YOU
        if p.kind == "user" and p.id is not None and (
                p.id in self.rule.trusted_uids
                or self.accounts.groups_of(p.id) & self.rule.trusted_gids):
            return Trust.POLICY
        if p.kind == "group" and p.id in self.rule.trusted_gids:
            return Trust.POLICY
        return Trust.UNTRUSTED


def audit(given: str, *, policy: Policy = EMPTY, as_user: int | None = None,
          scan_processes: bool = True, cwd: str | None = None,
          accounts: pr.Accounts | None = None, sealed: bool = False,
          sealed_keys: tuple[PublicKey, ...] = (), scan_handles: bool = True,
          require_origin: bool = False,
          env: dict[str, str] | None = None,
          ledger: Ledger | Callable[[], Ledger] | None = None,
          fingerprint: Callable[[], Fingerprint] | None = None,
          entries: bool = True,
          remembered: Callable[[shortcut.Seen], shortcut.Loaded | None] | None = None
          ) -> AuditReport:
    """sealed: judge for a sealed reader, one that loads only entries signed by the policy's
    trusted_keys for this path or `sealed_keys` (and only then can the verdict be SEALED).
    A plain reader is judged by who can write, whatever keys the policy lists.
    scan_processes: list every process using the cache (cwd, descriptors, environment);
    scan_handles: look for other users' processes holding a write handle
    (trust/kernel/open_handles.py), which `run` and `enable()` keep on. A plain reader's entries are
    also judged by origin (trust/provenance/origin.py): under CI (trust/rules/ci.py, read from
    `env`, default os.environ) or with
    `require_origin`, entries no watched job of yours wrote make the directory UNSAFE unless
    the policy names their source. Judged only with a `ledger` (trust/inputs/ledger.py's
    load()):
    `audit`, `ls`, `run`, `enable()` and api.audit pass one; the folders above a trusted
    input (the ledger's own among them) are audited without. With `fingerprint` (the build
    and host judging now: fingerprint.current(), or what `run` admitted; called only where
    there are entries to judge, so a bad path or an empty directory never waits for the first
    hashing after an install), each entry of yours is judged by the build that wrote it too
    (origin.built()): another build's entries are a warning, refused as unknown ones are.
    `entries=False`: the directory and its parents alone, no inventory (gc in a directory
    only you write lists it itself, one lstat a name). `ledger` may be its loader, called only
    where entries are judged by it.

    `remembered(the directory as found)`: what an earlier audit that passed remembered of this
    directory (trust/inputs/audit_memo.py), for a plain reader judged as themselves with the
    handle scan on: where its argument holds, the entries are judged only as far as they
    changed (trust/judgement/shortcut.py); the report says how far (`judged`) and what to
    remember now (`memo`)."""
    accounts = accounts or pr.Accounts()
    uid = os.geteuid() if as_user is None else as_user
    me = accounts.user(uid)
    tgt = targetmod.resolve(given, cwd)
    notes = [_tilde(tgt, text) if code == "path.tilde" else Finding(code, NOTE, text)
             for code, text in tgt.notes]
    if tgt.path is None:
        return _url_report(tgt, me, notes, policy, sealed, sealed_keys)
    w, fd = walk_open(tgt.path)
    ids = None
    origins = None
    rule = policy.declared(w.resolved)  # the walk judged here, not a second one
    trust = _Trust(uid, rule, accounts)
    mounts = mountsmod.read_mounts()
    judged, why = Judged.FULL, Why.NOT_ASKED
    plain: Judging | None = None
    judge_origins = ledger is not None and not sealed and uid == os.geteuid()
    memo_asked = remembered is not None and not sealed and uid == os.geteuid() and scan_handles
    try:
        inventory = None
        if w.exists and entries:
            ours = frozenset({0, uid})
            if scan_handles:
                from jaxcache.trust.kernel import open_handles as handlesmod
            if judge_origins or memo_asked:
                # a plain reader judged as themselves: by origin, through the memo (a sealed
                # reader's audit and a trusted input's folders' never import either)
                from jaxcache.trust.judgement import plain_entries

                plain = plain_entries.judge(
                    fd, w, ours, uid, mounts, accounts, rule, env=env,
                    require_origin=require_origin, ledger=ledger if judge_origins else None,
                    fingerprint=fingerprint, remembered=remembered if memo_asked else None)
                inventory, origins = plain.part.inventory, plain.part.origins
                judged, why = plain.judged, plain.why
                if scan_handles and plain.shortened:
                    ids = handlesmod.Identities(w.resolved, plain.part.inodes,
                                                 more=plain.part.more)
                elif scan_handles:
                    ids = handlesmod.identities(fd, w.resolved)
            else:
                inventory = entriesmod.inventory_at(fd, w.anchor_node.path, ours, accounts)
                if scan_handles:
                    ids = handlesmod.identities(fd, w.resolved)
    finally:
        os.close(fd)
    resolved = w.resolved
    if policy.source and rulesmod.inside(policy.source, resolved):
        raise PolicyError(
            f"policy {safe(policy.source)} lies inside the audited tree {safe(resolved)}: "
            "whoever can write there could edit whom you trust")
    components = tuple(_component(w, n, mounts, accounts) for n in w.nodes)
    writers = _writers(w, accounts, trust, uid)
    findings = notes + verdictmod.path_findings(w, tgt.path)
    findings += verdictmod.declaration_findings(policy, w, tgt.path)
    findings += verdictmod.fs_findings(components, rule)
    findings += verdictmod.kernel_findings(w, uid, accounts, components)
    stores: list[tuple[frozenset[tuple[int, int]], tuple[str, ...]]] = []
    below, storage_writers = storagemod.judge(w, mounts, accounts, trust, rule, uid, stores)
    if ids is not None and stores:  # a handle on a layer file, an image or a device writes too
        ids = ids.plus(*stores[0])
    findings += below
    writers += storage_writers
    if inventory is not None:
        writers += _entry_writers(inventory, trust)
        findings += verdictmod.entry_findings(inventory, w.anchor_node.path)
    writers = _vouched_outsiders(writers, w, mounts, rule)
    findings += verdictmod.writer_findings(writers, w)
    if plain is not None:
        findings += plain.findings(resolved, env, require_origin, rule, accounts,
                                   lambda p: trust(p) is Trust.POLICY)
    processes = None
    if scan_processes and w.exists:
        from jaxcache.trust.kernel import cache_users as procsmod

        processes = procsmod.scan(resolved, accounts.user_name)
        findings += verdictmod.process_findings(processes, uid)
    held = None
    if ids is not None:
        held = handlesmod.scan(ids, lambda u: trust(accounts.user(u)), accounts.user_name,
                               you=uid, readers=plain is not None and plain.now is not None
                               and judged is not Judged.UNCHANGED)
        writers += verdictmod.handle_writers(held, accounts)
        findings += verdictmod.handle_findings(held)
    elif w.exists:
        findings.append(Finding("handle.unchecked", NOTE,
                                "other users' processes were not checked for write handles "
                                "opened before the permissions were tightened", None,
                                "audit without --no-processes"))
    if _identities(walk(tgt.path)) != _identities(w):
        findings.append(Finding("path.changed", UNVERIFIABLE,
                                "the path changed while it was being audited", resolved,
                                "run the audit again; if it keeps changing, someone is "
                                "modifying the path"))
    ring = None  # not sealed: no key ring (nor its import, on the path of every `run`)
    if sealed:
        from jaxcache.trust.rules import keyring

        ring = keyring.for_rule(rule, sealed_keys)
    holders: dict[str, Trust] = {}  # a local path's policy names local users only (policy.py
    undeclared: set[int] = set()  # refuses others)
    for k in rule.trusted_keys:
        holder_uid = accounts.uid_of(k.holder) if k.holder else None
        if k.holder and holder_uid is not None:
            holders[k.holder] = Trust.POLICY if holder_uid in rule.trusted_signers else \
                trust(accounts.user(holder_uid))
            if holders[k.holder] is Trust.UNTRUSTED:
                undeclared.add(holder_uid)
    findings, is_sealed = sealedmod.account(findings, writers, ring, holders)
    sealed_as = sealedmod.roles(writers, rule.trusted_signers, frozenset(undeclared)) \
        if is_sealed else {}
    verdict = verdictmod.verdict(findings, writers)
    if is_sealed and verdict.ok:
        verdict = Verdict.SEALED
    memo_out = plain.memo(verdict, held, bool(rule.trusted_ledgers)) if plain is not None \
        else None
    return AuditReport(given, tgt.path, resolved, w.exists, verdict, me,
                       tuple(writers), components, w.missing, inventory, processes,
                       tuple(findings), policy.source, held, origins, sealed_as, judged, why,
                       memo_out)


def _vouched_outsiders(writers: list[Writer], w: Walk, mounts: tuple[Mount, ...], rule: Rule
                       ) -> list[Writer]:
    """An owner this user namespace does not map is someone on the host side of the mount it
    writes on: trusted by the policy only where it vouches for that mount's storage
    (accepted_storage), which says the user knows who can write it there."""
    if not rule.accepted_storage:
        return writers
    devs = {n.path: n.dev for n in w.nodes}
    out = []
    for wr in writers:
        if wr.principal.kind == "unmapped" and wr.trust is Trust.UNTRUSTED:
            # entries are named relative to the cache directory, the walk's anchor
            path = wr.target if wr.target.startswith("/") else w.anchor_node.path
            dev = devs.get(path)
            m = mountsmod.mount_of(path, dev, mounts) if dev is not None else None
            if m is not None and os.path.normpath(m.point) in rule.accepted_storage:
                wr = wr.with_reason(f"(on {m.point}, whose storage the policy vouches for: "
                                    "accepted_storage)", Trust.POLICY)
        out.append(wr)
    return out


def _identities(w: Walk) -> tuple[tuple[int, int], ...]:
    return tuple(n.identity for n in w.nodes)


def _tilde(tgt: targetmod.Target, text: str) -> Finding:
    """A leading '~' is a warning: JAX takes it literally, init/run/enable refuse it, and an
    audit of the literal folder says nothing about the one the user meant."""
    meant = os.path.expanduser(tgt.given)
    hint = f" ({safe(meant)}?)" if meant != tgt.given else ""
    return Finding("path.tilde", WARNING, text, tgt.path,
                   f"pass an absolute path{hint}; init, run and enable refuse a leading '~'")


def _url_report(tgt: targetmod.Target, me: pr.Principal, notes: list[Finding],
                policy: Policy, sealed: bool = False,
                sealed_keys: tuple[PublicKey, ...] = ()) -> AuditReport:
    from jaxcache.trust.judgement import services

    scheme = (tgt.url or "").split("://", 1)[0]
    finding = Finding(
        "path.url", UNVERIFIABLE,
        f"{safe(tgt.given)} is {_article(scheme)} {scheme}:// URL: its writers are decided by "
        "the storage service's access control, which jaxcache cannot read",
        tgt.given,
        f"check who holds write (e.g. {services.write_grants(scheme)} on the "
        "bucket and prefix, including service accounts and CI), turn off public or uniform "
        "write grants, and prefer signed entries or a private local cache (jaxcache init)",
    )
    findings = [*notes, finding]
    verdict = Verdict.UNVERIFIABLE
    if sealed:
        from jaxcache.trust.judgement import bucket_view as bucketmod

        findings, verdict = bucketmod.judge_sealed(tgt.given, findings, policy, sealed_keys)
    return AuditReport(tgt.given, None, None, False, verdict, me, (), (), (), None,
                       None, tuple(findings), policy.source)


def _article(scheme: str) -> str:
    """As the scheme is said: spelled out ("an s3:// URL", "a gs:// URL", "an http:// URL"),
    or as the word it is ("a file:// URL")."""
    if scheme.lower() == "file":
        return "a"
    return "an" if scheme[:1].lower() in "aefhilmnorsx" else "a"


def _acl_text(acl: aclmod.Acl | None, accounts: pr.Accounts, gid: int) -> tuple[str, ...]:
    if acl is None or not acl.is_extended:
        return ()
    out = []
    for e in acl.entries:
        name = None
        if e.tag == aclmod.USER and e.id is not None:
            name = accounts.user_name(e.id)
        elif e.tag == aclmod.GROUP and e.id is not None:
            name = accounts.group_name(e.id)
        out.append(aclmod.describe(e, name))
    return tuple(out)


def _component(w: Walk, n: Node, mounts: tuple[Mount, ...], accounts: pr.Accounts
               ) -> Component:
    m = mountsmod.mount_of(n.path, n.dev, mounts)
    return Component(
        n.path, n.kind, accounts.user_name(n.uid), accounts.group_name(n.gid), n.mode,
        _acl_text(n.acl, accounts, n.gid), _acl_text(n.default_acl, accounts, n.gid), n.target,
        m.fstype if m else None, m.category if m else None, m.point if m else None,
        (f"{m.source}:{m.root}" if m and m.is_bind else None), bool(m and m.read_only),
    )


def _writers(w: Walk, accounts: pr.Accounts, trust: _Trust, uid: int) -> list[Writer]:
    return [Writer(a.grant.principal, a.action, a.target, (a.grant.reason, a.consequence),
                   trust(a.grant.principal)) for a in access(w, accounts, uid)]


# what rewriting a file of the cache directory changes, by its kind (trust/kernel/entries.py)
_UNEXPECTED = "-> can change {}, a file JAX does not name (it loads none such)"
_CHANGES = {
    "cache": "-> can change the compiled code in {}",
    "xla-subcache": "-> can change what XLA loads from its sub-cache {}",
    "atime": "-> can change {}, when JAX last used the entry (what an eviction removes)",
    "signature": "-> can change the signature {} (a sealed reader loads only what a trusted key "
                 "signed: a bad one costs a recompile, not your code)",
    "used": "-> can change {}, jaxcache's last-use mark of a sealed entry",
    "lockfile": "-> can change the lock file {}",
    "unexpected": _UNEXPECTED,
}


def _entry_writers(inv: entriesmod.Inventory, trust: _Trust) -> list[Writer]:
    out = []
    for e in inv.entries:
        for grant in e.writers:
            what = _CHANGES.get(e.kind, _UNEXPECTED).format(e.name)
            out.append(Writer(grant.principal, Action.REWRITE_ENTRY, e.name, (grant.reason, what),
                              trust(grant.principal)))
    return out


