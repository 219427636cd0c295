"""`jaxcache seal --generation` and `jaxcache verify --generation`: their formats. Text says the
answer first (published and where the pointer stands; valid or not), then what needs a word;
json is jaxcache.generation/1 (`action`: publish or verify).
"""

from __future__ import annotations

from jaxcache.documents.kinds import envelope
from jaxcache.report import jsonout
from jaxcache.seal.generations.reading import ObjectStatus
from jaxcache.text import age, plural, safe, size

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.seal.generations.collecting import Collected
    from jaxcache.seal.generations.publishing import Published
    from jaxcache.seal.generations.reading import Inspected


def publish_text(done: Published) -> str:
    where = f"generation {done.name} to {safe(done.store)}"
    kept = done.entries - done.uploaded
    counts = (f"{plural(done.entries, 'entry', 'entries')}, {size(done.size)} "
              f"({done.uploaded} uploaded, {size(done.uploaded_bytes)}; {kept} already there)")
    if done.moved:
        was = f"was {done.previous}" if done.previous else "new"
        head = f"published {where}: {counts}; pointer {done.pointer} moved to it ({was})"
    elif done.held_back is not None:
        head = (f"published {where}: {counts}; but pointer {done.pointer} was not moved: "
                f"{done.held_back} (readers keep {done.previous or 'no generation'}; "
                "`verify --generation --name` checks this one)")
    else:
        now = done.now_names or "no generation"
        head = (f"published {where}: {counts}; but another publisher moved pointer "
                f"{done.pointer} meanwhile (it names {now}): left alone, readers see that one")
    lines = [head]
    for name, why in done.left_out:
        lines.append(f"  left out {safe(name)}: a sealed reader never hits it ({safe(why)}); "
                     "--allow-unhittable publishes it anyway")
    for name, why in done.problems:
        lines.append(f"  not published {safe(name)}: {safe(why)}")
    return "\n".join(lines) + "\n"


def publish_json(done: Published) -> str:
    return jsonout.document({
        **envelope("generation"), "action": "publish", "ok": done.ok, "store": safe(done.store),
        "generation": done.name, "pointer": done.pointer, "previous": done.previous,
        "moved": done.moved, "pointer_names": done.name if done.moved else done.now_names,
        "held_back": done.held_back,
        "entries": done.entries, "size": done.size, "uploaded": done.uploaded,
        "uploaded_bytes": done.uploaded_bytes,
        "left_out": [{"entry": safe(n), "why": safe(w)} for n, w in done.left_out],
        "problems": [{"entry": safe(n), "why": safe(w)} for n, w in done.problems]})


def _signers(found: Inspected) -> list[str]:
    check = found.generation.signature
    return [*check.signers, *(safe(s.text) for s in check.identities)]


def verify_text(found: Inspected) -> str:
    made = found.generation.manifest
    bad = [o for o in found.objects if o.status is not ObjectStatus.VALID]
    via = f" (pointer {found.pointer})" if found.pointer else ""
    counts = f"{plural(len(made.entries), 'entry', 'entries')}, {size(made.size)}"
    head = (f"generation {made.name}{via} in {safe(found.store)}: valid: {counts}, every "
            "object matches its digest" if not bad else
            f"generation {made.name}{via} in {safe(found.store)}: {len(bad)} of {counts} "
            "do not match the manifest (a reader misses them)")
    lines = [head, f"  signed by {', '.join(_signers(found)) or 'a trusted signer'}; "
                   f"published {made.created} by {safe(made.publisher)}"
                   + (f", revision {safe(made.revision)}" if made.revision else "")]
    for o in bad:
        lines.append(f"  {o.status.value}: {safe(o.entry.key)}: {safe(o.reason)}")
    named: dict[str, list[str]] = {}
    dangling = []
    for pointer, gen in sorted(found.pointers.items()):
        if gen is None:
            dangling.append(pointer)
        else:
            named.setdefault(gen, []).append(pointer)
    lines.append(f"  the store lists {plural(len(found.generations), 'generation')} "
                 "(newest first, unverified but this one):")
    for g in found.generations:
        when = f", {age(g.age_s)} old" if g.age_s is not None else ""
        tags = f"  <- {', '.join(named[g.name])}" if g.name in named else ""
        lines.append(f"    {g.name} (manifest {size(g.size)}{when}){tags}")
    for pointer in dangling:
        lines.append(f"    pointer {pointer} names no generation")
    return "\n".join(lines) + "\n"


def verify_json(found: Inspected) -> str:
    made = found.generation.manifest
    counts: dict[str, int] = {}
    for o in found.objects:
        counts[o.status.value] = counts.get(o.status.value, 0) + 1
    return jsonout.document({
        **envelope("generation"), "action": "verify", "ok": found.ok,
        "store": safe(found.store), "pointer": found.pointer, "generation": made.name,
        "created": made.created, "publisher": safe(made.publisher),
        "revision": safe(made.revision) if made.revision else None,
        "signed_by": _signers(found), "entries": len(made.entries), "size": made.size,
        "objects": counts,
        "problems": [{"key": safe(o.entry.key), "digest": o.entry.digest,
                      "status": o.status.value, "reason": safe(o.reason)}
                     for o in found.objects if o.status is not ObjectStatus.VALID],
        "generations": [{"name": g.name, "manifest_size": g.size, "age_s": g.age_s}
                        for g in found.generations],
        "pointers": dict(sorted(found.pointers.items()))})


def collect_text(done: Collected) -> str:
    verb = "would delete" if done.dry_run else "deleted"
    lines = [f"{safe(done.store)}: kept {plural(len(done.kept), 'generation')}, {verb} "
             f"{len(done.deleted)}; {verb} {plural(done.objects_deleted, 'object')} "
             f"({size(done.bytes_freed)}), {done.objects_kept} kept"]
    if done.objects_left is not None:
        lines.append(f"  objects no kept generation names were left: {safe(done.objects_left)}")
    for name in done.deleted:
        lines.append(f"  {'would delete' if done.dry_run else 'deleted'} generation {name}")
    for pointer, gen in sorted(done.pointers.items()):
        lines.append(f"  pointer {pointer} -> {gen or 'no generation'} (kept)")
    return "\n".join(lines) + "\n"


def collect_json(done: Collected) -> str:
    return jsonout.document({
        **envelope("generation"), "action": "gc", "store": safe(done.store),
        "dry_run": done.dry_run, "kept": list(done.kept), "deleted": list(done.deleted),
        "objects_deleted": done.objects_deleted, "bytes_freed": done.bytes_freed,
        "objects_kept": done.objects_kept,
        "objects_left": safe(done.objects_left) if done.objects_left else None,
        "pointers": dict(sorted(done.pointers.items()))})
