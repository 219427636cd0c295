"""What the run records say of each cache key: when a job last loaded it, what it cost to
compile, how many runs asked for it.

gc reads it for two things. Last use: a hit in a run record counts as a use of the entry (a
bucket keeps no `-atime` file and no marker, and a reader writes nothing to it; in a directory
JAX's `-atime` file and the marker also say it). And value (`--order value`): an entry that
took long to compile, is small and is asked for by many runs is worth keeping; one never seen
compiled in a record has no known value and goes first. The records are this machine's (the
state directory): jobs run elsewhere are not in them, so a key they use reads as unused here
unless the cache's own times say otherwise. Reading them is records/key_uses.py's (the records
sit above gc).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class KeyUse:
    last_hit_ns: int = 0  # 0: no record shows a hit
    compile_s: float | None = None  # the latest compile time a record shows (a miss)
    runs: int = 0  # records that asked for the key (hit or compiled)


def value(use: KeyUse | None, size: int) -> float:
    """Compile seconds saved per byte kept, times the runs that asked: 0 where no record
    shows the entry compiled (its worth is not known)."""
    if use is None or use.compile_s is None:
        return 0.0
    return use.compile_s * max(1, use.runs) / max(1, size)
