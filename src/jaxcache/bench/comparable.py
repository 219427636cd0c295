"""What must match for two processes' timings to be comparable; and two bench results as an
A/B result (`bench --compare A B`: `ab`).

Versions, the build (each process's jaxlib build digest, which the version string does not
tell: records/fingerprints.py), Python, platform and devices, XLA flags, the cache options
(the directory itself excluded: every trial gets its own), and the input shapes and dtypes
each module compiled for. Not the build's fingerprint itself (fingerprint/: what an entry
depends on that JAX's key leaves out), of which this reads the build digest only.

The A/B result: the trial is the independent unit here as in one bench (estimates.py). Each
result's trials give one value per measure (the cold run's, or the median of the trial's warm
runs); B against A is the two-sample ratio B / A of those values (Hodges-Lehmann on the logs,
exact Mann-Whitney interval, as the bench's own warm / cold), and the difference in seconds
saved per start the two-sample shift B - A. Every setting that differs (the command, `config`,
`comparable`, the thresholds the bench set) is kept whole, however long.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any

from jaxcache.bench import estimates as stats

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from jaxcache.bench.bench_document import BenchDocument
    from jaxcache.records.run_document import RunRecord

_OPTION_SKIP = {"jax_compilation_cache_dir"}


@dataclass(frozen=True)
class Comparable:
    jax: str | None
    jaxlib: str | None
    builds: tuple[str, ...]  # the processes' jaxlib build digests, sorted ("?" where unknown)
    plugins: tuple[tuple[str, str], ...]
    python: str | None
    system: str | None
    machine: str | None
    backend: str | None
    device_kind: str | None
    device_count: int | None
    xla_flags: str | None
    cache_options: tuple[tuple[str, str], ...]
    shapes: tuple[tuple[str, str], ...]  # (module, input shapes) pairs, sorted

    @classmethod
    def of(cls, run: RunRecord, path: str = "") -> Comparable:
        from jaxcache.documents.fields import integer, text
        from jaxcache.records.run_document import facts_of

        main, host = run.processes[0], run.host
        shapes = sorted({(m.name or "?", m.input_shapes or "?") for m in main.modules})
        builds = sorted({f.fingerprint.build.digest if f.fingerprint and f.fingerprint.build
                         else "?" for f in facts_of([(path, run)])})
        return cls(
            text(main.jax), text(main.jaxlib), tuple(builds), main.plugins,
            host.runner_python_version, host.system, host.machine, text(main.backend),
            text(main.device_kind), integer(main.device_count), text(main.xla_flags),
            tuple(sorted((k, repr(v)) for k, v in main.option_values if k not in _OPTION_SKIP)),
            tuple(shapes),
        )

    def diff(self, other: Comparable) -> list[str]:
        """Human-readable differences, empty when comparable."""
        out = []
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if a != b:
                if f.name in ("shapes", "cache_options", "plugins", "builds"):
                    only_a = sorted(set(a) - set(b))
                    only_b = sorted(set(b) - set(a))
                    out.append(f"{f.name}: {only_a} vs {only_b}")
                else:
                    out.append(f"{f.name}: {a!r} vs {b!r}")
        return out

    def as_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["builds"] = list(self.builds)
        d["plugins"] = dict(self.plugins)
        d["cache_options"] = {k: v for k, v in self.cache_options}
        d["shapes"] = [{"module": m, "input_shapes": s} for m, s in self.shapes]
        return d


class Measure(StrEnum):
    """What `bench --compare` compares, per trial: a time (ratio B / A) or the saving (B - A)."""

    WARM_WALL = "warm_wall_s"
    WARM_FIRST_STEP = "warm_first_step_s"
    WARM_COMPILE = "warm_compile_or_load_s"
    COLD_WALL = "cold_wall_s"
    SAVING = "saving_s"

    @property
    def words(self) -> str:
        return {Measure.WARM_WALL: "warm start (wall)",
                Measure.WARM_FIRST_STEP: "warm time to first step",
                Measure.WARM_COMPILE: "warm compile or load",
                Measure.COLD_WALL: "cold start (wall)",
                Measure.SAVING: "saved per start (cold - warm wall)"}[self]

    @property
    def is_time(self) -> bool:
        """A duration compared as a ratio; the saving (which may be negative) as a shift."""
        return self is not Measure.SAVING


@dataclass(frozen=True, slots=True)
class Difference:
    """One measure in A and B: each trial's value, and B against A with its interval."""

    measure: Measure
    a: tuple[float, ...]
    b: tuple[float, ...]
    ratio: stats.Shift | None  # B / A (times); None: not a time, or a value not positive
    shift: stats.Shift | None  # B - A (seconds); None: a side without values

    @property
    def reading(self) -> str:
        """faster | slower | no-clear-difference | no-interval | no-data (for a saving: more |
        less | ...): what the interval says of B."""
        judged = self.ratio if self.ratio is not None else self.shift
        if judged is None:
            return "no-data"
        if not judged.resolved:
            return "no-interval"
        one = 1.0 if self.ratio is not None else 0.0
        if judged.low <= one <= judged.high:
            return "no-clear-difference"
        if self.measure.is_time:
            return "faster" if judged.high < one else "slower"
        return "more" if judged.low > one else "less"


@dataclass(frozen=True, slots=True)
class Setting:
    """A setting that differs: its name (`config.noise_s`, `comparable.builds`,
    `comparable.shapes[jit_f]`) and each side's value as compact JSON, whole."""

    name: str
    a: str
    b: str


@dataclass(frozen=True, slots=True)
class AB:
    differences: tuple[Difference, ...]
    settings: tuple[Setting, ...]
    trials: tuple[int, int]  # trials with a cold and a warm run, in A and in B
    confidence: float
    fewest: int  # the fewest trials per side that can give an interval at `confidence`

    @property
    def comparable(self) -> bool:
        """No setting differs of those that make timings comparable (versions, builds,
        devices, flags, cache options, shapes)."""
        return not any(s.name.startswith("comparable") for s in self.settings)


def _per_trial(doc: BenchDocument) -> dict[Measure, list[float]]:
    """Per trial with a cold run and at least one warm run (both comparable): each measure."""
    out: dict[Measure, list[float]] = {m: [] for m in Measure}
    usable = [s for s in doc.samples if s.comparable and s.trial is not None
              and all(v is None or math.isfinite(v) for v in (s.wall_s, s.first_step_s,
                                                                s.compile_or_load_s))]
    for cold in (s for s in usable if s.kind == "cold" and s.wall_s is not None):
        warm = [s for s in usable if s.kind == "warm" and s.trial == cold.trial]
        walls = [s.wall_s for s in warm if s.wall_s is not None]
        if cold.wall_s is None or not walls:
            continue
        out[Measure.COLD_WALL].append(cold.wall_s)
        out[Measure.WARM_WALL].append(statistics.median(walls))
        out[Measure.SAVING].append(cold.wall_s - statistics.median(walls))
        for measure, values in ((Measure.WARM_FIRST_STEP, [s.first_step_s for s in warm]),
                                (Measure.WARM_COMPILE, [s.compile_or_load_s for s in warm])):
            known = [v for v in values if v is not None]
            if known:
                out[measure].append(statistics.median(known))
    return out


def _flat(prefix: str, value: object) -> Iterator[tuple[str, object]]:
    """A document's settings as (name, value): objects one key at a time."""
    if isinstance(value, dict):
        for key in sorted(value):
            yield from _flat(f"{prefix}.{key}", value[key])
    else:
        yield prefix, value


def _settings(doc: BenchDocument) -> dict[str, object]:
    """Every setting by name; the comparable's shapes one module at a time."""
    comparable = dict(doc.comparable)
    if doc.shapes is not None:
        comparable.pop("shapes", None)
    parts: Mapping[str, object] = {"command": list(doc.command), "config": doc.config or {},
                                   "comparable": comparable,
                                   "thresholds_set_by_bench": dict(doc.thresholds_set)}
    out = {name: v for key, value in parts.items() for name, v in _flat(key, value)}
    by_module: dict[str, list[str]] = {}
    for module, shapes in doc.shapes or ():
        by_module.setdefault(module, []).append(shapes)
    out.update((f"comparable.shapes[{module}]", shapes[0] if len(shapes) == 1 else sorted(shapes))
               for module, shapes in by_module.items())
    return out


def _json(value: object) -> str:
    return "absent" if value is _ABSENT else json.dumps(value, sort_keys=True, default=str)


_ABSENT = object()


def ab(a: BenchDocument, b: BenchDocument, confidence: float = 0.95) -> AB:
    """B against A: every measure with its interval, and every setting that differs."""
    va, vb = _per_trial(a), _per_trial(b)
    if max(len(va[Measure.COLD_WALL]), len(vb[Measure.COLD_WALL])) > stats.MAX_TRIALS:
        from jaxcache.errors import JaxcacheError

        raise JaxcacheError(f"a bench result with more than {stats.MAX_TRIALS} trials: too "
                            "many to compare with exact intervals")
    out = []
    for measure in Measure:
        xa, xb = va[measure], vb[measure]
        shift = stats.two_sample_shift(xb, xa, confidence) if xa and xb else None
        ratio = (stats.two_sample_ratio(xa, xb, confidence)  # "warm / cold" = B / A
                 if measure.is_time and xa and xb and min(xa + xb) > 0 else None)
        out.append(Difference(measure, tuple(xa), tuple(xb), ratio, shift))
    sa, sb = _settings(a), _settings(b)
    settings = tuple(Setting(name, _json(sa.get(name, _ABSENT)), _json(sb.get(name, _ABSENT)))
                     for name in sorted(set(sa) | set(sb))
                     if sa.get(name, _ABSENT) != sb.get(name, _ABSENT))
    return AB(tuple(out), settings, (len(va[Measure.WARM_WALL]), len(vb[Measure.WARM_WALL])),
              confidence, stats.fewest_trials(confidence))
