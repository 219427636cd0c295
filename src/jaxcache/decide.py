"""`jaxcache decide`: share a cache only when its writers are understood, the jobs that share
it are compatible, and the saving is noticeable at start-up.

Uncontrolled or unverifiable writers are never worth the saving: that test comes first, and no
number from the bench can outweigh it.
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxcache.display import safe

KEY_FIELDS = ("jaxlib", "backend", "device_kind", "device_count", "xla_flags")


@dataclass(frozen=True)
class Test:
    name: str  # writers | compatible | noticeable
    passed: bool | None  # None: not evaluated (an earlier test already decided)
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Decision:
    verdict: str  # SHARE | PRIVATE | NOT-WORTH-IT | BLOCKED
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
    return Test("writers", verdict in ("PRIVATE", "SHARED-BY-POLICY", "SEALED"), tuple(ev))


def _compatible(benches: list[dict]) -> Test:
    ev = []
    fps = [(b.get("command"), b.get("fingerprint") or {}) for b in benches]
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
    ev.append("on JAX <= 0.10.2 every job must use the very same path string (no symlinks, "
              "no other mount point): the path enters the cache key")
    return Test("compatible", ok, tuple(ev))


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


def _noticeable(benches: list[dict], min_s: float, min_fraction: float) -> Test:
    ok = True
    ev = []
    for b in benches:
        s = b["summary"]
        saving = s.get("saving_s") or {}
        wall = ((s.get("wall") or {}).get("cold") or {}).get("median")
        low = saving.get("low")
        need = max(min_s, min_fraction * wall) if wall else min_s
        cmd = " ".join(b.get("command") or [])
        if s.get("verdict") in ("nothing-cached", "warm-missed", "no-data") or low is None \
                or wall is None:
            ok = False
            ev.append(f"{cmd}: no measurable saving ({s.get('verdict')}: {s.get('message')})")
        else:
            passed = low >= need
            ok = ok and passed
            ev.append(f"{cmd}: saves {saving['estimate']:.2f} s [{low:.2f} - "
                      f"{saving['high']:.2f}] per start of {wall:.2f} s; lower bound "
                      f"{'>=' if passed else '<'} {need:.2f} s (max of {min_s:g} s and "
                      f"{min_fraction:.0%} of start-up)")
        phases = s.get("phases") or {}
        if phases:
            spent = ", ".join(f"{k} {_seconds(v['cold']['median'])}" for k, v in phases.items())
            ev.append(f"  cold start-up spent on: {spent}")
    return Test("noticeable", ok, tuple(ev))


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


def decide(audit: dict, benches: list[dict], *, min_saving_s: float = 1.0,
           min_fraction: float = 0.05) -> Decision:
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
    if not benches:
        raise ValueError("a bench result is needed beyond the writers test")
    noticeable = _noticeable(benches, min_saving_s, min_fraction)
    compatible = _compatible(benches)
    tests = (writers, compatible, noticeable)
    if not noticeable.passed:
        return Decision("NOT-WORTH-IT", "the saved compile is not noticeable at start-up: "
                        "keep things simple (no shared cache needed)", tests,
                        _missing_ranks_advice(benches) +
                        ("the cache does not speed up the steps of a model that is already "
                         "running; look at the start-up phases above for where time goes",),
                        path)
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
