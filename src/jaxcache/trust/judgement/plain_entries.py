"""A plain reader's entries, judged as that reader: by origin (who wrote each, which build:
trust/provenance/origin.py, origin_findings.py), and through the memo of the last judgement
that passed (shortcut.py), only as far as they changed.

Kept out of audit.py because only a plain reader judged as themselves comes here: a sealed
reader's audit (its entries load only as trusted keys signed them) and the audit of the folders
above a trusted input judge the entries as they are, with neither the origin ledger nor the
memo, and import neither.
"""

from __future__ import annotations

import os
import time
from typing import NamedTuple

from jaxcache.trust.findings import Judged, Why
from jaxcache.trust.judgement import origin_findings, shortcut
from jaxcache.trust.judgement.memo_format import Carried, LedgerSeen, MemoError
from jaxcache.trust.kernel import entries as entriesmod
from jaxcache.trust.provenance import ledger_file
from jaxcache.trust.provenance import origin as originmod
from jaxcache.trust.rules import ci as cimod

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from jaxcache.fingerprint.model import Fingerprint
    from jaxcache.mounts import Mount
    from jaxcache.trust.findings import Finding, Verdict
    from jaxcache.trust.kernel.open_handles import HandleScan
    from jaxcache.trust.kernel.principals import Accounts, Principal
    from jaxcache.trust.kernel.walk import Walk
    from jaxcache.trust.rules.policy_rules import Rule

    LedgerOrLoader = ledger_file.Ledger | Callable[[], ledger_file.Ledger]


class Part(NamedTuple):
    """The entries' part of an audit: the inventory and origins, the inodes the handle scan
    looks for (a shortened judgement's; the full one collects its own), the ledger the
    origins were judged with as remembered (shortcut.ledger_seen()), and a changed
    directory's unchanged plain rows (shortcut.relist()). `more`: an unchanged directory's
    entries' inodes, read from its memo only where the handle scan finds a descriptor or
    mapping that could be on one (shortcut.remembered_inodes())."""

    inventory: entriesmod.Inventory
    origins: originmod.Origins | None
    inodes: frozenset[tuple[int, int]]
    ledger: LedgerSeen | None
    carried: Carried | None
    more: Callable[[], frozenset[tuple[int, int]] | None] | None = None


class Judging(NamedTuple):
    """How the entries were judged: their part, how far (`judged`, `why`), the directory as
    found where a memo was asked for (`now`), and whether the judgement was the shorter one
    (its handle scan then looks for `part.inodes` only)."""

    part: Part
    judged: Judged
    why: Why
    now: shortcut.Seen | None
    shortened: bool

    def findings(self, resolved: str, env: dict[str, str] | None, required: bool, rule: Rule,
                 accounts: Accounts, declared: Callable[[Principal], bool]) -> list[Finding]:
        """What the origins mean to this reader (origin_findings.findings()); `declared`: a
        principal the policy trusts."""
        origins = self.part.origins
        if origins is None:
            return []
        signed = frozenset(e.name.removesuffix(".sig") for e in self.part.inventory.entries
                           if e.kind == "signature")
        return origin_findings.findings(origins, resolved, ci=cimod.detect(env),
                                        required=required, restored_from=rule.restored_from,
                                        signed=signed,
                                        trusted_writers=origin_findings.trusted_owners(
                                            origins, accounts, declared))

    def memo(self, verdict: Verdict, held: HandleScan | None, trusted_ledgers: bool
             ) -> shortcut.Memo | None:
        """What to remember of this judgement for the next (None: nothing may be)."""
        if self.now is None or self.judged is Judged.UNCHANGED:
            return None
        return shortcut.remember(self.now, verdict, self.part.inventory, self.part.origins,
                                 held, self.part.ledger, trusted_ledgers, self.part.carried)


def judge(fd: int, w: Walk, ours: frozenset[int], uid: int, mounts: tuple[Mount, ...],
          accounts: Accounts, rule: Rule, *, env: dict[str, str] | None, require_origin: bool,
          ledger: LedgerOrLoader | None,
          fingerprint: Callable[[], Fingerprint] | None,
          remembered: Callable[[shortcut.Seen], shortcut.Loaded | None] | None) -> Judging:
    """The entries of the directory open at `fd`, judged for the reader `uid` (this process's
    user): by origin where a `ledger` is given, and through `remembered` (the memo's loader)
    where it is given, as audit.audit() describes."""
    judged, why = Judged.FULL, Why.NOT_ASKED
    now: shortcut.Seen | None = None
    part: Part | None = None
    judge_origins = ledger is not None
    if remembered is not None and os.fstat(fd).st_size < shortcut.MIN_DIR_BYTES:
        why = Why.SMALL
    elif remembered is not None:
        reader = fingerprint() if fingerprint is not None and judge_origins else None
        ci_name = cimod.detect(env) if judge_origins else None
        now = shortcut.seen(fd, w.resolved, uid, mounts, shortcut.context(
            uid, reader, ci_name, require_origin,
            rule.restored_from + rule.trusted_ledgers, judge_origins),
            w.anchor_node.acl is not None and w.anchor_node.acl.is_extended,
            judge_origins and origin_findings.refusal(
                ci_name, require_origin, rule.restored_from) is not None)
        loaded = remembered(now)
        judged, why = shortcut.decide(loaded, now)
        if loaded is not None and judged is not Judged.FULL:
            shorter = _shortened(judged, loaded, now, fd, w, ours, accounts, reader, ledger)
            if isinstance(shorter, Why):
                judged, why = Judged.FULL, shorter
            else:
                part = shorter
    if part is not None:
        return Judging(part, judged, why, now, True)
    inventory = entriesmod.inventory_at(fd, w.anchor_node.path, ours, accounts)
    origins = None
    seen_ledger = None
    if ledger is not None and inventory.entries:
        read = _ledger(ledger)
        origins = originmod.judge(inventory, fd, read, w.anchor_node.path,
                                  fingerprint() if fingerprint is not None else None,
                                  origin_findings.trusted_ledgers(read, rule, accounts))
        seen_ledger = shortcut.ledger_seen(shortcut.ledger_stat(read.path), read)
    return Judging(Part(inventory, origins, frozenset(), seen_ledger, None), judged, why, now,
                   False)


def _shortened(judged: Judged, loaded: shortcut.Loaded, now: shortcut.Seen, fd: int, w: Walk,
               ours: frozenset[int], accounts: Accounts, reader: Fingerprint | None,
               ledger: LedgerOrLoader | None) -> Part | Why:
    """The entries judged the shorter way shortcut.decide() allowed (UNCHANGED: as
    remembered; CHANGED: only the new or changed ones, by the ledger read now where one of
    them is compiled code), or why the full audit must judge them after all. `ledger`: None
    where origins are not judged."""
    h = loaded.header
    try:
        if judged is Judged.UNCHANGED:
            inventory, origins = shortcut.unchanged(loaded, accounts, reader, time.time())
            return Part(inventory, origins, frozenset({(now.directory[0], now.directory[1])}),
                        None, None, shortcut.remembered_inodes(loaded))
        relisted = shortcut.relist(loaded, fd, w.anchor_node.path, ours, accounts, now,
                                   time.time())
    except (MemoError, OSError):
        return Why.NO_MEMO
    if relisted is None:
        return Why.RELISTED_DIRECTORY
    inventory, origins, seen = relisted.inventory, None, None
    if ledger is not None and (inventory.entries or relisted.carried.rows):
        if h.ledger is None or any(e.kind == "cache" for e in relisted.fresh.entries):
            read = _ledger(ledger)
            seen = shortcut.ledger_seen(shortcut.ledger_stat(read.path), read)
            judged_now = originmod.judge(relisted.fresh, fd, read, w.anchor_node.path, reader)
        else:  # no entry to judge by it: the ledger as remembered
            seen, judged_now = h.ledger, shortcut.remembered_origins(h, reader)
        if h.ledger is not None and h.ledger.problem != judged_now.ledger_problem:
            return Why.LEDGER  # with an untrusted ledger nothing counts as yours
        origins = shortcut.merged(relisted, judged_now)
    return Part(inventory, origins, relisted.inodes, seen, relisted.carried)


def _ledger(ledger: LedgerOrLoader) -> ledger_file.Ledger:
    """The ledger, read now where a loader was given (only where entries are judged by it)."""
    return ledger if isinstance(ledger, ledger_file.Ledger) else ledger()
