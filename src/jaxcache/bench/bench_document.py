"""A bench result (`bench --json`, jaxcache.bench/1, written by report/bench/json.py) as typed
data, parsed once from a document documents/read.py checked (load_bench, bench_from): what
`bench --compare` shows and what decide weighs (decide/facts.py) read these objects, never
the document's keys.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from jaxcache.bench.estimates import Shift
from jaxcache.documents.fields import integer, items, mapping, mappings, number, text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


@dataclass(frozen=True, slots=True)
class Interval:
    """A saving as the summary holds it (`saving_s`, `adjusted_saving_s`, ...)."""

    estimate: float | None
    low: float | None  # None: no interval at the confidence asked
    high: float | None
    confidence: float | None  # achieved
    asked_confidence: float | None
    min_p: float | None
    n: int | None
    m: int | None

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> Interval:
        return cls(number(doc.get("estimate")), number(doc.get("low")), number(doc.get("high")),
                   number(doc.get("confidence")), number(doc.get("asked_confidence")),
                   number(doc.get("min_p")), integer(doc.get("n")), integer(doc.get("m")))

    def shift(self, confidence: float = 0.95) -> Shift | None:
        """Back into the Shift it was written from (decide re-judges it); None without an
        estimate. An interval never reached reads as unbounded."""
        if self.estimate is None:
            return None
        return Shift(self.estimate, -math.inf if self.low is None else self.low,
                     math.inf if self.high is None else self.high, self.confidence or 0.0,
                     self.asked_confidence or confidence,
                     1.0 if self.min_p is None else self.min_p, self.n or 0, self.m or 0)


def _interval(value: object) -> Interval | None:
    return Interval.from_json(value) if isinstance(value, dict) else None


@dataclass(frozen=True, slots=True)
class Arms:
    """One timing's medians, cold and warm (None where not given)."""

    cold: float | None
    warm: float | None

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> Arms:
        return cls(number(mapping(doc.get("cold")).get("median")),
                   number(mapping(doc.get("warm")).get("median")))


@dataclass(frozen=True, slots=True)
class Sample:
    """One measured process, as far as decide and `bench --compare` read it."""

    kind: str | None  # cold | warm | prime
    hit: bool  # any module hit
    missed_ranks: tuple[int | None, ...]  # the ranks that compiled again what cold wrote
    trial: int | None = None
    wall_s: float | None = None
    first_step_s: float | None = None
    compile_or_load_s: float | None = None
    comparable: bool = True  # False: excluded from the bench's statistics

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> Sample:
        return cls(text(doc.get("kind")), bool(doc.get("hits")),
                   tuple(integer(m.get("rank")) for m in mappings(doc.get("missed_ranks"))),
                   integer(doc.get("trial")), number(doc.get("wall_s")),
                   number(doc.get("first_step_s")),
                   number(mapping(doc.get("phases")).get("compile_or_load")),
                   doc.get("comparable") is not False)


@dataclass(frozen=True, slots=True)
class LeftOut:
    """What JAX's write thresholds left uncached in the cold runs (thresholds.left_out)."""

    modules: int
    seconds: float
    share: float | None
    material: bool  # beyond the line and its margin (thresholds.py)
    suggestion: str
    near: bool = False  # within the margin of the line

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> LeftOut | None:
        """None where no module was left out."""
        modules = doc.get("modules")
        if not isinstance(modules, int) or not modules:
            return None
        return cls(modules, number(doc.get("seconds")) or 0.0, number(doc.get("share")),
                   doc.get("material") is True, str(doc.get("suggestion")),
                   doc.get("near") is True)


@dataclass(frozen=True, slots=True)
class BenchDocument:
    command: tuple[str, ...]
    comparable: Mapping[str, object]  # what makes timings comparable, field by field
    shapes: tuple[tuple[str, str], ...] | None  # comparable's (module, input shapes); None:
    #                                             not a list
    samples: tuple[Sample, ...]
    verdict: str
    message: str | None
    judged_on: str | None  # adjusted | unadjusted (None: a result before issue 26)
    saving: Interval | None
    adjusted_saving: Interval | None
    compile_saving: Interval | None
    wall: Arms | None
    phases: tuple[tuple[str, Arms], ...]
    bar: tuple[float | None, float | None]  # the bench's own min_saving_s, min_fraction
    left_out: LeftOut | None
    thresholds_set: tuple[tuple[str, str], ...]  # (JAX option, value) the bench set
    # config.for_cache: the cache directory whose job it measured (decide PATH -- CMD, bench
    # --for-cache, or the project file's cache_dir where bench ran)
    for_cache: str | None = None
    config: Mapping[str, object] | None = None  # the bench's settings (`config`), field by field
    # JAX's write thresholds in the bench's runs (`thresholds`; None: not recorded)
    min_compile_time_s: float | None = None
    min_entry_size_bytes: int | None = None
    # config.cwd: the folder bench ran the job from (None: a bench from before it was kept)
    cwd: str | None = None

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> BenchDocument:
        summary = mapping(doc.get("summary"))
        comparable = mapping(doc.get("comparable"))
        shapes = comparable.get("shapes")
        wall = summary.get("wall")
        bar = mapping(summary.get("noticeable_bar"))
        thresholds = mapping(doc.get("thresholds"))
        message = summary.get("message")
        return cls(tuple(str(a) for a in items(doc.get("command"))), comparable,
                   tuple((str(d.get("module")), str(d.get("input_shapes")))
                         for d in mappings(shapes)) if isinstance(shapes, list) else None,
                   tuple(Sample.from_json(s) for s in mappings(doc.get("samples"))),
                   str(summary.get("verdict")), None if message is None else str(message),
                   text(summary.get("judged_on")), _interval(summary.get("saving_s")),
                   _interval(summary.get("adjusted_saving_s")),
                   _interval(summary.get("compile_saving_s")),
                   Arms.from_json(wall) if isinstance(wall, dict) else None,
                   tuple((str(name), Arms.from_json(mapping(arms)))
                         for name, arms in mapping(summary.get("phases")).items()),
                   (number(bar.get("min_saving_s")), number(bar.get("min_fraction"))),
                   LeftOut.from_json(mapping(thresholds.get("left_out"))),
                   tuple((str(k), v) for k, v in mapping(thresholds.get("set_by_bench")).items()
                         if isinstance(v, str)),
                   text(mapping(doc.get("config")).get("for_cache")),
                   mapping(doc.get("config")), number(thresholds.get("min_compile_time_secs")),
                   integer(thresholds.get("min_entry_size_bytes")),
                   text(mapping(doc.get("config")).get("cwd")))

    @property
    def judged(self) -> Interval | None:
        """The saving the verdict was judged on: `adjusted_saving_s` when `judged_on` says so
        (issue 26), else `saving_s` (every result before it)."""
        return self.adjusted_saving if self.judged_on == "adjusted" else self.saving
