"""Human-readable reports: the verdict first, then who can write and why, then what to do."""

from __future__ import annotations

import json
import re
import shlex
import stat
import time
from collections.abc import Callable

from jaxcache.report import style
from jaxcache.text import age, plural, safe, size, wrap
from jaxcache.trust.audit import AuditReport
from jaxcache.trust.create import InitResult
from jaxcache.trust.entries import Inventory
from jaxcache.trust.findings import NOTE, UNSAFE, UNVERIFIABLE, WARNING, Verdict
from jaxcache.trust.origin import Origins

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


def render_audit(r: AuditReport, *, verbose: bool = False,
                 remedy: Callable[[str], str | None] | None = None) -> str:
    """The audit for people; `remedy` rewrites each finding's advice for the caller's context,
    or drops it by returning None (init must not tell someone who just ran init to run init)."""
    blocked = any(f.code == "path.unreadable" for f in r.findings)
    lines = _missing(r) if r.missing and not blocked else []
    lines.append(f"verdict{' as it stands' if lines else ''}: {style.verdict(r.verdict.value)} - "
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
                          if w.trust != "untrusted"})
        groups: dict[str, list] = {}
        for w in r.writers:
            if w.trust == "untrusted" or verbose:
                groups.setdefault(f"{w.principal} [{w.trust}]", []).append(w)
        for who, ws in groups.items():
            lines.append(f"  {who}")
            for w in ws:
                lines.append(f"    {safe(w.chain[0])}")
                lines.append(f"      {safe(w.chain[1])}")
        if trusted:
            lines.append(f"  trusted: {', '.join(trusted)}")
    if r.inventory is not None:
        inv = r.inventory
        flagged = [e for e in inv.entries if e.flags]
        lines += ["", f"entries: {inv.count('cache')} cache, {inv.count('atime')} atime, "
                      f"{len(inv.entries)} in all, {size(inv.total_bytes)}; "
                      f"{len(flagged)} flagged"]
        for e in flagged[:20]:
            lines.append(f"  {safe(e.name)}  {e.owner} {stat.S_IMODE(e.mode):04o}  "
                         f"{', '.join(e.flags)}")
        if len(flagged) > 20:
            lines.append(f"  ... {len(flagged) - 20} more (jaxcache ls shows all)")
    shown = [f for f in r.findings if verbose or f.effect != NOTE
             or f.code.startswith(("path.", "fs.", "storage."))]
    if shown:
        lines += ["", "findings:"]
        for f in shown:
            lines += wrap(f"[{_MARK[f.effect]}] {f.message}", "  ", "    ")
            advice = remedy(f.remedy) if remedy and f.remedy else f.remedy
            if advice:
                lines += wrap(f"what to do: {advice}", "      ")
    lines.append("")
    return "\n".join(lines)


def render_init(result: InitResult, *, default_dir: str) -> str:
    """init succeeded: the path, and the ways to use it that audit it again before JAX loads
    anything (a bare JAX setting would trust whatever happens to the directory later)."""
    path = safe(result.path)
    what = "created" if result.created else "already private:"
    run = "jaxcache run" if result.path == default_dir else \
        f"jaxcache run --cache-dir {shlex.quote(path)}"
    return (f"{what} {path} (mode 0700, verdict {result.report.verdict.value})\n\n"
            "Use it; each way audits it again before JAX loads anything from it:\n"
            f"  {run} -- python train.py\n"
            "or in Python, right after `import jax`:\n"
            f"  jaxcache.enable({json.dumps(path)})\n")


_INIT_HINT = re.compile(r"\s*\(jaxcache init\)|: jaxcache init$")


def _for_init(remedy: str) -> str | None:
    """A finding's advice as said to someone whose init was just refused: advice that is only
    "run init" is dropped, a pointer to init inside other advice (which may matter: who else
    relies on this access) points to the location advised above instead."""
    if "`jaxcache init PATH`" in remedy:
        return None
    return _INIT_HINT.sub(" (another location: see above)", remedy)


def render_init_refused(result: InitResult, *, default_dir: str, detail: bool = True) -> str:
    """init refused PATH: the answer first, where to go instead, then the audit behind it."""
    path = safe(result.path)
    if result.path == default_dir:
        where = ("give a PATH under a directory only you and root can write (e.g. one in your "
                 "home directory with mode 0700): `jaxcache init PATH`")
    else:
        where = ("choose another location, under a parent only you and root can write: "
                 f"`jaxcache init` without PATH makes {safe(default_dir)}")
    lines = [f"{style.verdict('REFUSED')}: {path}: {safe(result.refused or '')}; nothing was "
             "changed", *wrap(f"what to do: {where}")]
    text = "\n".join(lines) + "\n"
    if detail:
        text += "\n" + render_audit(result.report, remedy=_for_init)
    return text


def _missing(r: AuditReport) -> list[str]:
    """A path that does not exist: said first, with what would create it and what judged it
    (its nearest existing ancestor), so a typo does not read as a plain PRIVATE."""
    from jaxcache.trust.create import creation_blockers

    anchor = r.components[-1].path if r.components else "/"
    target = r.resolved or r.path or r.requested
    blockers = creation_blockers(r)
    if blockers == ():
        how = (f"`jaxcache init {safe(target)}` (or jaxcache run, jaxcache.enable()) would "
               f"create it: {plural(len(r.missing), 'directory')} with mode 0700, "
               "private once made; until then others may create the name first")
    else:
        who = "its storage cannot be judged" if blockers is None else \
            f"{', '.join(sorted({str(b.principal) for b in blockers}))} could still change it"
        how = f"`jaxcache init` would refuse to create it here: {who}"
    return [f"{style.verdict('NOT FOUND')}: {safe(target)} does not exist; judged by its "
            f"nearest existing ancestor {safe(anchor)}",
            *wrap(f"{how}; --must-exist makes a missing path exit 1")]


def render_ls(path: str, inv: Inventory, now: float | None = None,
              origins: Origins | None = None, signers: dict[str, str] | None = None) -> str:
    now = time.time() if now is None else now
    if inv.unreadable:
        return f"{safe(path)}: {inv.unreadable}\n"
    by_name = origins.by_name() if origins else {}
    signers = signers or {}
    key = ("KEY",) if signers else ()
    rows = [("SIZE", "OWNER", "MODE", "AGE", "LINKS", "KIND", "ORIGIN", *key, "MODULE",
             "FLAGS", "NAME")]
    for e in inv.entries:
        claim = (safe(signers.get(e.name, "-")),) if signers else ()
        rows.append((size(e.size), e.owner, f"{stat.S_IMODE(e.mode):04o}", age(e.age_s),
                     str(e.nlink), e.kind, by_name.get(e.name, "-"), *claim,
                     safe(e.module or "-"), ",".join(e.flags) or "-", safe(e.name)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    out = ["  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1]
           for r in rows]
    count = len(inv.entries)
    tail = ""
    if origins is not None and origins.entries:
        tail = "; origin: " + style.origin_counts(origins.counts())
        if origins.ledger_problem:
            tail += " (the origin ledger cannot be trusted: nothing counts as yours)"
    out.append(f"{plural(count, 'entry')}, {size(inv.total_bytes)} in "
               f"{safe(path)}{tail}")
    return "\n".join(out) + "\n"
