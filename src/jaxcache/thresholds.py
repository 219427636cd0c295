"""What JAX's write thresholds left out of the cache, and whether that matters at start-up.

JAX writes an entry only when its compile took at least jax_persistent_cache_min_compile_time_secs
(1 s by default) and it is at least jax_persistent_cache_min_entry_size_bytes. A job whose
compiles are all quick writes nothing, and that is right unless the quick compiles add up: the
mission's rule is never to lower a threshold for a pretty number, so lowering one is suggested
only when what they left out is material, at least MATERIAL_SECONDS and MATERIAL_FRACTION of the
start-up. Those figures are timings, and a loaded machine stretches them: within a factor of
MARGIN of the line, either side, what was left out is NEAR the line, said as such, and no exit
code rests on it (explain exits 1 only for MATERIAL beyond the margin), so one job's answer does
not flip with the machine's load. One rule and one sentence for run's summary, enable()'s result,
bench, decide and explain.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Protocol

    class Compiled(Protocol):
        """A compiled module as the run record's model reads it (records/run_document.py's
        ModuleEntry: this layer is below it)."""

        @property
        def outcome_word(self) -> str | None: ...

        @property
        def reason(self) -> str | None: ...

        @property
        def reason_detail(self) -> Mapping[str, object]: ...

        @property
        def compile_s_logged(self) -> float | None: ...

        @property
        def compile_or_load_s(self) -> float | None: ...

MATERIAL_FRACTION, MATERIAL_SECONDS = 0.10, 1.0
# How far a figure must be from its line to count on either side: one job's left-out seconds and
# their share of start-up move with the machine's load. benchmarks/left_out_spread.py measured the
# bundled example cold, 5 runs under each of 0, 2 and 4 CPU burners on this project's 2-core
# machine: within one load the share moved up to 1.9x and the seconds 2.3x (3.4x across loads);
# the share is the figure that decides. Material is 2 s and 20% or more, not material under 0.5 s
# or 5%, near the line between.
MARGIN = 2.0


class Materiality(enum.Enum):
    """What the thresholds left out, judged against the line with its margin."""

    MATERIAL = "material"  # beyond the margin on both figures: a lower threshold is worth a bench
    NEAR = "near the line"  # within the margin: measure before acting, no exit code rests on it
    NOT_MATERIAL = "not material"  # under the margin on one figure: keep the thresholds

SUGGESTED_STEPS = (0.5, 0.1, 0.0)  # the --min-compile-time a material left-out is told to bench
COMPILE_TIME = "compile-time-below-threshold"
ENTRY_SIZE = "entry-size-below-threshold"
REASONS = (COMPILE_TIME, ENTRY_SIZE)
# the flags of run, bench and decide, and the job-environment variable JAX reads each from
# (a project file's min_compile_time and min_entry_size give way to them: jaxcache/project/)
COMPILE_VARIABLE = "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"
SIZE_VARIABLE = "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"
FLAGS = {"--min-compile-time": COMPILE_VARIABLE, "--min-entry-size": SIZE_VARIABLE}


class LeftOut(NamedTuple):
    """The compiles a threshold kept out of the cache in one job (or process)."""

    modules: int  # not written because of a threshold
    seconds: float  # their compile time, added up
    startup_s: float  # the job's wall time (0.0: not known)
    written: int  # entries written in the same job
    shortest_s: float  # the quickest of those compiles (what a lower threshold must go under)
    by_size: int = 0  # of `modules`, those the entry-size threshold left out

    @property
    def materiality(self) -> Materiality:
        """MATERIAL when both figures are beyond their lines by MARGIN, NOT_MATERIAL when one
        is under its line by MARGIN (or the start-up is unknown), NEAR otherwise."""
        share = self.share
        if share is None or not _at_least(self.seconds, MATERIAL_SECONDS / MARGIN) \
                or not _at_least(share, MATERIAL_FRACTION / MARGIN):
            return Materiality.NOT_MATERIAL
        if _at_least(self.seconds, MATERIAL_SECONDS * MARGIN) and \
                _at_least(share, MATERIAL_FRACTION * MARGIN):
            return Materiality.MATERIAL
        return Materiality.NEAR

    @property
    def material(self) -> bool:
        return self.materiality is Materiality.MATERIAL

    @property
    def near(self) -> bool:
        return self.materiality is Materiality.NEAR

    @property
    def share(self) -> float | None:
        return self.seconds / self.startup_s if self.startup_s > 0 else None

    def suggestion(self) -> str:
        """The one setting that would cache them, as run, bench and decide take it: a step of
        a short ladder (0.5, 0.1, 0) at or below the shortest compile left out, so two runs of
        one job, whose shortest compile differs by a few ms, are told the same setting (a
        hundredth-second grid told one 0.01 and the other 0)."""
        if self.by_size == self.modules:
            return "--min-entry-size 0"
        step = next((s for s in SUGGESTED_STEPS if s <= self.shortest_s), 0.0)
        return f"--min-compile-time {step:g}"

    def sentence(self, argv: object = None) -> str:
        """One sentence: how much, its share of start-up, material or not, and what to do
        (`jaxcache bench FLAG -- ` the job's `argv`, whole and escaped; CMD where unknown)."""
        command = _command(argv)
        if not self.modules:
            return "no compile was left out by JAX's write thresholds"
        head = "nothing written: " if not self.written else ""
        share = f"{self.share:.0%}" if self.share is not None else "an unknown share"
        of = f" of the {self.startup_s:.2f} s start-up" if self.startup_s > 0 else " of start-up"
        what = (f"{head}{self.modules} compile{'s' if self.modules != 1 else ''} under JAX's "
                f"write thresholds went uncached: {self.seconds:.2f} s of compile, {share}{of}")
        judged = self.materiality
        if judged is Materiality.NOT_MATERIAL and self.share is None:
            return (f"{what}; not judged material: the start-up is not known, so its share "
                    "is not either; keep the thresholds")
        if judged is Materiality.NOT_MATERIAL:
            why = (f"under {MATERIAL_SECONDS / MARGIN:g} s" if not _at_least(
                self.seconds, MATERIAL_SECONDS / MARGIN) else
                f"under {MATERIAL_FRACTION / MARGIN * 100:g}% of start-up")  # what decided
            return (f"{what}; not material ({why}): keep the thresholds, the cache is doing "
                    "what it should")
        measure = (f"jaxcache bench {self.suggestion()} -- {command} (run and decide take the "
                   "same flag, enable() min_compile_time=)")
        if judged is Materiality.NEAR:
            return (f"{what}; near the line ({MATERIAL_SECONDS:g} s and "
                    f"{MATERIAL_FRACTION:.0%} of start-up, within the factor of {MARGIN:g} a "
                    "machine's load moves it): keep the thresholds unless a bench says "
                    f"otherwise: {measure}")
        return (f"{what}; material (at least {MATERIAL_SECONDS * MARGIN:g} s and "
                f"{MATERIAL_FRACTION * MARGIN * 100:g}% of start-up): a lower threshold would "
                f"cache them, at the cost of {self.modules} more, smaller entries to store, "
                f"trust and keep; measure it first: {measure}")


def _at_least(figure: float, line: float) -> bool:
    """figure >= line, as a person reads it: 0.1 * 1.5 is 0.15000000000000002 in floats, and
    0.15 must reach it."""
    return figure >= line * (1 - 1e-9)


def _command(argv: object) -> str:
    """The job's command line as a shell would take it back, whole: a command the user is told
    to run is never cut (issue 44); escaped, so a writer's newline cannot break the line (a
    record's argv is a writer's: anything but a list of words is CMD)."""
    import shlex

    from jaxcache.text import safe

    if not isinstance(argv, list | tuple) or not argv:
        return "CMD"
    return safe(shlex.join(str(a) for a in argv))


def left_out(modules: Sequence[Compiled], startup_s: float) -> LeftOut:
    """What JAX's write thresholds left out of a run's modules (a RunRecord's `modules`):
    the compile time JAX logged for each, else the one the probe timed."""
    left = [m for m in modules if m.reason in REASONS]
    times = [_seconds(m.reason_detail.get("compile_s"), m.compile_s_logged, m.compile_or_load_s)
             for m in left]
    written = sum(1 for m in modules if m.outcome_word == "written")
    return LeftOut(len(left), sum(times), startup_s, written, min(times, default=0.0),
                   sum(1 for m in left if m.reason == ENTRY_SIZE))


def _seconds(*measured: object) -> float:
    """The first positive time of those measured, in order of preference."""
    for value in measured:
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            return float(value)
    return 0.0
