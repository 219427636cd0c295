"""`jaxcache ls`'s formats: text, one row per entry (size, owner, mode, age, links, kind,
origin, signing key and build claimed, module, flags, name) and a count; json (schema
jaxcache.ls/1): the same entries as the audit document holds them."""

from __future__ import annotations

import stat
import time
from collections.abc import Callable
from dataclasses import asdict

from jaxcache.documents.kinds import envelope
from jaxcache.report import jsonout, style
from jaxcache.report.audit import inventory_json, origins_json
from jaxcache.seal.signing.build_claims import BuildView
from jaxcache.text import age, plural, safe, size
from jaxcache.trust.kernel.entries import Inventory
from jaxcache.trust.provenance.origin import Origins


def render_text(path: str, inv: Inventory, now: float | None = None,
              origins: Origins | None = None, signers: dict[str, str] | None = None,
              builds: dict[str, BuildView] | None = None) -> str:
    now = time.time() if now is None else now
    if inv.unreadable:
        return f"{safe(path)}: {inv.unreadable}\n"
    by_name = origins.by_name() if origins else {}
    other = {e.name for e in origins.other_build()} if origins else set()
    signers = signers or {}
    builds = builds or {}
    key = ("KEY", "BUILD") if signers else ()
    rows = [("SIZE", "OWNER", "MODE", "AGE", "LINKS", "KIND", "ORIGIN", *key, "MODULE",
             "FLAGS", "NAME")]
    for e in inv.entries:
        claim = (safe(signers.get(e.name, "-")), safe(_build_words(builds.get(e.name)))) \
            if signers else ()
        rows.append((size(e.size), e.owner, f"{stat.S_IMODE(e.mode):04o}", age(e.age_s),
                     str(e.nlink), e.kind, by_name.get(e.name, "-"), *claim,
                     safe(e.module or "-"),
                     ",".join((*e.flags, *(("other-build",) if e.name in other else ()))) or "-",
                     safe(e.name)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    out = ["  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1]
           for r in rows]
    tail = ""
    if origins is not None and origins.entries:
        tail = "; origin: " + style.origin_counts(origins.counts(), {
            who: len(names) for who, names in origins.vouched().items()})
        if origins.ledger_problem:
            tail += " (the origin ledger cannot be trusted: nothing counts as yours)"
        tail += _build_tail(origins)
    # compiled entries are counted as such; the signatures and marks beside them are not
    # entries (trust/kernel/entries.py KINDS)
    out.append(f"{inv.described()}; {plural(len(inv.entries), 'file')}, "
               f"{size(inv.total_bytes)} in {safe(path)}{tail}")
    return "\n".join(out) + "\n"


def _build_words(view: BuildView | None) -> str:
    return view.words if view is not None else "-"


def _build_tail(origins: Origins) -> str:
    """What the count line says of the builds that wrote the entries: those of another build
    (flagged other-build), those whose build could not be compared, and that nothing is known
    of the build of entries of unknown origin."""
    if origins.reader is None:
        return ""
    from jaxcache.fingerprint.rule import Outcome  # as build_counts() does: not on ls's path

    counts = origins.build_counts()  # by rule.Outcome's words
    different, unknown = counts[Outcome.DIFFERENT.value], counts[Outcome.UNKNOWN.value]
    parts = []
    if different:
        whose = origins.whose_said([e.name for e in origins.other_build()])
        parts.append(f"{safe(whose) or f'{different} of yours'} written by another build on "
                     "this host (flag other-build)")
    if unknown:
        why = "no jaxlib in this Python" if origins.reader.build is None else \
            "the ledger lines do not name it"
        whose = origins.whose_said([n for names in origins.unknown_builds().values()
                                    for n in names])
        parts.append(f"the build of {safe(whose) or f'{unknown} of yours'} not compared ({why})")
    if origins.count("unknown"):
        parts.append("the build of entries of unknown origin is not known")
    return "; " + "; ".join(parts) if parts else ""


def render_json(path: str, inv: Inventory, origins: Origins | None = None,
                signers: dict[str, str] | None = None,
                builds: dict[str, BuildView] | None = None) -> str:
    doc = {**envelope("ls"),
           "path": safe(path), **(inventory_json(inv, origins) or {}),
           "compiled_entries": inv.count("cache"), "kinds": inv.kinds(),
           "origins": origins_json(origins),
           "signers": {safe(n): safe(label) for n, label in (signers or {}).items()},
           "builds": {safe(n): {k: safe(v) if isinstance(v, str) else v
                                for k, v in asdict(view).items()}
                      for n, view in (builds or {}).items()}}
    return jsonout.document(doc)


FORMATS: dict[str, Callable[..., str]] = {"text": render_text, "json": render_json}
