"""The audit's formats. text for people: the verdict first, then who can write and why, then
what to do; json: the document (schema jaxcache.audit/1, docs/reference/audit.md); sarif: the
findings for code-scanning tools. FORMATS maps each --format to its renderer; the entries' JSON is
shared with ls (report/ls.py)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable

from jaxcache.documents.kinds import envelope
from jaxcache.gc.growth import jax_limit, unlimited
from jaxcache.report import jsonout, sarif, style
from jaxcache.text import Tone, plural, safe, size, wrap
from jaxcache.trust.finding_codes import PATH_UNREADABLE
from jaxcache.trust.findings import NOTE, UNSAFE, UNVERIFIABLE, WARNING, Verdict, Writer
from jaxcache.trust.judgement.audit import AuditReport
from jaxcache.trust.judgement.sealed_view import SealedRole
from jaxcache.trust.kernel.access import Action
from jaxcache.trust.kernel.entries import KINDS, Entry, Inventory
from jaxcache.trust.kernel.principals import Trust
from jaxcache.trust.provenance.origin import EntryOrigin, Origins, build_reason

_HEADLINE = {
    Verdict.PRIVATE: "only you and root can change what JAX loads from here",
    Verdict.SHARED_BY_POLICY: "extra writers exist, and every one is declared trusted in your "
                              "policy",
    Verdict.SEALED: "others may write here, but readers load only entries that a trusted key "
                    "signed (writers can cost you recompiles, not choose your code)",
    Verdict.UNSAFE: "someone besides you and root can change what JAX loads from here",
    Verdict.UNVERIFIABLE: "jaxcache cannot establish who can write here, so it fails closed",
}
_MARK = {UNSAFE: "UNSAFE", UNVERIFIABLE: "UNVERIFIABLE", WARNING: "warning", NOTE: "note"}


def render_text(r: AuditReport, *, verbose: bool = False,
                 remedy: Callable[[str], str | None] | None = None) -> str:
    """The audit for people; `remedy` rewrites each finding's advice for the caller's context,
    or drops it by returning None (init must not tell someone who just ran init to run init)."""
    blocked = any(f.code == PATH_UNREADABLE for f in r.findings)
    lines = _missing(r) if r.missing and not blocked else []
    lines.append(f"verdict{' as it stands' if lines else ''}: {style.said(r.verdict)} - "
                 f"{_HEADLINE[r.verdict]}")
    lines.append(f"audited {safe(r.requested)}")
    if r.path and r.resolved and r.resolved != r.path:
        lines.append(f"  resolves to {safe(r.resolved)}")
    lines.append(f"judged for user {r.judged_for.name}"
                 + (f", policy {safe(r.policy)}" if r.policy else ", no policy file"))
    if r.components:
        lines += ["", "path (owner:group mode, filesystem):"]
        for c in r.components:
            extra = f" -> {safe(c.target or '')}" if c.kind == "symlink" else ""
            sticky = " sticky" if c.mode & stat.S_ISVTX and c.kind == "dir" else ""
            acl = f" acl[{', '.join(c.acl)}]" if c.acl else ""
            dacl = f" default-acl[{', '.join(c.default_acl)}]" if c.default_acl else ""
            fs = f"  {c.fs_type} {c.fs_category}" if c.kind == "dir" and c.fs_type else ""
            lines.append(f"  {safe(c.path)}{extra}  {c.owner}:{c.group} "
                         f"{stat.S_IMODE(c.mode):04o}{sticky}{acl}{dacl}{fs}")
        for name in r.missing:
            state = "not inspected: no permission to look" if blocked else "does not exist yet"
            lines.append(f"  .../{safe(name)}  ({state})")
    if r.writers:
        lines += ["", "who can write here (sealed: without a trusted key they can only cause "
                  "recompiles):" if r.verdict is Verdict.SEALED else
                  "who can change what JAX loads:"]
        trusted = sorted({f"{w.principal} ({w.trust})" for w in r.writers
                          if w.trust is not Trust.UNTRUSTED})
        lines += _writer_lines(r, verbose)
        if trusted:
            lines.append(f"  trusted: {', '.join(trusted)}")
    if r.inventory is not None:
        inv = r.inventory
        flagged = [e for e in inv.entries if e.flags]
        kinds = [_counted(inv.count(k), k) for k in KINDS if inv.count(k) and k != "cache"]
        lines += ["", f"entries: {_counted(inv.count('cache'), 'cache')}"
                      + "".join(f", {k}" for k in kinds)
                      + f"; {plural(len(inv.entries), 'file')}, {size(inv.total_bytes)}; "
                      f"{len(flagged)} flagged"]
        listed = len(flagged) if verbose else FLAGGED_SHOWN
        for e in flagged[:listed]:
            lines.append(f"  {safe(e.name)}  {e.owner} {stat.S_IMODE(e.mode):04o}  "
                         f"{', '.join(e.flags)}")
        if len(flagged) > listed:
            lines.append(f"  ... {len(flagged) - listed} more (-v or jaxcache ls shows all)")
        grown = unlimited(inv.total_bytes, inv.count("cache"), jax_limit(os.environ),
                          safe(r.resolved or r.path or "PATH"))
        if grown:
            lines += wrap(f"note: {grown}", "  ", "    ")
    shown = [f for f in r.findings if verbose or f.effect != NOTE
             or f.code.startswith(("path.", "fs.", "storage.", "policy.", "origin.build",
                                   "origin.trusted-writer"))]
    if shown:
        lines += ["", "findings:"]
        for f in shown:
            # the code last: `jaxcache explain-finding CODE` says what it means and what to do
            lines += wrap(f"[{_MARK[f.effect]}] {f.message} ({f.code})", "  ", "    ")
            advice = remedy(f.remedy) if remedy and f.remedy else f.remedy
            if advice:
                lines += wrap(f"what to do: {advice}", "      ")
    lines.append("")
    return "\n".join(lines)


FLAGGED_SHOWN = 5  # flagged entries listed without --verbose


def _counted(n: int, kind: str) -> str:
    """'2 compiled entries', '1 signature': a count of files of one kind, in the words of
    trust/kernel/entries.py's KINDS (the one list of kinds); 'N paths' for anything else."""
    words = KINDS.get(kind)
    return plural(n, words.one, words.many) if words is not None else plural(n, "path", "paths")


def _writer_lines(r: AuditReport, verbose: bool) -> list[str]:
    """Each principal once, then one line per kind of power: a power over one path with its
    reason and what it gives, the files it can rewrite counted by kind (a sealed directory's
    signatures and last-use marks are not compiled code). --verbose: every path and reason."""
    kinds = {e.name: e.kind for e in r.inventory.entries} if r.inventory else {}
    groups: dict[str, list[Writer]] = {}
    for w in r.writers:
        if w.trust is Trust.UNTRUSTED or verbose:
            groups.setdefault(_tagged(r, w), []).append(w)
    lines: list[str] = []
    for who, ws in groups.items():
        lines.append(f"  {who}")
        role = r.sealed_as.get(ws[0].principal)
        if role is not None:  # under the seal its powers amount to recompiles (sealed_view)
            lines += _sealed_powers(ws, role, verbose)
            continue
        powers: dict[str, list[Writer]] = {}
        for w in ws:
            powers.setdefault(w.action, []).append(w)
        for action, same in powers.items():
            if verbose or len(same) == 1:
                for w in same:
                    lines += [f"    {w.chain[0]}", f"      {w.chain[1]}"]
                continue
            counted: dict[str, int] = {}
            for w in same:
                kind = kinds.get(w.target, "path") if action is Action.REWRITE_ENTRY else "path"
                counted[kind] = counted.get(kind, 0) + 1
            what = ", ".join(_counted(n, k)
                             for k, n in sorted(counted.items(), key=lambda kn: -kn[1]))
            reasons = len({w.chain[0].replace(safe(w.target), "") for w in same})
            more = (f" (likewise the other {len(same) - 1})" if reasons == 1 else
                    f" (the others for {plural(reasons - 1, 'other reason')})")
            lines += [f"    {same[0].chain[0]}{more}",
                      f"      -> can change {what} (-v lists each)"]
    return lines


def _tagged(r: AuditReport, w: Writer) -> str:
    """The writer as listed: its trust, or under the seal its role (sealed_view.SealedRole),
    the one the header "(sealed: without a trusted key they can only cause recompiles)"
    speaks of."""
    role = r.sealed_as.get(w.principal)
    return f"{w.principal} [{role.tag if role is not None else w.trust}]"


def _sealed_powers(ws: list[Writer], role: SealedRole, verbose: bool) -> list[str]:
    """A writer's reasons under the seal, with what they amount to for a sealed reader in
    place of what they give a plain one (its chain says "choose the code JAX runs")."""
    reasons = list(dict.fromkeys(w.chain[0] for w in ws))
    shown = reasons if verbose else reasons[:1]
    more = len(reasons) - len(shown)
    lines = [f"    {reason}" for reason in shown]
    if more:
        lines[-1] += f" (and {plural(more, 'other reason')}: -v lists each)"
    return [*lines, f"      {role.effect}"]


def _missing(r: AuditReport) -> list[str]:
    """A path that does not exist: said first, with what would create it and what judged it
    (its nearest existing ancestor), so a typo does not read as a plain PRIVATE."""
    from jaxcache.trust.create import creation_blockers, may_create_in

    anchor = r.components[-1].path if r.components else "/"
    target = r.resolved or r.path or r.requested
    blockers = creation_blockers(r)
    if blockers == () and r.judged_for.id == os.geteuid() and not may_create_in(anchor):
        how = (f"you cannot create it: {safe(anchor)} is not writable by you, so `jaxcache "
               f"init` would fail; its owner (or an admin) must create {safe(target)}, then "
               "audit it again")
    elif blockers == ():
        how = (f"`jaxcache init {safe(target)}` (or jaxcache run, jaxcache.enable()) would "
               f"create it: {plural(len(r.missing), 'directory')} with mode 0700, "
               "private once made; until then others may create the name first")
    else:
        who = "its storage cannot be judged" if blockers is None else \
            f"{', '.join(sorted({str(b.principal) for b in blockers}))} could still change it"
        how = f"`jaxcache init` would refuse to create it here: {who}"
    return [f"{style.verdict('NOT FOUND', Tone.BAD)}: {safe(target)} does not exist; judged by its "
            f"nearest existing ancestor {safe(anchor)}",
            *wrap(f"{how}; --must-exist makes a missing path exit 1")]


def _path(p: str | None) -> str | None:
    """Paths may hold invalid UTF-8: undecodable bytes become \\xNN, as in the text output."""
    return None if p is None else safe(p)


def _entry(e: Entry, origin: str | None = None,
           built: dict[str, object] | None = None) -> dict[str, object]:
    return {
        "name": _path(e.name), "kind": e.kind, "module": e.module, "key": e.key, "type": e.type,
        "size": e.size, "owner": e.owner, "uid": e.uid, "mode": f"{stat.S_IMODE(e.mode):04o}",
        "age_s": round(e.age_s, 3), "nlink": e.nlink, "acl": e.has_acl, "flags": list(e.flags),
        "writers": sorted({str(g.principal) for g in e.writers}) if e.writers else [],
        "origin": origin,  # yours | unknown | changed; null: not compiled code, or not judged
        "build": built,  # the build that wrote it (yours only); null: not judged or not known
    }


def build_json(e: EntryOrigin | None, origins: Origins) -> dict[str, object] | None:
    """The build that wrote an entry of yours, judged for this one (trust/provenance/origin.py's
    built()): the outcome (fingerprint.rule: same, compatible, different, unknown), the
    writer's fingerprint id and the reason in words."""
    j = origins.judgement(e) if e is not None else None
    if e is None or j is None:
        return None
    return {"outcome": j.outcome.value, "writer": e.writer or None,
            "reason": safe(build_reason(e, origins))}


def inventory_json(inv: Inventory | None,
                   origins: Origins | None = None) -> dict[str, object] | None:
    if inv is None:
        return None
    by_name = origins.by_name() if origins else {}
    builds = {e.name: e for e in origins.entries} if origins else {}
    return {"unreadable": inv.unreadable, "count": len(inv.entries),
            "bytes": inv.total_bytes,
            "entries": jsonout.Rows(
                _entry(e, by_name.get(e.name),
                       build_json(builds.get(e.name), origins) if origins else None)
                for e in inv.entries)}


def origins_json(origins: Origins | None) -> dict[str, object] | None:
    if origins is None:
        return None
    reader = origins.reader
    return {"ledger": _path(origins.ledger), "ledger_problem": origins.ledger_problem,
            "ledger_lines_skipped": origins.ledger_skipped,
            **origins.counts(),
            "vouched_by": {safe(who): len(names) for who, names in origins.vouched().items()},
            # the policy's trusted_ledgers, as read (a problem: it vouched for nothing)
            "trusted_ledgers": [
                {"path": _path(t.path), "owner": None if t.problem else t.owner,
                 "problem": t.problem} for t in origins.trusted],
            # the build the entries of yours were judged for, and how many of each outcome
            "build": None if reader is None else {
                "fingerprint": reader.id if reader.build else None,
                "digest": reader.build.digest if reader.build else None,
                **origins.build_counts()}}


def audit_dict(r: AuditReport) -> dict[str, object]:
    return {
        **envelope("audit"),
        "requested": _path(r.requested),
        "path": _path(r.path),
        "resolved": _path(r.resolved),
        "exists": r.exists,
        "missing": [_path(m) for m in r.missing],
        "verdict": r.verdict.value,
        "judged_for": {"user": r.judged_for.name, "uid": r.judged_for.id},
        "policy": r.policy,
        "writers": [
            {"principal": str(w.principal), "kind": w.principal.kind, "id": w.principal.id,
             "trust": w.trust, "action": w.action, "target": _path(w.target),
             "chain": list(w.chain),
             # a sealed reader's audit: what this writer can do under the seal (signer,
             # recompiles); null: not sealed, trusted, or a holder of a key nobody declared
             "sealed_as": _role(r.sealed_as.get(w.principal))}
            for w in r.writers
        ],
        "untrusted_writers": sorted(r.writer_names(Trust.UNTRUSTED)),
        "components": [
            {"path": _path(c.path), "kind": c.kind, "owner": c.owner, "group": c.group,
             "mode": f"{stat.S_IMODE(c.mode):04o}", "sticky": bool(c.mode & stat.S_ISVTX),
             "acl": list(c.acl), "default_acl": list(c.default_acl),
             "symlink_target": _path(c.target),
             "filesystem": {"type": c.fs_type, "category": c.fs_category,
                            "mount_point": _path(c.mount_point), "bind_of": _path(c.bind_of),
                            "read_only": c.read_only}}
            for c in r.components
        ],
        "entries": inventory_json(r.inventory, r.origins),
        "origins": origins_json(r.origins),
        "processes": None if r.processes is None else {
            "uninspected": r.processes.uninspected,
            "uses": [{"pid": u.pid, "uid": u.uid, "user": u.user, "command": safe(u.command),
                      "how": u.how} for u in r.processes.uses]},
        "handles": None if r.handles is None else {
            "held": [{"pid": h.pid, "uid": h.uid, "user": h.user, "command": safe(h.command),
                      "trust": h.trust, "kind": h.kind, "path": _path(h.path),
                      "detail": h.detail} for h in r.handles.handles],
            "uninspected": [{"user": u, "processes": n} for u, n in r.handles.uninspected]},
        "findings": [{"code": f.code, "effect": f.effect, "message": f.message,
                      "path": _path(f.path), "remedy": f.remedy} for f in r.findings],
    }


def _role(role: SealedRole | None) -> str | None:
    return None if role is None else role.value


def render_json(r: AuditReport, *, verbose: bool = False) -> str:
    """The whole document, whatever --verbose says."""
    return jsonout.document(audit_dict(r))


def render_sarif(r: AuditReport, *, verbose: bool = False) -> str:
    return sarif.render_findings(r.findings,
                                 {"verdict": r.verdict.value, "path": safe(r.requested)},
                                 base=r.resolved or r.path)


FORMATS: dict[str, Callable[..., str]] = {"text": render_text, "json": render_json,
                                          "sarif": render_sarif}
