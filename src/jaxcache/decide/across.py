"""`decide --records A/ B/`: the compatible test across the jobs that would share the cache
(each team's or host's run records), not only one bench's processes on one machine.

Builds and hosts are judged by fingerprint/rule.py both ways (each job writes what the other
reads): JAX's key cannot tell them apart, so a difference blocks the cache. Versions, devices,
XLA flags and input shapes are in JAX's key: a difference there only means that the jobs'
entries never serve each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from jaxcache.decide.check import Test
from jaxcache.explain.build_mismatch import named
from jaxcache.fingerprint import rule
from jaxcache.fingerprint.model import Fingerprint
from jaxcache.records.run_document import ProcessFacts
from jaxcache.text import plural, safe


@dataclass(frozen=True, slots=True)
class Source:
    """One `--records` argument (a team's or a host's run records: a folder or a file) and
    every probed process of its records."""

    path: str
    processes: tuple[ProcessFacts, ...]


@dataclass(frozen=True, slots=True)
class AcrossRecords:
    """The compatible test across the jobs of `--records`, and why the cache must not be
    shared at all (`blocked`: builds or hosts differ, or are not known), else ""."""

    test: Test
    blocked: str
    advice: tuple[str, ...]


def _names(procs: list[ProcessFacts], most: int = 3) -> str:
    shown = [p.who for p in procs[:most]]
    return ", ".join(shown) + (f" and {len(procs) - most} more" if len(procs) > most else "")


def _differs(what: str, procs: list[ProcessFacts],
             value: Callable[[ProcessFacts], str | None]) -> list[str]:
    """'<what> differs: 'a' (rank 0 of A/r.json) vs 'b' (...)' when the processes disagree."""
    groups: dict[str | None, list[ProcessFacts]] = {}
    for p in procs:
        groups.setdefault(value(p), []).append(p)
    if len(groups) < 2:
        return []
    return [f"{what} differs: " + " vs ".join(f"{safe(repr(v))} ({_names(ps)})"
                                            for v, ps in groups.items())]


def _shapes(sources: list[Source]) -> list[str]:
    """Modules that every job compiles under the same name but for other input shapes: their
    keys differ, so no job's entry serves another's."""
    per: dict[str, dict[str, set[str]]] = {}
    for src in sources:
        for p in src.processes:
            for module, shapes in p.shapes:
                per.setdefault(module, {}).setdefault(src.path, set()).add(shapes)
    out = []
    for module, by_source in sorted(per.items()):
        sets = list(by_source.values())
        if len(sets) > 1 and not set.intersection(*sets):
            out.append(f"module {safe(module)} is compiled for other input shapes: " + " vs ".join(
                f"{safe(', '.join(sorted(v))[:200])} ({safe(k)})" for k, v in by_source.items()))
    return out[:3] + ([f"... and {len(out) - 3} more modules"] if len(out) > 3 else [])


def _fingerprint_line(src: Source) -> str:
    ids: dict[str, list[ProcessFacts]] = {}
    for p in src.processes:
        if p.fingerprint is not None:
            ids.setdefault(p.fingerprint.id, []).append(p)
    parts = []
    for fid, ps in ids.items():
        fp = ps[0].fingerprint
        assert fp is not None
        build = fp.build.short if fp.build else "none"
        every = len(ps) == len(src.processes)
        parts.append(f"fingerprint {fid} (jaxlib build {build}, {safe(fp.machine)}, "
                     f"{plural(len(fp.cpu.features), 'CPU feature')})"
                     + ("" if every else f" in {plural(len(ps), 'process', 'processes')}"))
    return (f"{safe(src.path)}: {plural(len(src.processes), 'process', 'processes')}; "
            + ("; ".join(parts) if parts else "no fingerprint known"))


def across_records(sources: list[Source]) -> AcrossRecords:
    """Whether the jobs of these records can share one cache: the same build and kind of host
    (fingerprint/rule.py, both ways: each job writes what the other reads), which JAX's key
    cannot tell apart, so a difference blocks the cache; and the same JAX and jaxlib versions,
    devices, XLA flags and input shapes, which JAX's key holds, so a difference only means
    that their entries never serve each other."""
    procs = [p for s in sources for p in s.processes]
    ev = [_fingerprint_line(s) for s in sources]
    if not procs:
        return AcrossRecords(Test("compatible", False, (*ev, "no probed process in the records: "
                                                         "nothing to compare")), "", ())
    unknown = [p for p in procs if p.fingerprint is None]
    ev += [f"{p.who}: fingerprint not known: {p.unknown}" for p in unknown[:3]]
    known = [p for p in procs if p.fingerprint is not None]
    fields: dict[rule.Field, set[str]] = {}
    builds = {p.fingerprint.build.digest for p in known if p.fingerprint and p.fingerprint.build}
    firsts: dict[Fingerprint, list[ProcessFacts]] = {}  # the processes of each fingerprint
    for p in known:
        assert p.fingerprint is not None
        firsts.setdefault(p.fingerprint, []).append(p)
    if known:
        ref = known[0]
        assert ref.fingerprint is not None
        for fp, same in list(firsts.items())[1:]:  # one line per other fingerprint
            p = same[0]
            diffs = rule.between(ref.fingerprint, fp)
            forth = rule.judge(ref.fingerprint, fp).differences
            for d in diffs:
                fields.setdefault(d.field, set()).add(p.who)
            if diffs:
                more = f" (and {plural(len(same) - 1, 'more process', 'more processes')} " \
                    "like it)" if len(same) > 1 else ""
                ev.append(f"{p.who}{more} against {ref.who}: " + "; ".join(
                    named(d, ref.who, p.who) if d in forth else named(d, p.who, ref.who)
                    for d in diffs))
    in_key = (_differs("JAX version", procs, lambda p: p.jax)
              + _differs("jaxlib version", procs, lambda p: p.jaxlib)
              + _differs("backend", procs, lambda p: p.backend)
              + _differs("device kind", procs, lambda p: p.device_kind)
              + _differs("XLA_FLAGS", procs, lambda p: p.xla_flags)
              + _shapes(sources))
    ev += [f"{line}: JAX's key holds it, so these jobs' entries never serve each other"
           for line in in_key]
    blocked = ""
    advice: tuple[str, ...] = ()
    if fields:
        what = [f"{len(builds)} jaxlib builds" if rule.Field.BUILD in fields else "",
                "CPU feature sets" if rule.Field.CPU_FEATURES in fields else "",
                "machines" if rule.Field.MACHINE in fields else "",
                "platform versions" if rule.Field.PLATFORM_VERSION in fields else "",
                "compute capabilities" if rule.Field.COMPUTE_CAPABILITY in fields else ""]
        blocked = (f"not compatible: {' / '.join(w for w in what if w)} differ; share one "
                   "cache per fingerprint (a prefix per fingerprint) or none")
        ids = sorted({p.fingerprint.id for p in known if p.fingerprint})
        advice = (f"give each fingerprint its own cache directory or bucket prefix (`jaxcache "
                  f"fingerprint --short` prints a host's: here {', '.join(ids)}), or share "
                  "none: JAX's key does not tell these builds or hosts apart, so one cache "
                  "would hand each job entries compiled for the other (which can crash it)",)
    elif unknown:
        blocked = (f"cannot tell whether the jobs run one build: "
                   f"{plural(len(unknown), 'process', 'processes')} of the records "
                   "have no known fingerprint; share no cache between them until each does")
        advice = ("record each job with `jaxcache run` on the host it runs on (the record "
                  "then carries its fingerprint) and decide again",)
    return AcrossRecords(Test("compatible", not blocked and not in_key, tuple(ev)), blocked,
                         advice)
