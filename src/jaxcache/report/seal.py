"""`jaxcache verify|seal`'s formats; its text: the answer first, then every entry that needs a
word, then the counts. Per entry: signed now, already signed, or never hit by a sealed reader (why).

FORMATS maps each --format to its renderer: text for people, json (jaxcache.seal-scan/1).
"""

from __future__ import annotations

from dataclasses import asdict

from jaxcache.documents.kinds import envelope
from jaxcache.report import jsonout, style
from jaxcache.seal.sweep.dir_sweep import EntryStatus, ScanResult
from jaxcache.text import Tone, plural, safe, size, wrap

BUILD_STATES = ("this-build", "compatible", "other-build", "unknown")
STATUSES = ("valid", "signed-now", "co-signed", "unsigned", "bad-signature", "unknown-key",
            "revoked-key", "expired-key", "not-yet-valid-key", "too-few-signatures",
            "not-co-signed", "not-a-file", "never-hit")


def build_counts(result: ScanResult) -> dict[str, int]:
    """Valid entries by the build their signatures claim (as words), in a stable order."""
    out: dict[str, int] = {}
    for e in sorted((e for e in result.entries if e.build is not None),
                    key=lambda e: e.build.words if e.build else ""):
        if e.build is not None:
            out[e.build.words] = out.get(e.build.words, 0) + 1
    return out


WHO = ("issuer", "workflow", "repository", "ref", "caller", "event")  # SeenIdentity.who


def identity_counts(result: ScanResult) -> dict[tuple[str | None, ...], tuple[int, int]]:
    """The identities keyless signatures were made by (SeenIdentity.who: every job of one
    workflow on one ref, started the same way, is one), each with how many entries it signed
    that are valid and that were rejected, in the order first seen."""
    out: dict[tuple[str | None, ...], tuple[int, int]] = {}
    for e in result.entries:
        for who in dict.fromkeys(i.who for i in e.identities):
            valid, rejected = out.get(who, (0, 0))
            ok = e.status in ("valid", "signed-now", "co-signed")
            out[who] = (valid + ok, rejected + (not ok))
    return out


def render_json(result: ScanResult, action: str) -> str:
    doc = {**envelope("seal-scan"),
           "action": action, "directory": result.directory,
           "counts": {s: result.count(s) for s in STATUSES},
           "builds": {state: sum(1 for e in result.entries
                                 if e.build is not None and e.build.state == state)
                      for state in BUILD_STATES},
           "entries": [{**asdict(e), "identities": [i.to_json() for i in e.identities]}
                       for e in result.entries],
           "identities": [{**dict(zip(WHO, who, strict=True)), "valid": n[0],
                           "rejected": n[1]}
                          for who, n in identity_counts(result).items()],
           "leftovers": list(result.leftovers), "others": [safe(n) for n in result.others],
           "bad_locks": [{"name": safe(b.name), "why": safe(b.why)} for b in result.bad_locks],
           "all_valid": result.all_valid, "strict_ok": result.strict_ok,
           "never_hit": result.unhittable,
           "unhittable_allowed": None if action == "verify" else not result.refuse_unhittable,
           "keys": [asdict(k) for k in result.keys], "signatures_needed": result.needed,
           "signing_key": result.signer,
           "reader_refused": None if result.refused is None else {
               "verdict": result.refused[0], "why": safe(result.refused[1]),
               "remedy": None if result.refused[2] is None else safe(result.refused[2])},
           "quarantine": None if result.quarantined is None else {
               "directory": safe(result.quarantined.directory),
               "moved": [{"name": safe(n), "why": safe(w)} for n, w in result.quarantined.moved],
               "not_moved": [{"name": safe(n), "why": safe(w)}
                             for n, w in result.quarantined.failed]},
           "from_dir": None if result.from_dir is None else {
               "why": result.from_dir[0], "remedy": result.from_dir[1]},
           "ok": result.ok}
    return jsonout.document(doc)


_WHAT = {"unsigned": "UNSIGNED", "bad-signature": "BAD SIGNATURE",
         "unknown-key": "UNKNOWN KEY", "revoked-key": "REVOKED KEY", "expired-key": "EXPIRED KEY",
         "not-yet-valid-key": "KEY NOT VALID", "too-few-signatures": "TOO FEW SIGS",
         "not-co-signed": "NOT CO-SIGNED", "not-a-file": "NOT A FILE", "never-hit": "NEVER HIT"}
_SEALED = {"signed-now": "SIGNED", "valid": "ALREADY SIGNED", "co-signed": "CO-SIGNED"}
_REFILL = ("refill it from jobs run with JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES=none (as sealed "
           "readers run)")


def _first(result: ScanResult, action: str) -> str:
    total = plural(len(result.entries), "entry")
    where = safe(result.directory)
    never = result.unhittable
    if action == "verify":  # does a sealed reader load all of it?
        if not result.all_valid:
            bad = len(result.entries) - result.count("valid")
            return (f"{style.verdict('INVALID', Tone.BAD)}: {bad} of {total} do not verify, "
                    f"{plural(len(result.leftovers), 'leftover')}, in {where}")
        if result.refused is not None:
            return (f"{style.verdict('REFUSED', Tone.UNSURE)}: every entry verifies "
                    f"({total}) in {where}, "
                    f"but a sealed reader refuses the directory (verdict {result.refused[0]}, "
                    "as run --sealed and audit --sealed judge it)")
        line = f"{style.verdict('VALID', Tone.GOOD)}: every entry verifies ({total}) in {where}"
        other = sum(1 for e in result.entries if e.build and e.build.state == "other-build")
        line += f"; {other} of another build or host (misses for a sealed reader here)" \
            if other else ""
        return line + (f"; {never} of them a sealed reader never hits" if never else "")
    if action == "cosign":
        added = result.count("co-signed")
        if result.ok:
            return (f"{style.verdict('CO-SIGNED', Tone.UNSURE)}: {added} of {total} "
                    "co-signed now by "
                    f"{safe(result.signer or '')} in {where}")
        bad = len(result.entries) - result.count("valid") - added
        return (f"{style.verdict('NOT CO-SIGNED', Tone.UNSURE)}: {bad} of {total} left "
                "without this key's "
                f"signature (each says why), {added} co-signed now, in {where}")
    signed = result.count("signed-now")
    if result.ok:
        already = result.count("valid")
        # every entry signed, whether now or before: "0 of 31 signed now" read as a failure
        done = (f"all {total} already signed" if not signed and already else
                f"{signed} of {total} signed now" + (f", {already} already signed"
                                                     if already else ""))
        head = f"{style.verdict('SEALED', Tone.GOOD)}: {done} in {where}"
        return head + (f" ({never} a sealed reader never hits, signed as asked)" if never else "")
    if never and result.refuse_unhittable:
        return (f"{style.verdict('NOT SEALED', Tone.BAD)}: {never} of {total} a sealed "
                "reader would never "
                f"hit (left unsigned), {signed} signed now, in {where}")
    bad = len(result.entries) - result.count("valid") - signed
    return f"{style.verdict('INVALID', Tone.BAD)}: {bad} of {total} do not verify, in {where}"


def _moved(result: ScanResult) -> str:
    """verify --quarantine: the first line's end, what was moved before what it says of
    what is left (each entry listed below it)."""
    q = result.quarantined
    if q is None or not (q.moved or q.failed):
        return ""
    said = f", after {plural(len(q.moved), 'rejected entry', 'rejected entries')} " \
        f"{'was' if len(q.moved) == 1 else 'were'} quarantined to {safe(q.directory)}"
    return said + (f" ({len(q.failed)} could not be moved)" if q.failed else "")


def _line(e: EntryStatus, action: str, verbose: bool) -> str | None:
    """One entry that needs a word: a problem, one that seal signed now, one a sealed reader
    never hits (the why is said once below: it is the same for each), and with --verbose
    every other one too (already signed, valid)."""
    never = "; never hit: made with XLA's sub-caches on" if e.never_hit else ""
    if e.build is not None:  # another build's entry is valid, yet a sealed reader here
        never += f"; {safe(e.build.reason if e.build.state == 'other-build' else e.build.words)}"
    if e.status == "never-hit":
        return (f"  {'NEVER HIT':14s} {safe(e.name)} ({size(e.size)}): not signed, made with "
                "XLA's sub-caches on")
    if e.status in _WHAT:
        return f"  {_WHAT[e.status]:14s} {safe(e.name)} ({size(e.size)}): {safe(e.reason)}"
    other = e.build is not None and e.build.state == "other-build"
    if e.status in ("signed-now", "co-signed") or e.never_hit or other or verbose:
        word = _SEALED[e.status] if action != "verify" else e.status.upper()
        who = f": {safe(e.reason)}" if e.identities else ""  # the identity, by its workflow
        return f"  {word:14s} {safe(e.name)} ({size(e.size)}){who}{never}"
    return None


def render_text(result: ScanResult, action: str, *, verbose: bool = False) -> str:
    """The answer first, then the entries that need a word (every entry with `verbose`),
    then the counts and what they mean."""
    lines = [_first(result, action) + _moved(result)]
    q = result.quarantined
    if q is not None:
        lines += [f"  QUARANTINED    {safe(name)} ({safe(why)})" for name, why in q.moved]
        lines += [f"  NOT MOVED      {safe(name)}: {safe(why)}" for name, why in q.failed]
    if result.refused is not None:
        lines += wrap(f"why: {safe(result.refused[1])}", "  ")
        if result.refused[2]:
            lines += wrap(f"what to do: {safe(result.refused[2])}", "  ")
    if result.keys:
        needed = f"; each entry needs {result.needed} distinct key holders" \
            if result.needed > 1 else ""
        lines += wrap("keys: " + ", ".join(f"{safe(k.label)} {k.state}"
                                                  for k in result.keys) + needed, "  ")
    for (issuer, workflow, repo, ref, caller, event), (ok, no) in \
            identity_counts(result).items():
        counted = ", ".join(p for p in (f"{ok} valid" if ok else "",
                                        f"{no} rejected" if no else "") if p)
        called = f", called from {safe(caller)}" if caller and caller != workflow else ""
        lines += wrap(f"identity {safe(workflow or '?')} (issuer {safe(issuer or '?')}, "
                      f"repository {safe(repo or '?')}, ref {safe(ref or '?')}{called}, event "
                      f"{safe(event or '?')}) signed keyless: {counted}", "  ")
    lines += [line for e in result.entries
              if (line := _line(e, action, verbose)) is not None]
    for name in result.leftovers:
        lines.append(f"  LEFTOVER       {safe(name)} (an interrupted write, or a signature, "
                     "mark or -atime file without its entry; never loaded)")
    for name in result.others:
        lines.append(f"  OTHER          {safe(name)} (not an entry nor a sidecar: nothing "
                     "signed it; verify --strict fails on it)")
    for lock in result.bad_locks:
        lines += wrap(f"BAD LOCK       {safe(lock.name)} {safe(lock.why)} (never followed; "
                      "verify --strict fails on it)", "  ")
    counts = ", ".join(f"{result.count(s)} {s}" for s in STATUSES if result.count(s))
    if result.unhittable and not result.count("never-hit"):
        counts += f"; {result.unhittable} never hit by a sealed reader"
    lines.append(f"  {counts or 'no entries'}")
    builds = build_counts(result)
    if builds:
        lines += wrap("builds of the valid entries, judged for this host: " + ", ".join(
            f"{n} {w}" for w, n in builds.items()) + (
            "; a sealed reader here misses another build's entries (publish from this "
            "build, or share one cache per fingerprint)" if any(
                e.build and e.build.state == "other-build" for e in result.entries) else ""),
            "  ")
    why = next((e.never_hit for e in result.entries if e.never_hit), None)
    if why:
        lines += wrap(safe(f"never hit: {why}"), "")
        if action == "seal" and result.refuse_unhittable:
            lines += wrap("what to do: " + _REFILL + ", then seal again; or pass "
                                "--allow-unhittable to sign them anyway (they stay unused)", "")
        else:
            lines += wrap("what to do: they are dead weight for sealed readers; "
                                + _REFILL, "")
    if result.from_dir is not None:  # --from DIR's build cannot match: said once
        lines += wrap(f"why: {result.from_dir[0]}", "", "  ")
        lines += wrap(f"what to do: {result.from_dir[1]}", "", "  ")
    bad = sum(1 for e in result.entries if e.status in _WHAT and e.status != "never-hit")
    if bad:
        lines.append("entries that do not verify are misses for sealed readers (they recompile) "
                     "and are left in place: jaxcache deletes nothing it did not create")
    return "\n".join(lines) + "\n"


FORMATS = {"text": render_text, "json": render_json}
