"""JSON output with a versioned schema (docs/audit.md): stable keys, paths as text, written by
the one JSON writer (report/jsonout.py) like every other document."""

from __future__ import annotations

import stat

from jaxcache.documents.kinds import envelope
from jaxcache.report import jsonout
from jaxcache.text import safe
from jaxcache.trust.audit import AuditReport
from jaxcache.trust.entries import Entry, Inventory
from jaxcache.trust.origin import Origins


def _path(p: str | None) -> str | None:
    """Paths may hold invalid UTF-8: undecodable bytes become \\xNN, as in the text output."""
    return None if p is None else safe(p)


def _entry(e: Entry, origin: str | None = None) -> dict:
    return {
        "name": _path(e.name), "kind": e.kind, "module": e.module, "key": e.key, "type": e.type,
        "size": e.size, "owner": e.owner, "uid": e.uid, "mode": f"{stat.S_IMODE(e.mode):04o}",
        "age_s": round(e.age_s, 3), "nlink": e.nlink, "acl": e.has_acl, "flags": list(e.flags),
        "writers": sorted({str(g.principal) for g in e.writers}) if e.writers else [],
        "origin": origin,  # yours | unknown | changed; null: not compiled code, or not judged
    }


def _inventory(inv: Inventory | None, origins: Origins | None = None) -> dict | None:
    if inv is None:
        return None
    by_name = origins.by_name() if origins else {}
    return {"unreadable": inv.unreadable, "count": len(inv.entries),
            "bytes": inv.total_bytes,
            "entries": jsonout.Rows(_entry(e, by_name.get(e.name)) for e in inv.entries)}


def _origins(origins: Origins | None) -> dict | None:
    if origins is None:
        return None
    return {"ledger": _path(origins.ledger), "ledger_problem": origins.ledger_problem,
            "ledger_lines_skipped": origins.ledger_skipped,
            **origins.counts()}


def audit_dict(r: AuditReport) -> dict:
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
             "chain": [_path(c) for c in w.chain]}
            for w in r.writers
        ],
        "untrusted_writers": sorted(r.writer_names("untrusted")),
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
        "entries": _inventory(r.inventory, r.origins),
        "origins": _origins(r.origins),
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


def render_audit(r: AuditReport) -> str:
    return jsonout.document(audit_dict(r))


def render_ls(path: str, inv: Inventory, origins: Origins | None = None,
              signers: dict[str, str] | None = None) -> str:
    doc = {**envelope("ls"),
           "path": _path(path), **(_inventory(inv, origins) or {}),
           "origins": _origins(origins),
           "signers": {safe(n): safe(label) for n, label in (signers or {}).items()}}
    return jsonout.document(doc)


def render_init(result) -> str:
    """`jaxcache init --format json` (schema jaxcache.init/1): the audit it based itself on."""
    return jsonout.document({**envelope("init"), "path": result.path, "ok": result.ok,
                             "created": list(result.created), "refused": result.refused,
                             "audit": audit_dict(result.report)})
