"""`jaxcache decide`: share a cache only when its writers are understood, the jobs that share
it are compatible, and the saving is noticeable at start-up.

Uncontrolled or unverifiable writers are never worth the saving: that test comes first, and no
number from the bench can outweigh it.
"""

from __future__ import annotations

from jaxcache import thresholds
from jaxcache.bench import noticeable
from jaxcache.decide.across import Source, across_records
from jaxcache.decide.check import Test
from jaxcache.jaxcompat import versions
from jaxcache.text import safe
from jaxcache.trust.findings import trusted as trusted_verdict
from jaxcache.values import frozen

# what two benches' jobs must agree on (the bench's `comparable`): the key's inputs, and the
# jaxlib builds (a digest JAX's key leaves out)
KEY_FIELDS = ("jaxlib", "builds", "backend", "device_kind", "device_count", "xla_flags")


@frozen
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
