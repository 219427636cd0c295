"""`jaxcache decide`: share a cache only when its writers are understood, the jobs that share
it are compatible, and the saving is noticeable at start-up.

Uncontrolled or unverifiable writers are never worth the saving: that test comes first, and no
number from the bench can outweigh it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from jaxcache import thresholds
from jaxcache.bench import noticeable
from jaxcache.explain.builds import named
from jaxcache.fingerprint import rule
from jaxcache.fingerprint.model import Fingerprint
from jaxcache.jaxcompat import versions
from jaxcache.records.fingerprints import ProcessFacts
from jaxcache.text import plural, safe
from jaxcache.trust.findings import trusted as trusted_verdict

# what two benches' jobs must agree on (the bench's `comparable`): the key's inputs, and the
# jaxlib builds (a digest JAX's key leaves out)
KEY_FIELDS = ("jaxlib", "builds", "backend", "device_kind", "device_count", "xla_flags")


@dataclass(frozen=True)
class Test:
    name: str  # writers | compatible | noticeable
    passed: bool | None  # None: not evaluated (an earlier test already decided)
    evidence: tuple[str, ...]
    outcome: str | None = None  # noticeable: noticeable | too-small | inconclusive | missed


@dataclass(frozen=True)
class Decision:
    verdict: str  # SHARE | PRIVATE | NOT-WORTH-IT | INCONCLUSIVE | BLOCKED
    summary: str
    tests: tuple[Test, ...]
    advice: tuple[str, ...]
    path: str | None

    @property
    def exit_code(self) -> int:
        return 0 if self.verdict in ("SHARE", "PRIVATE") else 1


def _writers(audit: dict) -> Test:
    verdict = audit["verdict"]
    untrusted = audit.get("untrusted_writers") or []
    trusted = sorted({w["principal"] for w in audit.get("writers") or []
                      if w.get("trust") == "policy"})
    ev = [f"audit of {safe(audit.get('resolved') or audit.get('requested') or '?')} for user "
          f"{audit['judged_for']['user']}: {verdict}"]
    if untrusted:
        ev.append(f"undeclared writers: {', '.join(untrusted)}")
        for w in (audit.get("writers") or []):
            if w.get("trust") == "untrusted":
                ev.append(f"  {w['principal']}: {' '.join(w['chain'])}")
                break
    if trusted:
        ev.append(f"declared trusted by policy: {', '.join(trusted)}")
    for f in audit.get("findings") or []:
        if f.get("effect") == "unverifiable":
            ev.append(f"unverifiable: {f['message']}")
        if f.get("code") == "seal.keys":
            ev.append(f["message"])
    return Test("writers", trusted_verdict(verdict), tuple(ev))


def _compatible(benches: list[dict]) -> Test:
    if all((b.get("summary") or {}).get("verdict") == "nothing-cached" for b in benches):
        return Test("compatible", None, ("not judged: the cold runs wrote no entry, so no warm "
                                         "run could hit (see the noticeable saving below)",))
    ev = []
    fps = [(b.get("command"), b.get("comparable") or {}) for b in benches]
    ref_cmd, ref = fps[0]
    ok = True
    for cmd, fp in fps[1:]:
        diffs = [f"{k}: {ref.get(k)!r} vs {fp.get(k)!r}" for k in KEY_FIELDS
                 if ref.get(k) != fp.get(k)]
        if diffs:
            ok = False
            ev.append(f"{' '.join(cmd or [])} differs from {' '.join(ref_cmd or [])} in what "
                      f"the cache key depends on: {'; '.join(diffs)}")
    ev.append("key inputs: " + ", ".join(f"{k}={ref.get(k)!r}" for k in KEY_FIELDS))
    for b in benches:
        warm = [s for s in b.get("samples") or [] if s.get("kind") == "warm"]
        hit = sum(1 for s in warm if s.get("hits") and not s.get("missed_ranks"))
        ratio = hit / len(warm) if warm else 0.0
        ev.append(f"warm runs that hit: {hit} of {len(warm)} ({ratio:.0%}) for "
                  f"{' '.join(b.get('command') or [])}" + _ranks_missed(warm))
        if not warm or hit < len(warm):
            ok = False
    in_key = [versions.path_in_key(fp.get("jax")) for _, fp in fps]
    if any(k is not False for k in in_key):  # JAX <= 0.10, or not recorded
        ev.append("on JAX <= 0.10 every job must use the very same path string (no symlinks, "
                  "no other mount point): the path enters the cache key")
    return Test("compatible", ok, tuple(ev))


@dataclass(frozen=True)
class Source:
    """One `--records` argument (a team's or a host's run records: a folder or a file) and
    every probed process of its records."""

    path: str
    processes: tuple[ProcessFacts, ...]


@dataclass(frozen=True)
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


def _both(a: Test, b: Test) -> Test:
    """One compatible test from the benches' and the records': failed if either failed."""
    said = [t.passed for t in (a, b) if t.passed is not None]
    passed = None if not said else all(said)
    return Test("compatible", passed, a.evidence + b.evidence)


def _ranks_missed(warm: list[dict]) -> str:
    """'; rank 1 missed in 3 of 3' for the ranks that compiled again what the cold run wrote
    (a warm run counts as a hit only if every rank hit: the job waits for the slowest)."""
    per: dict = {}
    for s in warm:
        for m in s.get("missed_ranks") or []:
            per.setdefault(m.get("rank"), set()).add(id(s))
    if not per:
        return ""
    ranks = sorted(per, key=lambda r: (r is None, r if isinstance(r, int) else 0))
    named = [f"{'rank ?' if r is None else f'rank {r}'} missed in {len(per[r])} of {len(warm)}"
             for r in ranks]
    return "; " + "; ".join(named) + " (a run hits only if every rank hit)"


def _missing_ranks_advice(benches: list[dict]) -> tuple[str, ...]:
    ranks = sorted({m.get("rank") for b in benches for s in b.get("samples") or []
                    for m in s.get("missed_ranks") or []},
                   key=lambda r: (r is None, r if isinstance(r, int) else 0))
    if not ranks:
        return ()
    named = ", ".join("?" if r is None else str(r) for r in ranks)
    return (f"rank{'s' if len(ranks) > 1 else ''} {named} compiled again what the cold run wrote, "
            "and the job waits for its slowest rank: `jaxcache explain` on the cold and warm "
            "records (bench --workdir keeps them) shows which key components differ from the "
            "entries process 0 wrote",)


def _bar_of(bench: dict, min_s: float | None, min_fraction: float | None) -> noticeable.Bar:
    """The bar to judge a bench by: decide's own where given, else the one the bench used
    (so that decide, given a bench's --json, answers as that bench did), else the defaults."""
    used = (bench.get("summary") or {}).get("noticeable_bar") or {}

    def pick(given: float | None, key: str, default: float) -> float:
        if given is not None:
            return given
        value = used.get(key)
        return default if value is None else value

    return noticeable.Bar(pick(min_s, "min_saving_s", noticeable.MIN_SAVING_S),
                          pick(min_fraction, "min_fraction", noticeable.MIN_FRACTION))


def _noticeable(benches: list[dict], min_s: float | None, min_fraction: float | None
                ) -> tuple[Test, tuple[str, ...]]:
    """The noticeable test (bench/noticeable.py, the rule bench applies), per bench; the
    outcome is the worst of them (too-small or missed, then inconclusive), with its advice."""
    outcomes, ev, advice = [], [], []
    for b in benches:
        s = b["summary"]
        wall = ((s.get("wall") or {}).get("cold") or {}).get("median")
        cmd = " ".join(b.get("command") or [])
        shift = noticeable.judged_from_json(s)  # the saving the bench's verdict judged
        if s.get("verdict") in ("nothing-cached", "warm-missed", "no-data") or shift is None:
            outcomes.append(MISSED)
            ev.append(f"{cmd}: no saving to judge ({s.get('verdict')}: {s.get('message')})")
            left = _obj(_obj(b.get("thresholds")).get("left_out"))
            if s.get("verdict") == "nothing-cached" and left.get("modules"):
                ev.append(_left_out_evidence(left))
            advice.append(_missed_advice(s.get("verdict"), left, cmd))
        else:
            j = noticeable.judge(shift, wall, _bar_of(b, min_s, min_fraction))
            outcomes.append(j.outcome)
            ev.append(f"{cmd}: {j.why}")
            if not j.met:
                advice.append(noticeable.advice(j))
        phases = s.get("phases") or {}
        if phases:
            spent = ", ".join(f"{k} {_seconds(v['cold']['median'])}" for k, v in phases.items())
            ev.append(f"  cold start-up spent on: {spent}")
    worst = next((o for o in (noticeable.TOO_SMALL, MISSED, noticeable.INCONCLUSIVE)
                  if o in outcomes), noticeable.NOTICEABLE)
    passed = worst == noticeable.NOTICEABLE
    return (Test("noticeable", passed, tuple(ev), worst),
            tuple(dict.fromkeys(advice)))  # each piece of advice once


MISSED = "missed"  # no saving to judge: nothing cached, warm runs missed, no data


def _left_out_evidence(left: dict) -> str:
    share, seconds = left.get("share"), left.get("seconds")
    seconds = float(seconds) if isinstance(seconds, int | float) else 0.0
    return (f"  JAX's write thresholds left {safe(str(left.get('modules')))} compiles uncached: "
            f"{seconds:.2f} s of compile"
            + (f", {share:.0%} of start-up" if isinstance(share, int | float) else "")
            + ("; material" if left.get("material") else "; not material"))


def _missed_advice(verdict: str | None, left: dict | None = None, cmd: str = "CMD") -> str:
    left = left or {}
    if verdict == "nothing-cached" and left.get("modules"):
        if left.get("material"):
            return (f"what the thresholds leave out is material: bench a lower one before "
                    f"keeping it (`jaxcache bench {safe(str(left.get('suggestion')))} -- "
                    f"{safe(cmd)}`, or decide with the same flag), at the cost of more, "
                    "smaller entries to store and trust")
        return ("what the thresholds leave out is not material: this job gains nothing from a "
                "persistent cache; keep the thresholds and do not share a cache for it")
    if verdict == "warm-missed":
        return ("the warm runs compiled again instead of loading the cold run's entries, so "
                "the saving could not be measured: `jaxcache explain` on a cold and a warm "
                "record (bench --workdir keeps them) names the key component that differs")
    if verdict == "nothing-cached":
        return ("the cold run wrote no entry (JAX's thresholds: compile time >= 1 s, entry "
                "size): `jaxcache explain -- CMD` says which rule left each module out")
    return "no trial has both a cold and a warm run: rerun the bench"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def _users(audit: dict) -> list[str]:
    who = set()
    for u in ((audit.get("processes") or {}).get("uses") or []):
        who.add(f"{u['user']} (process {u['pid']}, {u['how']})")
    for e in ((audit.get("entries") or {}).get("entries") or []):
        if "foreign-owner" in e.get("flags", []):
            who.add(f"{e['owner']} (owns entries)")
    return sorted(who)


def decide(audit: dict, benches: list[dict], *, min_saving_s: float | None = None,
           min_fraction: float | None = None, records: list[Source] | None = None
           ) -> Decision:
    """_decide() with, where the saving was measured under thresholds the bench set, the
    advice to run the job with the same ones (at JAX's defaults it writes less, or nothing)."""
    from dataclasses import replace

    d = _decide(audit, benches, min_saving_s=min_saving_s, min_fraction=min_fraction,
                records=records)
    flags = _threshold_flags(benches)
    if d.verdict in ("SHARE", "PRIVATE") and flags:
        d = replace(d, advice=d.advice + (
            f"the saving was measured with {flags}: run the job the same way (`jaxcache run "
            f"{flags} -- CMD`, or enable(min_compile_time=...)); at JAX's defaults it writes "
            "fewer entries, or none",))
    return d


def _obj(value: object) -> dict:
    """A bench document's object field, or {} where a writer put anything else there."""
    return value if isinstance(value, dict) else {}


def _threshold_flags(benches: list[dict]) -> str:
    """The threshold flags the benches set, as run and bench take them ('' for none)."""
    found: dict[str, str] = {}
    for b in benches:
        set_by = _obj(_obj(b.get("thresholds")).get("set_by_bench"))
        if set_by:
            for flag, name in thresholds.FLAGS.items():
                if isinstance(set_by.get(name), str):
                    found.setdefault(flag, safe(set_by[name]))
    return " ".join(f"{flag} {value}" for flag, value in found.items())


def _decide(audit: dict, benches: list[dict], *, min_saving_s: float | None = None,
            min_fraction: float | None = None, records: list[Source] | None = None
            ) -> Decision:
    """The three tests in order. The noticeable bar defaults to the one each bench used
    (bench/noticeable.py's defaults for older results); INCONCLUSIVE when the trials cannot
    tell, which exits 1 like NOT-WORTH-IT: a gate must not pass on an undecided saving.
    `records` (decide --records): the jobs that would share the cache; jobs of different
    builds or hosts (or unknown ones) are BLOCKED whatever the saving, as uncontrolled
    writers are: one cache would hand each entries compiled for the other."""
    path = audit.get("resolved") or audit.get("path")
    writers = _writers(audit)
    others = _users(audit)
    if not writers.passed:
        advice = ["use separate, private cache directories per user or team: "
                  "`jaxcache init` as each user (e.g. ~/.cache/jaxcache/jax), and point each "
                  "job's JAX_COMPILATION_CACHE_DIR at its own"]
        if others:
            advice.append("before changing anything on this directory, talk to who else uses "
                          "it: " + "; ".join(others))
        advice.append("do not loosen or tighten permissions of a shared directory blindly; "
                      "if sharing is intended, make the writer set explicit (a dedicated group "
                      "whose members are declared in a jaxcache policy) or publish signed "
                      "entries from one trusted writer")
        return Decision("BLOCKED", "uncontrolled or unverifiable writers: no saving justifies "
                        "trusting them to choose the code your process runs",
                        (writers, Test("compatible", None, ()), Test("noticeable", None, ())),
                        tuple(advice), path)
    across = across_records(records) if records else None
    if across is not None and across.blocked:
        return Decision("BLOCKED", across.blocked,
                        (writers, across.test, Test("noticeable", None, ())), across.advice,
                        path)
    unjudged = across.test if across is not None else Test("compatible", None, ())
    if not benches:  # the writers pass; the saving is not measured: a gate must not pass
        return Decision("INCONCLUSIVE", "the writers are understood, but no bench measured the "
                        "saving: bench before deciding", (writers, unjudged,
                                                          Test("noticeable", None, ())),
                        ("give an earlier `jaxcache bench --json B.json` result with --bench "
                         "B.json, or the job after -- (jaxcache decide PATH -- python train.py) "
                         "to bench it now",), path)
    saving, saving_advice = _noticeable(benches, min_saving_s, min_fraction)
    compatible = _compatible(benches)
    if across is not None:
        compatible = _both(compatible, across.test)
    tests = (writers, compatible, saving)
    if saving.outcome == noticeable.INCONCLUSIVE:
        return Decision("INCONCLUSIVE", "the trials cannot tell whether the saving is "
                        "noticeable at start-up: measure again before deciding", tests,
                        _missing_ranks_advice(benches) + saving_advice, path)
    if not saving.passed:
        summary = ("the saved compile is not noticeable at start-up: keep things simple (no "
                   "shared cache needed)" if saving.outcome == noticeable.TOO_SMALL else
                   "the bench measured no saving (nothing cached or warm runs that missed): "
                   "no shared cache until that is fixed")
        return Decision("NOT-WORTH-IT", summary, tests,
                        _missing_ranks_advice(benches) + saving_advice, path)
    if audit["verdict"] == "SEALED" and compatible.passed:
        return Decision("SHARE", "a shared sealed cache is justified: readers load only entries "
                        "signed by trusted keys whose holders are declared writers, the jobs are "
                        "compatible, and the saving is noticeable", tests,
                        ("every reader must run with --sealed (or enable(sealed=True)); keep the "
                         "signing keys secret and the policy's key list current",), path)
    if audit["verdict"] == "SHARED-BY-POLICY" and compatible.passed:
        return Decision("SHARE", "a shared cache is justified: every writer is declared "
                        "trusted, the jobs are compatible, and the saving is noticeable", tests,
                        ("keep the policy's writer list current; every job must use exactly "
                         f"{safe(path or '?')}",), path)
    why = ("only you (and root) can write it" if audit["verdict"] == "PRIVATE" else
           "the jobs that would share it are not compatible")
    return Decision("PRIVATE", f"use a private cache per user or team ({why}); it saves a "
                    "noticeable amount", tests,
                    ("`jaxcache init` as each user, one directory per user or team and job "
                     "family",), path)
