"""`jaxcache fingerprint`: text for people, JSON (jaxcache.fingerprint/1) for scripts.

FORMATS renders this host's fingerprint; COMPARE renders the judgement of another host's
(fingerprint/rule.py) against it.
"""

from __future__ import annotations

from collections.abc import Callable

from jaxcache.documents.kinds import envelope
from jaxcache.fingerprint.model import Fingerprint
from jaxcache.fingerprint.rule import Judgement
from jaxcache.report import jsonout
from jaxcache.text import plural, safe, size


def _features(fp: Fingerprint, most: int = 10) -> str:
    names = sorted(fp.cpu.features)
    shown = " ".join(names[:most])
    return shown + (f" ... ({len(names)} in all)" if len(names) > most else "")


def lines(fp: Fingerprint, verbose: bool = False, label: str = "") -> list[str]:
    """The fingerprint as aligned lines (also what --compare shows for each side)."""
    out = [f"fingerprint {fp.id}{label}"]
    if fp.build is None:
        out.append("  build     none: no jaxlib in this Python (nothing to compare)")
    else:
        total = sum(p.size for p in fp.build.parts)
        versions = ", ".join(f"{safe(n)} {safe(v)}" for n, v in fp.build.versions) or "?"
        out.append(f"  build     {fp.build.short}  {versions}: "
                   f"{plural(len(fp.build.parts), 'shared object')}, {size(total)} (blake3)")
        if verbose:
            for p in fp.build.parts:
                out.append(f"            {p.digest[:16]}  {size(p.size):>9}  "
                           f"{safe(p.package)}/{safe(p.path)}")
    out.append(f"  machine   {safe(fp.machine) or '?'}")
    model = " ".join(x for x in (safe(fp.cpu.vendor), safe(fp.cpu.model)) if x) or "unknown"
    out.append(f"  cpu       {model}: {plural(len(fp.cpu.features), 'instruction feature')}")
    if fp.cpu.features:
        out.append(f"            {safe(_features(fp, 200 if verbose else 10))}")
    a = fp.accelerator
    if a is not None:
        out.append(f"  backend   {safe(a.platform)} {safe(a.platform_version)}"
                   + (f", {safe(a.device_kind)}" if a.device_kind else "")
                   + (f", compute capability {safe(a.compute_capability)}"
                      if a.compute_capability else ""))
    out.extend(f"  note: {safe(n)}" for n in fp.notes)
    return out


def render_text(fp: Fingerprint, verbose: bool = False) -> str:
    return "\n".join([*lines(fp, verbose),
                      "Share a cache directory or prefix only between equal fingerprints, or "
                      "where the writer's CPU features are all on the reader's "
                      "(docs/reference/fingerprint.md)."]) + "\n"


def render_json(fp: Fingerprint, verbose: bool = False) -> str:
    return jsonout.document({**envelope("fingerprint"), **_body(fp),
                             "notes": [safe(n) for n in fp.notes]})


def _body(fp: Fingerprint) -> dict[str, object]:
    doc = fp.to_json()
    doc.pop("schema", None)
    return doc


def compare_text(mine: Fingerprint, other: Fingerprint, judged: Judgement) -> str:
    verdict = "LOADS" if judged.loads else "DOES NOT LOAD"
    return "\n".join([f"{verdict}: entries written under {other.id} "
                      f"{'may' if judged.loads else 'may not'} be loaded here ({mine.id}): "
                      f"{safe(judged.reason)}",
                      *lines(other, label=" (the writer)"), *lines(mine, label=" (here)")]
                     ) + "\n"


def compare_json(mine: Fingerprint, other: Fingerprint, judged: Judgement) -> str:
    return jsonout.document({**envelope("fingerprint"), **_body(mine),
                             "compared": {"writer": _body(other),
                                          "outcome": judged.outcome.value,
                                          "loads": judged.loads,
                                          "reason": safe(judged.reason),
                                          "differences": [
                                              {"field": d.field.value,
                                               "match": d.field.match.value,
                                               "writer": safe(d.writer),
                                               "reader": safe(d.reader)}
                                              for d in judged.differences]}})


FORMATS: dict[str, Callable[[Fingerprint, bool], str]] = {"text": render_text,
                                                          "json": render_json}
COMPARE: dict[str, Callable[[Fingerprint, Fingerprint, Judgement], str]] = {
    "text": compare_text, "json": compare_json}
