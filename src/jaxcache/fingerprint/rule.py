"""The one rule: may an entry compiled under the writer's fingerprint be loaded by this reader?

Per field (FIELDS, docs/reference/fingerprint.md):
- build (the digest over jaxlib's and the plugins' shared objects): EXACT. Another build of the
  same version may lay out or call its code otherwise (vmex issue 222: an in-place rebuild
  loaded old entries and crashed).
- machine (the architecture): EXACT.
- CPU features: SUBSET. Code compiled for the writer's features runs on a host that has all of
  them and more; a feature the writer had and the reader lacks can mean SIGILL.
- platform version and compute capability (known inside a job only): EXACT where both sides
  know them; JAX's key holds the platform version already, so this only confirms it.
- the CPU model and the device kind are shown, never judged.
A side that does not know a field (no build: an older signature, an audit without JAX; no CPU
features: a writer whose /proc/cpuinfo was unreadable or lists none) makes the outcome
UNKNOWN, never a match: the caller decides (a sealed reader loads it only where its
policy does not require a known build, and says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from jaxcache.fingerprint.model import SHORT, Fingerprint
from jaxcache.text import safe


class Match(Enum):
    EXACT = "exact"
    SUBSET = "subset"  # the writer's values are among the reader's


class Field(Enum):
    BUILD = "build"
    MACHINE = "machine"
    CPU_FEATURES = "cpu features"
    PLATFORM_VERSION = "platform version"
    COMPUTE_CAPABILITY = "compute capability"

    @property
    def match(self) -> Match:
        return Match.SUBSET if self is Field.CPU_FEATURES else Match.EXACT


FIELDS = tuple(Field)


class Outcome(Enum):
    SAME = "same"  # every field equal
    COMPATIBLE = "compatible"  # the writer's CPU features a strict subset of the reader's
    DIFFERENT = "different"  # a field fails its match: never load
    UNKNOWN = "unknown"  # a side does not know its build

    @property
    def loads(self) -> bool:
        return self in (Outcome.SAME, Outcome.COMPATIBLE)

    @property
    def words(self) -> str:
        return {Outcome.SAME: "same build and host",
                Outcome.COMPATIBLE: "same build; the writer's CPU features are all here",
                Outcome.DIFFERENT: "another build or host",
                Outcome.UNKNOWN: "build unknown"}[self]


@dataclass(frozen=True, slots=True)
class Difference:
    field: Field
    writer: str
    reader: str

    @property
    def sentence(self) -> str:
        """In words, each value escaped (a record or a signature names them: text.safe)."""
        w, r = safe(self.writer), safe(self.reader)
        if self.field is Field.BUILD:
            return f"another jaxlib build: digest {w} (writer) vs {r} (here)"
        if self.field is Field.CPU_FEATURES:
            return f"the writer's CPU has {w} that this host lacks"
        return f"another {self.field.value}: {w} (writer) vs {r} (here)"


@dataclass(frozen=True, slots=True)
class Judgement:
    outcome: Outcome
    differences: tuple[Difference, ...] = ()
    why_unknown: str = ""

    @property
    def loads(self) -> bool:
        return self.outcome.loads

    @property
    def reason(self) -> str:
        if self.outcome is Outcome.UNKNOWN:
            return f"build unknown ({self.why_unknown})"
        if self.differences:
            return "; ".join(d.sentence for d in self.differences)
        return self.outcome.words


def _clip_features(names: set[str], most: int = 8) -> str:
    shown = sorted(names)
    text = ", ".join(shown[:most])
    return text + (f" and {len(shown) - most} more" if len(shown) > most else "")


def judge(writer: Fingerprint | None, reader: Fingerprint) -> Judgement:
    """Whether `writer`'s entries may load under `reader` (the host judging now)."""
    if writer is None or writer.build is None:
        return Judgement(Outcome.UNKNOWN, why_unknown="the writer's build was not recorded")
    if reader.build is None:
        return Judgement(Outcome.UNKNOWN, why_unknown="no jaxlib in this Python to compare")
    diffs: list[Difference] = []
    if writer.build.digest != reader.build.digest:
        diffs.append(Difference(Field.BUILD, writer.build.digest[:SHORT],
                                reader.build.digest[:SHORT]))
    if writer.machine != reader.machine:
        diffs.append(Difference(Field.MACHINE, writer.machine or "?", reader.machine or "?"))
    extra = set(writer.cpu.features) - set(reader.cpu.features)
    if extra:
        diffs.append(Difference(Field.CPU_FEATURES, _clip_features(extra), ""))
    a, b = writer.accelerator, reader.accelerator
    if a is not None and b is not None:
        for f, x, y in ((Field.PLATFORM_VERSION, a.platform_version, b.platform_version),
                        (Field.COMPUTE_CAPABILITY, a.compute_capability,
                         b.compute_capability)):
            if x and y and x != y:
                diffs.append(Difference(f, x, y))
    if diffs:
        return Judgement(Outcome.DIFFERENT, tuple(diffs))
    if not writer.cpu.features:  # an unreadable /proc/cpuinfo, or an architecture that lists
        # no features: an empty set would be a subset of every host's, so it proves nothing
        return Judgement(Outcome.UNKNOWN, why_unknown="the writer's CPU features were not "
                                                      "recorded")
    if set(writer.cpu.features) != set(reader.cpu.features):
        return Judgement(Outcome.COMPATIBLE)
    return Judgement(Outcome.SAME)


def between(a: Fingerprint | None, b: Fingerprint | None) -> tuple[Difference, ...]:
    """What differs between two processes' fingerprints, both ways (explain and decide:
    jobs that would share one cache must each load what the other writes)."""
    if a is None or b is None:
        return ()
    there, back = judge(a, b), judge(b, a)
    seen: list[Difference] = list(there.differences)
    for d in back.differences:
        if d.field is Field.CPU_FEATURES:
            seen.append(d)
    return tuple(seen)
