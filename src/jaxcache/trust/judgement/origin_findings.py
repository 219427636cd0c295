"""What the origins of a plain cache's entries mean to a reader: findings, and when they refuse.

trust/provenance/origin.py judges each entry (yours, unknown, changed; written by another build);
this module says it in words, with the remedy, and holds the one rule for when unknown or another
build's entries are refused rather than a warning (`refusal`: under CI, or with
--require-origin, unless the policy names their source). The audit, `run` and `enable()`
decide by it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping

from jaxcache.text import safe, some
from jaxcache.trust.findings import NOTE, UNSAFE, WARNING, Finding
from jaxcache.trust.provenance.origin import CHANGED, NO_JAXLIB_WHY, UNKNOWN, Origins, build_reason

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.trust.kernel.principals import Accounts, Principal
    from jaxcache.trust.provenance.ledger_file import Ledger
    from jaxcache.trust.rules.policy_rules import Rule

UNKNOWN_WHY = ("not written by any job jaxcache watched: if this directory was restored from a "
               "CI cache, copied or baked into an image, its entries are as trustworthy as "
               "whoever could write that source, and nothing is known of the build that "
               "compiled them")
CHANGED_WHY = ("changed since a job jaxcache watched wrote it: whoever rewrote it chose the "
               "code it holds")
REMEDY = ("seal the cache where it is produced and read it with `jaxcache run --sealed` "
          "(docs/how-to/ci.md), or, if you trust that source, name it in the policy, in a "
          "[[cache]] table of two lines: path = {path} and restored_from = \"<the source, and "
          "who can write it>\"")


def refusal(ci: str | None, required: bool, restored_from: tuple[str, ...]) -> str | None:
    """Why entries of unknown origin are refused here, or None (a warning, or accepted): under
    CI (`ci`: its name) or when `required` (--require-origin), unless the policy names their
    source (`restored_from`). The audit, `run` and `enable()` (which then also judge each
    load: jaxcompat.gate_gets) decide by this one rule."""
    if restored_from:
        return None
    if ci:
        return "running under " + ci
    return "as --require-origin asks" if required else None


def findings(origins: Origins, path: str, *, ci: str | None, required: bool,
             restored_from: tuple[str, ...], signed: frozenset[str] = frozenset(),
             trusted_writers: Mapping[int, str] | None = None) -> list[Finding]:
    """What the origins mean for a plain reader (refusal() decides UNSAFE or a warning); the
    reason is said in words, with the remedy. Changed entries come before unknown ones, and
    each list names the worst first: entries without a signature file (`signed`: the names
    that have one beside them) before those with one, counted by kind. Entries of unknown
    origin whose file a writer the policy trusts here owns (`trusted_writers`: uid -> name)
    are said to be theirs, not in your ledger (a note where they are not refused: the policy
    trusts that writer to write here); entries the ledgers of trusted writers vouch for
    (the policy's trusted_ledgers) are known, and a trusted ledger that cannot be trusted
    vouches for nothing, named."""
    unknown, changed = origins.count(UNKNOWN), origins.count(CHANGED)
    out = []
    out += trusted_ledger_findings(origins)
    if origins.ledger_problem:
        out.append(Finding("origin.ledger", WARNING,
                           f"the origin ledger cannot be trusted, so no entry counts as "
                           f"written by your jobs: {origins.ledger_problem}", origins.ledger,
                           "fix what this says (e.g. make the state directory yours alone), "
                           "or move the ledger away: jobs you run with jaxcache start a new "
                           "one"))
    if origins.ledger_other_boot:
        out.append(_other_boot(origins.ledger_other_boot, "the origin ledger", origins.ledger,
                               " (a disk image or volume snapshot restored as the CI cache "
                               "would carry them to the byte)"))
    if origins.ledger_skipped:
        out.append(Finding("origin.ledger-lines", NOTE,
                           f"{origins.ledger_skipped} line(s) of the origin ledger are not "
                           "ledger lines (a torn write or an edit) and were skipped",
                           origins.ledger))
    out += build_findings(origins, path, ci=ci, required=required)
    if not unknown and not changed:
        return out
    if restored_from:
        named = "; ".join(safe(s) for s in restored_from)
        out.append(Finding("origin.declared", NOTE,
                           f"{_counted(unknown, changed)}: accepted because the policy names "
                           f"their source trusted ({named})", path))
        return out
    why = refusal(ci, required, restored_from)
    effect = UNSAFE if why else WARNING
    remedy = REMEDY.format(path=json.dumps(safe(path)))
    owners = trusted_writers or {}
    theirs: dict[str, list[str]] = {}  # unknown entries a trusted writer's file, by writer
    for e in origins.entries:
        if e.origin == UNKNOWN and e.owner is not None and e.owner in owners:
            theirs.setdefault(owners[e.owner], []).append(e.name)
    for origin, code, text in ((CHANGED, "origin.changed", CHANGED_WHY),
                               (UNKNOWN, "origin.unknown", UNKNOWN_WHY)):
        names = [e.name for e in origins.entries if e.origin == origin and (
            origin != UNKNOWN or e.owner not in owners)]
        if not names:
            continue
        out.append(Finding(code, effect, f"{_entries(len(names))} {text} "
                           f"({_worst_first(names, signed)})"
                           + (f"; refused {why}" if why else ""), path, remedy))
    for who, names in theirs.items():
        out.append(Finding("origin.trusted-writer", effect if why else NOTE,
                           f"{_entries(len(names))} written by {safe(who)}, a trusted writer; "
                           f"not in your origin ledger ({_worst_first(names, signed)})"
                           + (f"; refused {why}: nothing vouches that a job jaxcache watched "
                              "wrote them" if why else ""), path,
                           TRUSTED_WRITER_REMEDY.format(who=safe(who),
                                                        path=json.dumps(safe(path)))))
    return out


TRUSTED_WRITER_REMEDY = (
    "for them to count as known (what CI and --require-origin need), have {who} run the jobs "
    "that write here with jaxcache and name {who}'s origin ledger in the policy, in a "
    "[[cache]] table of two lines: path = {path} and trusted_ledgers = "
    "[\"<{who}'s $XDG_STATE_HOME>/jaxcache/origin.ledger\"] (readable by you, writable by "
    "{who} alone: docs/reference/audit.md, \"Trusted writers' ledgers\")")


def _other_boot(lines: int, whose: str, path: str | None, why: str = "") -> Finding:
    """Ledger lines (yours or a trusted writer's) from before this machine's boot, left out
    under CI: one wording for every ledger."""
    return Finding("origin.other-boot", NOTE,
                   f"{lines} line(s) of {whose} were written before this machine last started: "
                   f"under CI they vouch for nothing{why}", path)


def trusted_ledger_findings(origins: Origins) -> list[Finding]:
    """What the ledgers of trusted writers (the policy's trusted_ledgers) did: one that cannot
    be trusted vouches for nothing, said with why (a warning: its writer's entries stay of
    unknown origin, refused where origin is required); what the others vouch for, a note."""
    out = []
    for t in origins.trusted:
        if t.problem:
            out.append(Finding("origin.trusted-ledger", WARNING,
                               f"the trusted writers' ledger {safe(t.path)} vouches for "
                               f"nothing: {t.problem}", t.path,
                               "its owner (a writer the policy trusts for this cache) keeps it "
                               "where no one else can write it or a folder above, readable by "
                               "you; or remove it from trusted_ledgers"))
        elif t.other_boot:
            out.append(_other_boot(t.other_boot, f"{safe(t.owner)}'s origin ledger", t.path))
    for who, names in origins.vouched().items():
        out.append(Finding("origin.vouched", NOTE,
                           f"{_entries(len(names))} written by jobs of {safe(who)} (a trusted "
                           f"writer) that jaxcache watched, by {safe(who)}'s origin ledger "
                           f"({some(names)})", None))
    return out


def _worst_first(names: list[str], signed: frozenset[str]) -> str:
    """The names, those without a signature file first, counted by kind where both kinds are
    there (a planted unsigned entry among signed ones is never hidden in "and N more")."""
    bare = [n for n in names if n not in signed]
    if not bare or len(bare) == len(names):
        return some(names)
    sealed = [n for n in names if n in signed]
    return f"{len(bare)} without a signature: {some(bare)}; {len(sealed)} with one: {some(sealed)}"


OTHER_BUILD_WHY = "written by another build on this host"
OTHER_BUILD_REMEDY = ("after an upgrade or an in-place rebuild of jaxlib, entries of the old build "
                      "can crash or mislead (JAX's key holds jaxlib's version, not its bytes): "
                      "clear them, or keep one cache per fingerprint (`jaxcache fingerprint "
                      "--short` names this one)")


def build_findings(origins: Origins, path: str, *, ci: str | None,
                   required: bool) -> list[Finding]:
    """What the builds of your entries mean (judged only where the caller gave a fingerprint):
    entries another build wrote are a warning, refused (UNSAFE) under CI or --require-origin
    whatever the policy's restored_from says (it names who restored the entries, not which
    build compiled them); builds that could not be compared are a note."""
    reader = origins.reader
    if reader is None:
        return []
    out = []
    other = origins.other_build()
    if other:
        why = refusal(ci, required, ())
        reasons: dict[str, list[str]] = {}
        for e in other:
            reasons.setdefault(build_reason(e, origins), []).append(e.name)
        said = "; ".join(f"{safe(r)} ({some(names)})" for r, names in reasons.items())
        whose = origins.whose_said([e.name for e in other])  # "" where all are yours
        out.append(Finding("origin.other-build", UNSAFE if why else WARNING,
                           f"{_entries(len(other))}{f' ({safe(whose)})' if whose else ''} "
                           f"{OTHER_BUILD_WHY}: {said}"
                           + (f"; refused {why}" if why else ""), path, OTHER_BUILD_REMEDY))
    for why_unknown, all_names in origins.unknown_builds().items():
        no_jaxlib = why_unknown == NO_JAXLIB_WHY
        for whose, names in origins.whose(all_names).items():  # yours, or a trusted writer's
            out.append(Finding("origin.build-unknown", NOTE,
                               f"the build that wrote {_entries(len(names))} of {safe(whose)} "
                               f"could not be compared with this one: {why_unknown} "
                               f"({some(names)})", path,
                               "judge the cache from the Python that runs the jobs (its jaxlib "
                               "is the build that loads them)" if no_jaxlib else
                               "if jaxlib was upgraded or rebuilt since, clear them"))
    return out


def _entries(n: int) -> str:
    return f"{n} entr{'y' if n == 1 else 'ies'}"


def _counted(unknown: int, changed: int) -> str:
    parts = []
    if unknown:
        parts.append(f"{unknown} entr{'y' if unknown == 1 else 'ies'} of unknown origin")
    if changed:
        parts.append(f"{changed} changed since written")
    return " and ".join(parts)


def trusted_ledgers(ledger: Ledger, rule: Rule, accounts: Accounts) -> tuple[Ledger, ...]:
    """The ledgers of the writers the policy trusts for a cache, as it names them
    (trusted_ledgers), each read as a trusted input one of those writers may own
    (trust/inputs/ledger.py's load_trusted, which the loaded `ledger` knows: that loader sits
    above the audit)."""
    if not rule.trusted_ledgers or ledger.others is None:
        return ()
    writers = trusted_writers(rule, accounts)
    # your own ledger, named in a team's shared policy beside the others', is read as yours
    # already: not again as another's (missing, it vouched for nothing, said as a warning)
    mine = os.path.realpath(ledger.path)
    return tuple(ledger.others(path, writers) for path in rule.trusted_ledgers
                 if os.path.realpath(path) != mine)


def trusted_writers(rule: Rule, accounts: Accounts) -> frozenset[int]:
    """The users the policy trusts to write a cache (its trusted_users, and the members of its
    trusted_groups): who may own and write a trusted writer's ledger besides you and root."""
    writers = set(rule.trusted_uids)
    for gid in rule.trusted_gids:
        writers |= accounts.members(gid)
    return frozenset(writers)


def vouching(origins: Origins | None, rule: Rule, accounts: Accounts
             ) -> tuple[tuple[str, frozenset[int]], ...]:
    """The trusted writers' ledgers that vouched in the audit (`origins`: its judgement of the
    cache `rule` covers), each with the writers who may own it: what the job's gate reads
    again where it judges each load (lifecycle/witness.py's gatekeeper). One that failed the
    check is not handed down: it vouches for nothing in the job either."""
    if origins is None or not origins.trusted:
        return ()
    writers = trusted_writers(rule, accounts)
    return tuple((t.path, writers) for t in origins.trusted if not t.problem)


def trusted_owners(origins: Origins, accounts: Accounts,
                   trusted: Callable[[Principal], bool]) -> dict[int, str]:
    """The owners of entries of unknown origin whom the policy trusts to write here
    (`trusted`: the audit's judgement of a principal), by uid: findings() says what is true of
    those (written by a trusted writer, not in your ledger)."""
    out = {}
    asked: set[int] = set()  # each owner judged once (100,000 entries have one or two)
    for e in origins.entries:
        if e.origin == UNKNOWN and e.owner is not None and e.owner not in asked:
            asked.add(e.owner)
            who = accounts.user(e.owner)
            if trusted(who):
                out[e.owner] = who.name
    return out
